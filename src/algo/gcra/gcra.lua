--[[ gcra.lua - the generic cell rate algorithm (see src/algo/prelude.lua
for the arguments and reply of every algorithm).

KEYS[i]  one string per request: the theoretical arrival time (TAT) in ms,
         then ':' and its remainder in 1/max ms when it has one
         ("1733000000123" or "1733000000123:2"), expiring (PX) when the
         bucket is full again
ARGV[5]  unused here; ARGV[6 + n] the burst (absent: max)

Mirrors src/algo/gcra/gcra.c line for line; see it for the arithmetic (in
units of 1/max ms, every figure <= max x window <= 2^53). A clock that
reads more than a window before TAT is held at TAT - window. A value
that is not two such numbers of at most 16 digits is another's. ]]

-- TAT's whole ms pass 2^53 (a double's last exact integer) when the clock
-- nears 2^53, so they are read and written in two parts, the ms above and
-- below 10^6: every figure stays exact.
local E6 = 1000000
local function split(digits)
  local n = #digits
  if n <= 6 then return 0, tonumber(digits) end
  return tonumber(string.sub(digits, 1, n - 6)), tonumber(string.sub(digits, n - 5))
end
local function join(hi, lo)
  local carry = fdiv(lo, E6)
  hi, lo = hi + carry, lo - carry * E6
  if hi == 0 then return str(lo) end
  return str(hi) .. string.format('%06d', lo)
end

local function decide(key, cost)
  local now = clock()
  local nh = fdiv(now, E6)
  local nl = now - nh * E6
  local raw = redis.pcall('GET', key)
  if type(raw) == 'table' then return -1, 0, 0, 0 end
  local debt = 0
  if raw then
    local q, r = string.match(raw, '^(%d+)$'), '0'
    if not q then q, r = string.match(raw, '^(%d+):(%d+)$') end
    if not q or #q > 16 or #r > 16 then return -1, 0, 0, 0 end
    local qh, ql = split(q)
    r = tonumber(r)
    if r >= max then ql, r = ql + 1, 0 end
    local ahead = (qh - nh) * E6 + (ql - nl)
    if ahead > 0 or (ahead == 0 and r > 0) then
      if ahead > w or (ahead == w and r > 0) then
        debt = max * w
      else
        debt = ahead * max + r
      end
    end
  end
  local allowed, retry = 0, 0
  if debt <= (burst - cost) * w then
    allowed = 1
    debt = debt + cost * w
    if consume then
      local rem = math.fmod(debt, max)
      local val = join(nh, nl + (debt - rem) / max)
      if rem > 0 then val = val .. ':' .. str(rem) end
      redis.call('SET', key, val, 'PX', str(cdiv(debt, max)))
    end
  else
    retry = cdiv(debt - (burst - cost) * w, max)
  end
  local remaining = 0
  if debt < burst * w then remaining = fdiv(burst * w - debt, w) end
  return allowed, remaining, retry, cdiv(debt, max)
end
