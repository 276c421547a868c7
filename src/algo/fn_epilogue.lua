--[=[ fn_epilogue.lua - the Functions library's functions (see
fn_prelude.lua). KEY is the limit's whole key, as the stores name it:
PREFIX:{ID}:ALGO, e.g. sluice:{user42}:fixed (src/store/keys.c).

FCALL sluice_hit  1 KEY ALGO MAX WINDOW_MS [COST [BURST [NOW_MS]]]
FCALL sluice_peek 1 KEY ALGO MAX WINDOW_MS [COST [BURST [NOW_MS]]]
  decide a request of COST (default 1) units against the limit; hit counts
  it when admitted, peek only looks (but may still trim or repair the key,
  as the script's peek does: it is not a read-only function). Reply:
  {allowed (1 or 0), remaining, retry_after_ms, reset_after_ms}, as the
  scripts answer. Bounds as sluice_limit_check(): 1 <= MAX <= 2^53 - 1,
  1 <= WINDOW_MS <= 2^40, 1 <= COST <= MAX; BURST (0: MAX) only for an
  algorithm with one, <= MAX, and COST <= BURST; MAX x WINDOW_MS <= 2^53
  where the algorithm needs it, and each algorithm's own bounds (its
  fn_check.lua). The clock is the server's (TIME), as the
  scripts read it by default; NOW_MS (0..2^53) is the caller's instead, as
  a store opened with ?clock=caller sends it (the fixed window always runs
  on the server's expiry clock, and ignores it).
FCALL sluice_reset 1 KEY
  forgets the limit's key (DEL): answers 1 if it was there, else 0.
FCALL sluice_version 0
  answers the library's version, e.g. "0.1.0+3f2a9c0d11e4". ]=]
local MAX_MAX, WINDOW_MAX = 9007199254740991, 1099511627776
local by_name = {}
-- (Only the redis object is there while the library loads: no ipairs.)
for i = 1, #algos do by_name[algos[i].name] = algos[i] end

local function fail(fmt, ...)
  return error({err = 'ERR sluice: ' .. string.format(fmt, ...)})
end
-- A whole number of at most 16 digits (so exact in a double), or fail.
local function whole(text, what)
  if type(text) ~= 'string' or not string.match(text, '^%d+$') or #text > 16 then
    fail('%s must be a whole number, not "%s"', what, tostring(text))
  end
  return tonumber(text)
end
local function check_range(n, lo, hi, what)
  if n < lo or n > hi then
    fail('%s %s is out of range %s..%s', what, string.format('%.0f', n),
         string.format('%.0f', lo), string.format('%.0f', hi))
  end
end

-- The call's clock and token, from one TIME: the clock in ms as
-- prelude.lua reads it ('now', when the caller gave none), and a token no
-- other call on this server shares, the server's time in us and a count of
-- this library's calls since it was loaded ("fn" keeps it apart from the
-- stores' tokens, hex digits only). One TIME, not the script's own second
-- one: a command from Lua costs the server about as much as the checks.
local calls = 0
local function clock_token(now)
  local t = redis.call('TIME')
  calls = calls + 1
  if now == '' then
    now = str(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  end
  return now, 'fn' .. t[1] .. '.' .. t[2] .. '.' .. calls
end

-- Checks FCALL's keys and arguments; answers the algorithm and the
-- script's ARGV for one request.
local function request(fn, keys, args, consume)
  if #keys ~= 1 then fail('%s takes 1 key (the limit\'s key), not %d', fn, #keys) end
  if #args < 3 or #args > 6 then
    fail('%s takes ALGO MAX WINDOW_MS [COST [BURST [NOW_MS]]], not %d arguments',
         fn, #args)
  end
  local a = by_name[args[1]]
  if not a then
    local names = {}
    for _, b in ipairs(algos) do names[#names + 1] = b.name end
    fail('unknown algorithm "%s" (expected %s)', tostring(args[1]),
         table.concat(names, ', '))
  end
  local max, w = whole(args[2], 'max'), whole(args[3], 'window_ms')
  local cost, burst = whole(args[4] or '1', 'cost'), whole(args[5] or '0', 'burst')
  check_range(max, 1, MAX_MAX, 'max')
  check_range(w, 1, WINDOW_MAX, 'window')
  if burst ~= 0 and not a.has_burst then
    fail('%s has no burst (burst %s; only 0 is taken)', a.name, args[5])
  end
  local why = a.check(max, w, burst)
  if why then fail('%s', why) end
  if burst > max then fail('%s\'s burst %s is out of range 1..max (%s; 0 means max)',
                           a.name, args[5], args[2]) end
  check_range(cost, 1, MAX_MAX, 'cost')
  if cost > max then fail('cost %s exceeds max %s: it can never be admitted', args[4], args[2]) end
  if burst ~= 0 and cost > burst then
    fail('cost %s exceeds burst %s: it can never be admitted', args[4], args[5])
  end
  -- ARGV as the script store sends it (prelude.lua).
  local now = ''
  if args[6] and args[6] ~= '' then
    local n = whole(args[6], 'now_ms')
    check_range(n, 0, P53, 'now_ms')
    now = str(n)
  end
  local token
  now, token = clock_token(now)
  local argv = {str(max), str(w), consume, now, token, str(cost)}
  if burst ~= 0 then argv[7] = str(burst) end
  return a, argv
end

-- Runs the algorithm's script on the one key; its -1 (the key holds
-- something else) becomes an error.
local function decide(fn, keys, args, consume)
  local a, argv = request(fn, keys, args, consume)
  local out = a.run({keys[1]}, argv)
  if out[1] == -1 then
    error({err = 'WRONGTYPE sluice: ' .. keys[1] .. ' holds something else than '
           .. a.name .. ' writes there'})
  end
  return out
end

local function reset(keys, args)
  if #keys ~= 1 or #args ~= 0 then
    fail('sluice_reset takes 1 key (the limit\'s key) and no argument')
  end
  return redis.call('DEL', keys[1])
end

redis.register_function('sluice_hit', function(keys, args)
  return decide('sluice_hit', keys, args, '1')
end)
redis.register_function('sluice_peek', function(keys, args)
  return decide('sluice_peek', keys, args, '0')
end)
redis.register_function('sluice_reset', function(keys, args)
  return reset(keys, args)
end)
redis.register_function{function_name = 'sluice_version',
  callback = function() return VERSION end, flags = {'no-writes', 'allow-stale'}}
