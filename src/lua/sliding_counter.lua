--[[ sliding_counter.lua - the sliding-window counter.

KEYS[1]  the limit's hash: w (window_ms), i (current window's index),
         c (its count), p (the previous window's count)
ARGV[1]  max            ARGV[2]  window_ms      ARGV[3]  cost
ARGV[4]  "1" to count an admitted request, "0" to only look (peek)
ARGV[5]  now in ms, or "" to read the server's clock (TIME)
Reply    {allowed, remaining, retry_after_ms, reset_after_ms}, integers

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
local max, w, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now = tonumber(ARGV[5])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + fdiv(tonumber(t[2]), 1000)
end
local key = KEYS[1]
local s = redis.call('HMGET', key, 'w', 'i', 'c', 'p')
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
  if ARGV[4] == '1' then
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
return {allowed, remaining, retry, reset}
