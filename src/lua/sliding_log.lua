--[[ sliding_log.lua - the sliding log.

KEYS[1..n]  one sorted set per request: a member per admitted unit,
         scored by its time in ms
ARGV[1]  max            ARGV[2]  window_ms
ARGV[3]  "1" to count admitted requests, "0" to only look (peek)
ARGV[4]  now in ms, or "" to read the server's clock (TIME), once for all
ARGV[5]  a token unique to this call; with the request's place in the call,
         it keeps members from colliding, even for a key named twice
ARGV[5 + i]  the cost of request i
Reply    {allowed, remaining, retry_after_ms, reset_after_ms} for each
         request in turn, flat: 4n integers. allowed is 1 or 0, or -1 when
         the key holds something else than a sorted set (nothing is changed).

Trim what left the span (score <= now - window) with ZREMRANGEBYSCORE, count
with ZCARD, admit iff live + cost <= max, then ZADD 'cost' members at now and
let the key expire one window after its newest member (never sooner than
it already would). Mirrors
src/algo_log.c. A clock that reads earlier than the newest member is held at
it. ]]
local function fdiv(a, b) return (a - math.fmod(a, b)) / b end
local function str(n) return string.format('%.0f', n) end
local max, w = tonumber(ARGV[1]), tonumber(ARGV[2])
local consume = ARGV[3] == '1'
local clock = tonumber(ARGV[4])
if not clock then
  local t = redis.call('TIME')
  clock = tonumber(t[1]) * 1000 + fdiv(tonumber(t[2]), 1000)
end

local function decide(key, cost, place)
  local now = clock
  local newest = redis.pcall('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest.err then return -1, 0, 0, 0 end
  if newest[2] and tonumber(newest[2]) > now then now = tonumber(newest[2]) end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', str(now - w))
  local total = redis.call('ZCARD', key)
  if total + cost <= max then
    if consume then
      local at = str(now)
      local prefix = at .. ':' .. ARGV[5] .. ':' .. place .. ':'
      local i = 0
      while i < cost do
        local batch = {}
        local n = math.min(cost - i, 512)
        for j = 1, n do
          batch[2 * j - 1] = at
          batch[2 * j] = prefix .. str(i + j)
        end
        redis.call('ZADD', key, unpack(batch))
        i = i + n
      end
      -- Only ever extend the key's life: a call with a shorter window must
      -- not cut short entries that a longer one still counts.
      if redis.call('PTTL', key) < w then
        redis.call('PEXPIRE', key, str(w))
      end
    end
    return 1, max - total - cost, 0, w
  end
  local must = total - (max - cost)
  local leaving = redis.call('ZRANGE', key, must - 1, must - 1, 'WITHSCORES')
  newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local remaining = 0
  if total < max then remaining = max - total end
  return 0, remaining, tonumber(leaving[2]) - now + w, tonumber(newest[2]) - now + w
end

local out = {}
for i = 1, #KEYS do
  local a, b, c, d = decide(KEYS[i], tonumber(ARGV[5 + i]), i)
  out[4 * i - 3], out[4 * i - 2], out[4 * i - 1], out[4 * i] = a, b, c, d
end
return out
