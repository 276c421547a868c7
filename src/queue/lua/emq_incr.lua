--[[ emq_incr.lua - the queue limiter's admit step.

KEYS[1]  emq:{q}:limiter, the queue's fixed-window counter
ARGV[1]  window_ms
ARGV[2]  optional: now in ms, or "", as the other queue scripts take it;
         unused, since the window is the counter's own lifetime (PTTL): the
         server's clock, as the fixed window keeps it with clock=caller
Reply    {count after the increment, the counter's PTTL}

The fixed window's own counter step (src/algo/fixed/counter.lua): it
increments the counter and arms its expiry only when this increment created
it, never again, so the window rolls. A counter met in the millisecond of
its expiry starts a new window; one found without a TTL (left by something
else) is given one, so a queue can never block forever. ]]
--! include ../../algo/fixed/counter.lua
local n, ttl = counter_incr(KEYS[1], 1, tonumber(ARGV[1]))
if not n then return ttl end -- the server's error, as the reply
return {n, ttl}
