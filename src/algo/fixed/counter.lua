--[[ counter.lua - the fixed window's counter step: shared by the fixed
algorithm's script and by the queue's (queue_take.lua, emq_incr.lua), so
the two can never drift apart.

counter_incr(key, by, window) adds 'by' to the counter at 'key' and answers
its count and remaining lifetime (its PTTL) after that. The window is armed
with PEXPIRE only by the increment that creates the key, never again, so it
rolls. A key met in the very millisecond of its expiry (PTTL 0: the server
drops it only after that millisecond) begins a new window now, as the C
code takes it; one found without an expiry (left by something else) is
given one, so it can never block forever. When the key holds something else
than a number, answers nil and the server's error; any other error (a
replica's READONLY, the server's OOM) is the call's, raised as it came, so
the caller reads it as the server's error and never as a foreign value.
Numbers go to the server
as Lua numbers, which it writes exactly (%.17g) up to 2^53: lean, since
this runs on every hit. ]]
local function counter_incr(key, by, window)
  local n = redis.pcall('INCRBY', key, by)
  if type(n) ~= 'number' then
    local e = n.err or ''
    if string.find(e, 'WRONGTYPE', 1, true) ~= 1 and
        string.find(e, 'ERR value is not', 1, true) ~= 1 and
        string.find(e, 'ERR increment or decrement', 1, true) ~= 1 then
      error(n)
    end
    return nil, n
  end
  if n == by then -- this increment created the key: arm its window
    redis.call('PEXPIRE', key, window)
    return n, window
  end
  local ttl = redis.call('PTTL', key)
  if ttl == 0 then -- the old window is over: this one starts anew
    redis.call('DEL', key)
    redis.call('INCRBY', key, by)
    redis.call('PEXPIRE', key, window)
    return by, window
  elseif ttl < 0 then
    redis.call('PEXPIRE', key, window)
    ttl = window
  end
  return n, ttl
end
