--[[ queue_take.lua - the dequeue point: the reference design's enforcement
loop, in one atomic script.

KEYS[1]  emq:{q}:wait      KEYS[2]  emq:{q}:active (score: lease deadline ms)
KEYS[3]  emq:{q}:delayed   KEYS[4]  emq:{q}:data
KEYS[5]  emq:{q}:meta      KEYS[6]  emq:{q}:limiter
KEYS[7]  emq:{q}:attempts  (field ID: times taken since the job was added or
                           retried; field ID:l: its lease's token)
ARGV[1]  the lease in ms
Reply    {1, id, attempt, payload, lease}  a job, now active under a lease
                                    whose token 'lease' is unique for ever;
         {0, wait_ms, max}          over budget: take nothing, wait;
         {-1, next_ms}              nothing to take; next_ms > 0 is when a
                                    delayed job or a lease falls due, else 0

First, jobs whose time has come move to wait: delayed jobs that are due
(to the back of the line) and active jobs whose lease ran out, their worker
presumed dead (to the front, as they were taken before). Then the cap: the
fields 'max' and 'duration' of meta; a queue without 'max' is not limited.
When the counter emq:{q}:limiter has reached max and its window has time
left, nothing is taken and the wait is the counter's PTTL, the figure of the
queue-limiter read. Otherwise the next job is taken, and the counter is
incremented by the fixed window's own counter step (counter.lua), its
expiry armed only by the increment that created it. ]]
--! include now.lua
--! include ../../algo/fixed/counter.lua
local now = now_ms()
local nowtext = string.format('%.0f', now)
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', nowtext, 'LIMIT', 0, 1000)
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[3], id)
  redis.call('LPUSH', KEYS[1], id)
end
local lost = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', nowtext, 'LIMIT', 0, 1000)
for _, id in ipairs(lost) do
  redis.call('ZREM', KEYS[2], id)
  redis.call('RPUSH', KEYS[1], id)
end
local cap = redis.call('HMGET', KEYS[5], 'max', 'duration')
local max = tonumber(cap[1] or '') or 0
local duration = tonumber(cap[2] or '') or 0
if max > 0 then
  local count = tonumber(redis.call('GET', KEYS[6]) or '')
  local ttl = count and redis.call('PTTL', KEYS[6])
  if ttl == 0 then
    -- Its expiry is this very millisecond; the server drops it only after
    -- it. As fixed.lua does, take the window as over now, so this job
    -- begins a new window instead of going over (or into) the old one.
    redis.call('DEL', KEYS[6])
  elseif count and count >= max then
    if ttl > 0 then return {0, ttl, max} end
    if ttl == -1 and duration > 0 then
      redis.call('PEXPIRE', KEYS[6], duration) -- never block forever
      return {0, duration, max}
    end
  end
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
  redis.call('HDEL', KEYS[7], id, id .. ':l')
  return {-1, 1}
end
redis.call('ZADD', KEYS[2], string.format('%.0f', now + tonumber(ARGV[1])), id)
local attempt = redis.call('HINCRBY', KEYS[7], id, 1)
local lease = redis.call('HINCRBY', KEYS[5], 'lease', 1)
redis.call('HSET', KEYS[7], id .. ':l', lease)
if max > 0 and duration > 0 then
  local n, err = counter_incr(KEYS[6], 1, duration)
  if not n then return err end
elseif max > 0 then
  redis.call('INCR', KEYS[6]) -- a cap without a window: counted, never armed
end
return {1, tonumber(id), attempt, payload, lease}
