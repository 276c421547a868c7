--[[ limiter.lua - the queue limiter's read: one function that the read
(emq_ttl.lua, EchoMQ's get_rate_limit_ttl), the dequeue point
(queue_take.lua) and the stats (queue_admin.lua) share, so that they can
never disagree about a queue.

limiter_state(limiter, meta, max) answers
  wait      the ms before the queue may take a job, 0 to take one now: the
            counter's PTTL when it has reached the cap and its window has
            time left. A counter with no expiry (left by something else) has
            no window, so no wait: the next take counts into it and arms it.
            One met in the very millisecond of its expiry (PTTL 0) has
            ended its window: no wait either;
  max       the cap in force: 'max' when above 0, else the field 'max' of the
            meta hash as it is (nil when there is none: not limited). As in
            BullMQ's read, a cap of 0 or less is one that any counter has
            reached;
  duration  the field 'duration' of the meta hash (nil when there is none). ]]
local function limiter_state(limiter, meta, max)
  local cap = redis.call('HMGET', meta, 'max', 'duration')
  local duration = tonumber(cap[2] or '')
  if not max or max <= 0 then max = tonumber(cap[1] or '') end
  if not max then return 0, nil, duration end
  local count = tonumber(redis.call('GET', limiter) or '')
  if not count or count < max then return 0, max, duration end
  local ttl = redis.call('PTTL', limiter)
  if ttl > 0 then return ttl, max, duration end
  return 0, max, duration
end
