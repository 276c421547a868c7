--[[ queue_take.lua - the dequeue point: the reference design's enforcement
loop, in one atomic script.

KEYS[1]  emq:{q}:wait      KEYS[2]  emq:{q}:active (score: lease deadline ms)
KEYS[3]  emq:{q}:delayed   KEYS[4]  emq:{q}:data
KEYS[5]  emq:{q}:meta      KEYS[6]  emq:{q}:limiter
KEYS[7]  emq:{q}:attempts  (field ID: times taken since the job was added or
                           retried; ID:l its lease's token; ID:s how often
                           its lease ran out)
KEYS[8]  emq:{q}:failed    (score: when it failed for good, ms)
ARGV[1]  the lease in ms
ARGV[2]  the stalled limit: how often a job's lease may run out (its worker
         presumed dead) before it fails for good instead of going back
ARGV[3]  now in ms, or "" (or absent) to read the server's clock (TIME):
         the clock of due delays, leases and failure times (now.lua). The
         cap's window is the counter's own lifetime (PTTL), so it keeps the
         server's clock, as the fixed window does with clock=caller
Reply    {1, id, attempt, payload, lease}  a job, now active under a lease
                                    whose token 'lease' is unique for ever;
         {0, wait_ms, max}          over budget: take nothing, wait (max 0:
                                    a cap of 0 or less);
         {-1, next_ms}              nothing to take; next_ms > 0 is when a
                                    delayed job or a lease falls due, else 0;
         an error when the cap has a 'max' but no 'duration': it could not
         be enforced.

First, jobs whose time has come move: delayed jobs that are due to the back
of the line, and active jobs whose lease ran out, their worker presumed dead,
to the front (they were taken before) or, past the stalled limit, to the
failed set. Then the cap, read as the queue-limiter read reads it
(limiter.lua): while the counter emq:{q}:limiter has reached it and its
window has time left, nothing is taken and the wait is the counter's PTTL.
Otherwise the next job is taken, and the counter is incremented by the
fixed window's own counter step (counter.lua): its expiry is armed by the
increment that created it, or given to a counter found without one, and a
counter met in the millisecond of its expiry starts a new window. ]]
--! include now.lua
--! include limiter.lua
--! include ../../algo/fixed/counter.lua
local now = now_ms(ARGV[3])
local nowtext = string.format('%.0f', now)
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', nowtext, 'LIMIT', 0, 1000)
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[3], id)
  redis.call('LPUSH', KEYS[1], id)
end
local lost = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', nowtext, 'LIMIT', 0, 1000)
local stalled_limit = tonumber(ARGV[2]) or 1
for _, id in ipairs(lost) do
  redis.call('ZREM', KEYS[2], id)
  if redis.call('HINCRBY', KEYS[7], id .. ':s', 1) > stalled_limit then
    redis.call('ZADD', KEYS[8], nowtext, id)
  else
    redis.call('RPUSH', KEYS[1], id)
  end
end
local wait, max, duration = limiter_state(KEYS[6], KEYS[5], 0)
if max and not (duration and duration > 0) then
  return redis.error_reply('ERR sluice: the queue\'s meta hash ' .. KEYS[5] ..
    ' has a cap (max) but no duration, so it cannot be enforced')
end
if wait > 0 then
  if max < 0 then max = 0 end
  return {0, wait, max}
end
if max and redis.call('PTTL', KEYS[6]) == 0 then
  -- Its expiry is this very millisecond; the server drops it only after
  -- it. As counter.lua does, take the window as over now, before the job
  -- is taken, so the job begins the new window.
  redis.call('DEL', KEYS[6])
end
local id = redis.call('RPOP', KEYS[1])
if not id then
  local nextd = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  local nexta = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  local at = 0
  if nextd[2] then at = tonumber(nextd[2]) end
  if nexta[2] and (at == 0 or tonumber(nexta[2]) < at) then at = tonumber(nexta[2]) end
  if at > 0 then return {-1, math.max(at - now, 1)} end
  return {-1, 0}
end
local payload = redis.call('HGET', KEYS[4], id)
if not payload then
  -- data gone (removed by hand): drop the id rather than serve nothing
  redis.call('HDEL', KEYS[7], id, id .. ':l', id .. ':s')
  return {-1, 1}
end
redis.call('ZADD', KEYS[2], string.format('%.0f', now + tonumber(ARGV[1])), id)
local attempt = redis.call('HINCRBY', KEYS[7], id, 1)
local lease = redis.call('HINCRBY', KEYS[5], 'lease', 1)
redis.call('HSET', KEYS[7], id .. ':l', lease)
if max then
  local n, err = counter_incr(KEYS[6], 1, duration)
  if not n then return err end
end
return {1, tonumber(id), attempt, payload, lease}
