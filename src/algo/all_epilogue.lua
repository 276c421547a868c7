-- all_epilogue.lua - the end of sluice_hit_all()'s script: peek every
-- limit, then count in every one only if all admit (see all_prelude.lua).
local cost = tonumber(ARGV[6])
local out = {}
-- Decides every limit, counting when 'counting'; answers whether all admit.
local function run(counting)
  local all = true
  for i = 1, #KEYS do
    local at = 7 + 4 * (i - 1)
    local max = tonumber(ARGV[at + 1])
    local burst = tonumber(ARGV[at + 3])
    if burst == 0 then burst = max end
    local decide = makers[tonumber(ARGV[at]) + 1](max, tonumber(ARGV[at + 2]),
                                                  counting, burst)
    local a, b, c, d = decide(KEYS[i], cost, i)
    out[4 * i - 3], out[4 * i - 2], out[4 * i - 1], out[4 * i] = a, b, c, d
    if a ~= 1 then all = false end
  end
  return all
end
if run(false) and ARGV[3] == '1' then run(true) end
return out
