--[[ queue_done.lua - completes, fails or extends a job held under a lease.

KEYS[1]  emq:{q}:wait      KEYS[2]  emq:{q}:active    KEYS[3]  emq:{q}:delayed
KEYS[4]  emq:{q}:data      KEYS[5]  emq:{q}:meta      KEYS[6]  emq:{q}:attempts
KEYS[7]  emq:{q}:failed    (score: when it failed for good, ms)
ARGV[1]  the job id        ARGV[2]  the lease token the worker holds
ARGV[3]  "complete", "fail" or "extend"
ARGV[4]  with fail: the most attempts (a job taken that often fails for good);
         with extend: the lease's new length in ms, from now
ARGV[5]  with fail: the back-off in ms before the next attempt, doubled at
         each attempt
ARGV[6]  now in ms, or "" (or absent) to read the server's clock (TIME):
         what a new lease, a back-off and a failure time count from
         (now.lua)
Reply    1 completed, 2 to be retried, 3 failed for good, 4 extended;
         0 the lease was lost: the job is no longer this worker's (its lease
         ran out and it went back to wait, or another worker holds it now)

A lease is proven by its token: the job must still be active and its
latest lease the one the worker holds. Tokens come from one counter that
never repeats, so a worker whose lease ran out can never complete or fail a
job that another worker is doing, and a job is never done twice by live
workers. ]]
--! include now.lua
local id = ARGV[1]
if not redis.call('ZSCORE', KEYS[2], id) then return 0 end
if redis.call('HGET', KEYS[6], id .. ':l') ~= ARGV[2] then return 0 end
if ARGV[3] == 'extend' then -- a heartbeat: the lease holds a while longer
  redis.call('ZADD', KEYS[2], 'XX', string.format('%.0f', now_ms(ARGV[6]) + tonumber(ARGV[4])), id)
  return 4
end
redis.call('ZREM', KEYS[2], id)
if ARGV[3] == 'complete' then
  redis.call('HDEL', KEYS[4], id)
  redis.call('HDEL', KEYS[6], id, id .. ':l', id .. ':s')
  redis.call('HINCRBY', KEYS[5], 'completed', 1)
  return 1
end
local now = now_ms(ARGV[6])
local attempt = tonumber(redis.call('HGET', KEYS[6], id) or '1')
if attempt >= tonumber(ARGV[4]) then
  redis.call('ZADD', KEYS[7], string.format('%.0f', now), id)
  return 3
end
local backoff = tonumber(ARGV[5]) * 2 ^ (attempt - 1)
if backoff > 0 then
  redis.call('ZADD', KEYS[3], string.format('%.0f', now + backoff), id)
else
  redis.call('LPUSH', KEYS[1], id)
end
return 2
