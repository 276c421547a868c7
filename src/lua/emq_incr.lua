--[[ emq_incr.lua - the queue limiter's admit step.

KEYS[1]  emq:{q}:limiter, the queue's fixed-window counter
ARGV[1]  window_ms
Reply    {count after the increment, the counter's PTTL}

Increments the counter and arms its expiry only when this increment created
it, never again, so the window rolls. A counter found without a TTL (left by
something else) is given one, so a queue can never block forever. ]]
local n = redis.call('INCR', KEYS[1])
local ttl
if n == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
else
  ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[1])
    ttl = tonumber(ARGV[1])
  end
end
return {n, ttl}
