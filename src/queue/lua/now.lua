-- now.lua - the clock of the queue's scripts that read one (included by
-- them), in whole milliseconds: now_ms(caller) answers 'caller', the
-- argument that holds the caller's clock (a store opened with
-- clock=caller sends it, as it sends the limiter scripts' ARGV[4]), when it
-- is a number, and else (when it is "", or absent) the server's (TIME).
local function now_ms(caller)
  local n = tonumber(caller or '')
  if n then return n end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
