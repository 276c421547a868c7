--[[ fixed.lua - the fixed window, as the reference design runs it on Valkey.

KEYS[1]  the limit's counter (a string holding an integer)
ARGV[1]  max            ARGV[2]  window_ms      ARGV[3]  cost
ARGV[4]  "1" to count an admitted request, "0" to only look (peek)
Reply    {allowed, remaining, retry_after_ms, reset_after_ms}, integers

The window is the key's own lifetime: armed with PEXPIRE by the increment
that creates the key and never again, so it rolls; PTTL is the wait. A
refused request changes nothing. A counter found without a TTL (left by
something else) is given one, so a key can never block forever. The clock is
the server's expiry clock, whichever clock the store was told to use. Mirrors
src/algo_fixed.c. ]]
local max, window, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local key = KEYS[1]
local raw = redis.call('GET', key)
local count = 0
local ttl = window
if raw then
  count = tonumber(raw)
  if not count then
    return redis.error_reply('ERR sluice: ' .. key .. ' does not hold a number')
  end
  ttl = redis.call('PTTL', key)
  if ttl == 0 then
    -- Its expiry is this very millisecond. The server would drop it only
    -- after it; like the C code, take the window as over now.
    redis.call('DEL', key)
    raw = false
    count = 0
    ttl = window
  elseif ttl < 0 then
    redis.call('PEXPIRE', key, window)
    ttl = window
  end
end
if count + cost > max then
  local remaining = 0
  if count < max then remaining = max - count end
  return {0, remaining, ttl, ttl}
end
if ARGV[4] == '1' then
  redis.call('INCRBY', key, cost)
  if not raw then
    redis.call('PEXPIRE', key, window)
  end
end
return {1, max - count - cost, 0, ttl}
