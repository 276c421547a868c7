--[[ sliding_log.lua - the sliding log (see src/algo/prelude.lua for the
arguments and reply of every algorithm).

KEYS[i]  one sorted set per request: a member per admitted unit, scored by
         its time in ms
ARGV[5]  the call's token: with the request's place in the call, it keeps
         members from colliding, even for a key named twice

Trim what left the span (score <= now - window) with ZREMRANGEBYSCORE, count
with ZCARD, admit iff live + cost <= max, then ZADD 'cost' members at now and
let the key expire one window after its newest member (never sooner than it
already would). Mirrors src/algo/sliding_log/sliding_log.c. A clock that
reads earlier than the newest member is held at it. ]]

local function decide(key, cost, place)
  local now = clock()
  local newest = redis.pcall('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest.err then return -1, 0, 0, 0 end
  if newest[2] and tonumber(newest[2]) > now then now = tonumber(newest[2]) end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', str(now - w))
  local total = redis.call('ZCARD', key)
  if total + cost <= max then
    if consume then
      local at = str(now)
      local prefix = at .. ':' .. token .. ':' .. place .. ':'
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
