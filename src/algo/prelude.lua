--[[ prelude.lua - the start of every algorithm's script: its arguments and
the helpers they share. The algorithm's own file (src/algo/NAME/NAME.lua)
follows and defines decide(); epilogue.lua ends the script.

KEYS[1..n]  one key per request, all in one slot
ARGV[1]  max            ARGV[2]  window_ms
ARGV[3]  "1" to count admitted requests, "0" to only look (peek)
ARGV[4]  now in ms, or "" to read the server's clock (TIME), once for all
ARGV[5]  a token unique to this call, for an algorithm whose writes must
         be unique across calls (none of the five needs it now: the
         sliding log's members carry a running total instead)
ARGV[5 + i]  the cost of request i
ARGV[6 + n]  the burst, for an algorithm that takes one (gcra): 1..max;
         absent, max
Reply    {allowed, remaining, retry_after_ms, reset_after_ms} for each
         request in turn, flat: 4n integers. allowed is 1 or 0, or -1 when
         the key holds something else than the algorithm writes there
         (nothing is changed).

decide(key, cost, place) answers those four figures for one request, the
place'th of the call. Requests are decided in turn, each as if alone, so a
key named twice sees the first request counted. Numbers are written with
str() (%.0f), never Lua's default %.14g; every product stays <= 2^53 and
every division is done on exact remainders, so the doubles here give the C
code's integers. ]]
local function fdiv(a, b) return (a - math.fmod(a, b)) / b end
local function cdiv(a, b)
  local r = math.fmod(a, b)
  if r == 0 then return a / b end
  return (a - r) / b + 1
end
local function str(n) return string.format('%.0f', n) end
local max, w = tonumber(ARGV[1]), tonumber(ARGV[2])
local consume = ARGV[3] == '1'
local token = ARGV[5]
local burst = tonumber(ARGV[6 + #KEYS]) or max
local clock_ms
-- The clock, read once for the whole call: the caller's, or the server's.
local function clock()
  if not clock_ms then
    clock_ms = tonumber(ARGV[4])
    if not clock_ms then
      local t = redis.call('TIME')
      clock_ms = tonumber(t[1]) * 1000 + fdiv(tonumber(t[2]), 1000)
    end
  end
  return clock_ms
end
