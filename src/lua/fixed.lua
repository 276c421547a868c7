--[[ fixed.lua - the fixed window, as the reference design runs it on Valkey.

KEYS[1..n]  one counter per request (a string holding an integer)
ARGV[1]  max            ARGV[2]  window_ms
ARGV[3]  "1" to count admitted requests, "0" to only look (peek; it
         changes nothing, but gives a TTL to a counter found without one)
ARGV[4], ARGV[5]  unused here (the clock and token of the other scripts)
ARGV[5 + i]  the cost of request i
Reply    {allowed, remaining, retry_after_ms, reset_after_ms} for each
         request in turn, flat: 4n integers. allowed is 1 or 0, or -1 when
         the key holds something else than a counter (nothing is changed).

The window is the key's own lifetime: armed with PEXPIRE by the increment
that creates the key and never again, so it rolls; PTTL is the wait. The
requests are decided in turn, each as if alone, so a key named twice sees
the first request counted. Mirrors src/algo_fixed.c.

Lean by design (one script call costs more than the commands it runs): a
hit is INCRBY, then PEXPIRE if that created the key or else PTTL. Only a
refusal takes its increment back (DECRBY), inside the script, so no client
ever sees it: a refused request changes nothing. A counter found without a
TTL (left by something else) is given one, so a key can never block
forever. The clock is the server's expiry clock. ]]
local max, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local consume = ARGV[3] == '1'

local function hit(key, cost)
  local n = redis.pcall('INCRBY', key, cost)
  if type(n) ~= 'number' then return -1, 0, 0, 0 end
  if n == cost then -- this increment created the key: arm its window
    redis.call('PEXPIRE', key, window)
    return 1, max - n, 0, window
  end
  local ttl = redis.call('PTTL', key)
  if ttl == 0 then
    -- Its expiry is this very millisecond. The server would drop it only
    -- after it; like the C code, take the window as over now.
    redis.call('SET', key, cost, 'PX', window)
    return 1, max - cost, 0, window
  elseif ttl < 0 then
    redis.call('PEXPIRE', key, window)
    ttl = window
  end
  if n > max then
    redis.call('DECRBY', key, cost)
    local count, remaining = n - cost, 0
    if count < max then remaining = max - count end
    return 0, remaining, ttl, ttl
  end
  return 1, max - n, 0, ttl
end

local function peek(key, cost)
  local raw = redis.pcall('GET', key)
  if type(raw) == 'table' then return -1, 0, 0, 0 end
  local count, ttl = 0, window
  if raw then
    count = tonumber(raw)
    if not count then return -1, 0, 0, 0 end
    ttl = redis.call('PTTL', key)
    if ttl == 0 then
      count, ttl = 0, window
    elseif ttl < 0 then
      -- Even a peek repairs it: otherwise the key would block forever.
      redis.call('PEXPIRE', key, window)
      ttl = window
    end
  end
  if count + cost > max then
    local remaining = 0
    if count < max then remaining = max - count end
    return 0, remaining, ttl, ttl
  end
  return 1, max - count - cost, 0, ttl
end

local decide = peek
if consume then decide = hit end
local out = {}
for i = 1, #KEYS do
  local a, b, c, d = decide(KEYS[i], tonumber(ARGV[5 + i]))
  out[4 * i - 3], out[4 * i - 2], out[4 * i - 1], out[4 * i] = a, b, c, d
end
return out
