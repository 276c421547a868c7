--[[ sliding_counter.lua - the sliding-window counter.

KEYS[1..n]  one hash per request: w (window_ms), i (current window's
         index), c (its count), p (the previous window's count)
ARGV[1]  max            ARGV[2]  window_ms
ARGV[3]  "1" to count admitted requests, "0" to only look (peek)
ARGV[4]  now in ms, or "" to read the server's clock (TIME), once for all
ARGV[5]  unused here (the sliding log's token)
ARGV[5 + i]  the cost of request i
Reply    {allowed, remaining, retry_after_ms, reset_after_ms} for each
         request in turn, flat: 4n integers. allowed is 1 or 0, or -1 when
         the key holds something else than a hash (nothing is changed).

Mirrors src/algo_counter.c line for line; see it for the arithmetic. Every
product stays <= 2^53 and every division is done on exact remainders
(math.fmod), so the doubles here give the C code's integers. Numbers are
written with %.0f, never Lua's default %.14g. A clock that reads earlier than
the key's window is held at that window's start. ]]
local function fdiv(a, b) return (a - math.fmod(a, b)) / b end
local function cdiv(a, b)
  local r = math.fmod(a, b)
  if r == 0 then return a / b end
  return (a - r) / b + 1
end
local function str(n) return string.format('%.0f', n) end
local max, w = tonumber(ARGV[1]), tonumber(ARGV[2])
local consume = ARGV[3] == '1'
local clock = tonumber(ARGV[4])
if not clock then
  local t = redis.call('TIME')
  clock = tonumber(t[1]) * 1000 + fdiv(tonumber(t[2]), 1000)
end

local function decide(key, cost)
  local now = clock
  local s = redis.pcall('HMGET', key, 'w', 'i', 'c', 'p')
  if s.err then return -1, 0, 0, 0 end
  local idx = fdiv(now, w)
  local cur, prev = 0, 0
  if tonumber(s[1]) == w and tonumber(s[2]) then
    local si = tonumber(s[2])
    if idx < si then
      idx = si
      now = si * w
    end
    if si == idx then
      cur, prev = tonumber(s[3]), tonumber(s[4])
    elseif si + 1 == idx then
      prev = tonumber(s[3])
    end
  end
  local elapsed = now - idx * w
  local r = w - elapsed
  local wceil = cdiv(prev * r, w)
  local allowed, retry = 0, 0
  if cur + wceil + cost <= max then
    allowed = 1
    cur = cur + cost
    if consume then
      redis.call('HSET', key, 'w', str(w), 'i', str(idx), 'c', str(cur), 'p', str(prev))
      redis.call('PEXPIRE', key, str(2 * w - elapsed))
    end
  else
    if cur + cost <= max and prev > 0 then
      local rr = fdiv((max - cur - cost) * w, prev)
      if rr >= 1 then retry = (w - rr) - elapsed end
    end
    if retry == 0 then
      if cur == 0 then
        retry = w - elapsed
      else
        local rr = fdiv((max - cost) * w, cur)
        local e = 0
        if rr < w then e = w - rr end
        retry = (w - elapsed) + e
      end
    end
  end
  local used = cur + wceil
  local remaining = 0
  if used < max then remaining = max - used end
  local reset = 0
  if cur > 0 then reset = 2 * w - elapsed elseif prev > 0 then reset = w - elapsed end
  return allowed, remaining, retry, reset
end

local out = {}
for i = 1, #KEYS do
  local a, b, c, d = decide(KEYS[i], tonumber(ARGV[5 + i]))
  out[4 * i - 3], out[4 * i - 2], out[4 * i - 1], out[4 * i] = a, b, c, d
end
return out
