--[[ queue_admin.lua - a queue's stats, its cap, and its failed jobs.

KEYS[1]  emq:{q}:wait      KEYS[2]  emq:{q}:active    KEYS[3]  emq:{q}:delayed
KEYS[4]  emq:{q}:data      KEYS[5]  emq:{q}:meta      KEYS[6]  emq:{q}:limiter
KEYS[7]  emq:{q}:attempts  KEYS[8]  emq:{q}:failed
ARGV[1]  "stats", "cap", "retry", "failed" or "state"
  stats          Reply {waiting, active, delayed, failed, completed, max,
                 duration_ms, count in the window, wait_ms}; wait_ms is the
                 queue-limiter read's figure (limiter.lua); no cap is max 0
                 and duration_ms 0, a cap of 0 or less max 0 and its
                 duration
  cap MAX DUR    sets the cap (MAX 0 removes it: not limited); Reply 1
  retry ID       moves failed job ID back to wait, its attempts reset;
                 Reply 1, or 0 when ID is not a failed job
  failed N       Reply the ids of up to N failed jobs, oldest first
  state ID L     where job ID is, for the holder of lease L (a read):
                 Reply 1 active under lease L, 2 active under another,
                 3 waiting or delayed (its data is kept, and it is in
                 neither set), 4 failed, 5 gone (completed: no data)
It reads no clock, so it takes none (now.lua): the stats' wait is the
counter's PTTL. ]]
--! include limiter.lua
local op = ARGV[1]
if op == 'stats' then
  local wait, max, duration = limiter_state(KEYS[6], KEYS[5], 0)
  local count = tonumber(redis.call('GET', KEYS[6]) or '') or 0
  local completed = redis.call('HGET', KEYS[5], 'completed')
  -- No cap is max 0 with duration 0, and a cap of 0 or less (written into
  -- the meta hash by another tool; sluice's 'cap 0' removes the cap) is max
  -- 0 with its duration, so that the two read apart: a duration alone,
  -- with no max, is no cap.
  if not max then duration = nil end
  if not max or max < 0 then max = 0 end
  return {redis.call('LLEN', KEYS[1]), redis.call('ZCARD', KEYS[2]),
          redis.call('ZCARD', KEYS[3]), redis.call('ZCARD', KEYS[8]),
          tonumber(completed or '') or 0, max, duration or 0, count, wait}
elseif op == 'cap' then
  if tonumber(ARGV[2]) == 0 then
    redis.call('HDEL', KEYS[5], 'max', 'duration')
  else
    redis.call('HSET', KEYS[5], 'max', ARGV[2], 'duration', ARGV[3])
  end
  return 1
elseif op == 'retry' then
  if redis.call('ZREM', KEYS[8], ARGV[2]) == 0 then return 0 end
  redis.call('HDEL', KEYS[7], ARGV[2], ARGV[2] .. ':s')
  redis.call('LPUSH', KEYS[1], ARGV[2])
  return 1
elseif op == 'failed' then
  return redis.call('ZRANGE', KEYS[8], 0, tonumber(ARGV[2]) - 1)
elseif op == 'state' then
  local id = ARGV[2]
  if redis.call('ZSCORE', KEYS[2], id) then
    if redis.call('HGET', KEYS[7], id .. ':l') == ARGV[3] then return 1 end
    return 2
  end
  if redis.call('ZSCORE', KEYS[8], id) then return 4 end
  if redis.call('HEXISTS', KEYS[4], id) == 1 then return 3 end
  return 5
end
return redis.error_reply('ERR sluice: unknown queue operation ' .. op)
