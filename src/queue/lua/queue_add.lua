--[[ queue_add.lua - adds jobs to queue q, in order.

KEYS[1]  emq:{q}:wait     the list of jobs ready to take (taken from the right)
KEYS[2]  emq:{q}:delayed  jobs not ready before their time (score: due ms)
KEYS[3]  emq:{q}:data     the hash of job id -> payload
KEYS[4]  emq:{q}:meta     the queue's hash: 'seq' numbers the jobs
ARGV[1]  the channel to PUBLISH the queue's name on (once per call), so idle
         workers wake
ARGV[2]  the queue's name, as published
ARGV[3]  now in ms, or "" to read the server's clock (TIME), once for all:
         what a delay counts from (now.lua)
ARGV[2 + 2i], ARGV[3 + 2i]  job i's payload (bytes) and delay in ms (0:
         ready now), for i = 1 .. n
Reply    the new jobs' ids, in order (integers >= 1, consecutive) ]]
--! include now.lua
local ids = {}
local now
for i = 4, #ARGV, 2 do
  local id = redis.call('HINCRBY', KEYS[4], 'seq', 1)
  redis.call('HSET', KEYS[3], id, ARGV[i])
  local delay = tonumber(ARGV[i + 1])
  if delay > 0 then
    now = now or now_ms(ARGV[3])
    redis.call('ZADD', KEYS[2], string.format('%.0f', now + delay), id)
  else
    redis.call('LPUSH', KEYS[1], id)
  end
  ids[#ids + 1] = id
end
-- Also for a delayed job: a sleeping worker then asks the queue and learns
-- when the job falls due.
redis.call('PUBLISH', ARGV[1], ARGV[2])
return ids
