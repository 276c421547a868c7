--[[ queue_add.lua - adds a job to queue q.

KEYS[1]  emq:{q}:wait     the list of jobs ready to take (taken from the right)
KEYS[2]  emq:{q}:delayed  jobs not ready before their time (score: due ms)
KEYS[3]  emq:{q}:data     the hash of job id -> payload
KEYS[4]  emq:{q}:meta     the queue's hash: 'seq' numbers the jobs
ARGV[1]  the payload (bytes)
ARGV[2]  the delay in ms (0: ready now)
ARGV[3]  the channel to PUBLISH the queue's name on (every add), so idle
         workers wake
ARGV[4]  the queue's name, as published
Reply    the new job's id (an integer >= 1) ]]
--! include now.lua
local id = redis.call('HINCRBY', KEYS[4], 'seq', 1)
redis.call('HSET', KEYS[3], id, ARGV[1])
local delay = tonumber(ARGV[2])
if delay > 0 then
  redis.call('ZADD', KEYS[2], string.format('%.0f', now_ms() + delay), id)
else
  redis.call('LPUSH', KEYS[1], id)
end
-- Also for a delayed job: a sleeping worker then asks the queue and learns
-- when the job falls due.
redis.call('PUBLISH', ARGV[3], ARGV[4])
return id
