--[[ fixed.lua - the fixed window, as the reference design runs it on Valkey
(see src/algo/prelude.lua for the arguments and reply of every algorithm).

KEYS[i]  one counter per request: a string holding an integer
ARGV[4], ARGV[5]  unused: its clock is the server's expiry clock

The window is the key's own lifetime: armed with PEXPIRE by the increment
that creates the key and never again, so it rolls; PTTL is the wait.
Mirrors src/algo/fixed/fixed.c.

Lean by design (one script call costs more than the commands it runs): a
hit is INCRBY, then PEXPIRE if that created the key or else PTTL
(counter.lua). Only a refusal takes its increment back (DECRBY), inside the
script, so no client ever sees it: a refused request changes nothing. A
peek changes nothing either, but gives a TTL to a counter found without
one, so a key can never block forever. ]]
--! include counter.lua

local function hit(key, cost)
  local n, ttl = counter_incr(key, cost, w)
  if not n then return -1, 0, 0, 0 end
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
  local count, ttl = 0, w
  if raw then
    count = tonumber(raw)
    if not count then return -1, 0, 0, 0 end
    ttl = redis.call('PTTL', key)
    if ttl == 0 then
      count, ttl = 0, w
    elseif ttl < 0 then
      -- Even a peek repairs it: otherwise the key would block forever.
      redis.call('PEXPIRE', key, w)
      ttl = w
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
