--[[ emq_ttl.lua - the queue limiter's read (EchoMQ's get_rate_limit_ttl).

KEYS[1]  emq:{q}:limiter, the queue's fixed-window counter
KEYS[2]  emq:{q}:meta, the queue's hash; its field 'max' is the cap
ARGV[1]  the cap, or "0" to read it from the meta hash
Reply    the wait in ms: the counter's PTTL when it has reached the cap and
         the window still has time left; else 0 (admit), also when no cap is
         known, and when the counter has no expiry: the dequeue point reads
         it the same way (limiter.lua). A counter holding 2^53 - 1 (a manual
         block) blocks whenever a cap is known and it has an expiry. ]]
--! include limiter.lua
return (limiter_state(KEYS[1], KEYS[2], tonumber(ARGV[1])))
