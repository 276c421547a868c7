--[[ sliding_log.lua - the sliding log.

KEYS[1]  the limit's sorted set: one member per admitted unit, scored by its
         time in ms
ARGV[1]  max            ARGV[2]  window_ms      ARGV[3]  cost
ARGV[4]  "1" to count an admitted request, "0" to only look (peek)
ARGV[5]  now in ms, or "" to read the server's clock (TIME)
ARGV[6]  a token unique to this call, so members never collide
Reply    {allowed, remaining, retry_after_ms, reset_after_ms}, integers

Trim what left the span (score <= now - window) with ZREMRANGEBYSCORE, count
with ZCARD, admit iff live + cost <= max, then ZADD 'cost' members at now and
let the key expire one window after its newest member (never sooner than
it already would). Mirrors
src/algo_log.c. A clock that reads earlier than the newest member is held at
it. ]]
local function fdiv(a, b) return (a - math.fmod(a, b)) / b end
local function str(n) return string.format('%.0f', n) end
local max, w, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now = tonumber(ARGV[5])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + fdiv(tonumber(t[2]), 1000)
end
local key = KEYS[1]
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if newest[2] and tonumber(newest[2]) > now then now = tonumber(newest[2]) end
redis.call('ZREMRANGEBYSCORE', key, '-inf', str(now - w))
local total = redis.call('ZCARD', key)
if total + cost <= max then
  if ARGV[4] == '1' then
    local at = str(now)
    local prefix = at .. ':' .. ARGV[6] .. ':'
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
  local remaining = max - total - cost
  return {1, remaining, 0, w}
end
local must = total - (max - cost)
local leaving = redis.call('ZRANGE', key, must - 1, must - 1, 'WITHSCORES')
newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local remaining = 0
if total < max then remaining = max - total end
return {0, remaining, tonumber(leaving[2]) - now + w, tonumber(newest[2]) - now + w}
