--[[ emq_ttl.lua - the queue limiter's read (EchoMQ's get_rate_limit_ttl).

KEYS[1]  emq:{q}:limiter, the queue's fixed-window counter
KEYS[2]  emq:{q}:meta, the queue's hash; its field 'max' is the cap
ARGV[1]  the cap, or "0" to read it from the meta hash
ARGV[2]  optional: now in ms, or "", as the other queue scripts take it;
         unused, since the wait is the counter's PTTL: the server's clock
Reply    the wait in ms: the counter's PTTL when it has reached the cap and
         the window still has time left; else 0 (admit), also when no cap is
         known, and when the counter has no expiry: the dequeue point reads
         it the same way (limiter.lua). A counter holding 2^53 - 1 (a manual
         block) blocks whenever a cap is known and it has an expiry. With
         the cap read from the meta hash (ARGV[1] "0"), the dequeue point's
         error (queue_take.lua) when the hash has a 'max' but no duration:
         that cap cannot be enforced, so no wait read from it means
         anything. A cap passed in ARGV[1] needs no duration. ]]
--! include limiter.lua
local asked = tonumber(ARGV[1])
local wait, max, duration = limiter_state(KEYS[1], KEYS[2], asked)
if not (asked and asked > 0) and max and not (duration and duration > 0) then
  return redis.error_reply('ERR sluice: the queue\'s meta hash ' .. KEYS[2] ..
    ' has a cap (max) but no duration, so it cannot be enforced')
end
return wait
