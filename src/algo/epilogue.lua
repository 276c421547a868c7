-- epilogue.lua - the end of every algorithm's script: each request decided
-- in turn, the four figures of each in one flat reply (see prelude.lua).
local out = {}
for i = 1, #KEYS do
  local a, b, c, d = decide(KEYS[i], tonumber(ARGV[5 + i]), i)
  out[4 * i - 3], out[4 * i - 2], out[4 * i - 1], out[4 * i] = a, b, c, d
end
return out
