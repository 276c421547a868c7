--[[ emq_ttl.lua - the queue limiter's read (EchoMQ's get_rate_limit_ttl).

KEYS[1]  emq:{q}:limiter, the queue's fixed-window counter
KEYS[2]  emq:{q}:meta, the queue's hash; its field 'max' is the cap
ARGV[1]  the cap, or "0" to read it from the meta hash
Reply    the wait in ms: the counter's PTTL when it has reached the cap and
         the window still has time left; else 0 (admit), also when no cap is
         known. A counter holding 2^53 - 1 (a manual block) blocks whenever a cap
         is known. ]]
local max = tonumber(ARGV[1]) or 0
if max <= 0 then
  max = tonumber(redis.call('HGET', KEYS[2], 'max') or '') or 0
end
if max <= 0 then return 0 end
local count = tonumber(redis.call('GET', KEYS[1]) or '')
if count and count >= max then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then return ttl end
end
return 0
