--[[ sliding_log.lua - the sliding log (see src/algo/prelude.lua for the
arguments and reply of every algorithm).

KEYS[i]  one sorted set per request: one member per admitted request,
         scored by its time in ms
ARGV[5]  unused (the members are unique without it)

A member names the request's units and the running total of units that the
set has counted up to it, so no call writes more than one member, whatever
its cost, and the live total is read from the two ends of the set:

  member   L H LLLLLLLLLLLLLLLL [":" W]
           L   'A' + the number of digits of H ('A': none, H is 0)
           H   the running total's high part, in decimal, no leading 0
           L.. its low part, 16 decimal digits: total = H * 2^53 + L
           W   the request's units (cost), when more than 1, no leading 0

For a request of cost 1 the member is "A" and 16 digits, one unique id per
request as the seed's layout has it (ZCARD is then the live count). The
running total only grows while the set lives (it starts anew at the cost
when the set is empty), so members are unique, and their order by member
within one millisecond is the order they were added in. The live total is
the newest member's running total less the oldest one's before it; the
k-th oldest unit is the first member whose running total reaches the
oldest's start plus k, found by bisecting the set's ranks.

Trim what left the span (score <= now - window) with ZREMRANGEBYSCORE,
admit iff live + cost <= max, then ZADD the one member at now and let the
key expire one window after its newest member (never sooner than it
already would). Mirrors src/algo/sliding_log/sliding_log.h, the decision
that the embedded store and the module (on this set) share. A clock that
reads earlier than the newest member is held at it. A set whose end members
are not of this form is someone else's: -1, and (for its newest) nothing is
changed. ]]

local B = 9007199254740992 -- 2^53: where a running total's low part wraps

-- The running total and the units of member 'm', as hi, lo, units; nil when
-- 'm' is not a member this script writes.
local function parse(m)
  local n = string.byte(m, 1)
  if not n or n < 65 or n > 81 then return nil end
  n = n - 65
  local h, l, u = string.sub(m, 2, n + 1), string.sub(m, n + 2, n + 17),
                  string.sub(m, n + 18)
  if #l ~= 16 or not string.find(l, '^%d+$') or
      (n > 0 and not string.find(h, '^[1-9]%d*$')) or
      (u ~= '' and not string.find(u, '^:[1-9]%d*$')) then
    return nil
  end
  local hi, lo, units = 0, tonumber(l), 1
  if n > 0 then hi = tonumber(h) end
  if u ~= '' then units = tonumber(string.sub(u, 2)) end
  if hi >= B or lo >= B or units >= B or (hi == 0 and lo < units) then
    return nil
  end
  return hi, lo, units
end

-- The member that takes the running total to hi, lo with 'units'.
local function member(hi, lo, units)
  local h = ''
  if hi > 0 then h = str(hi) end
  local m = string.char(65 + #h) .. h .. string.format('%016.0f', lo)
  if units > 1 then m = m .. ':' .. str(units) end
  return m
end

-- hi, lo less 'units' (the total before a member), and plus 'units'.
local function minus(hi, lo, units)
  if lo >= units then return hi, lo - units end
  return hi - 1, lo + (B - units)
end
local function plus(hi, lo, units)
  if lo >= B - units then return hi + 1, lo - (B - units) end
  return hi, lo + units
end

-- (hi, lo) - (bhi, blo), when that is 0 .. 2^53 - 1; else nil.
local function since(hi, lo, bhi, blo)
  if hi == bhi and lo >= blo then return lo - blo end
  if hi == bhi + 1 and lo < blo then return (B - blo) + lo end
  return nil
end

-- The member of 'rank' (0: the oldest) and its score.
local function at_rank(key, rank)
  local r = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
  return r[1], tonumber(r[2])
end

local function decide(key, cost, place)
  local now = clock()
  local newest = redis.pcall('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest.err then return -1, 0, 0, 0 end
  local hi, lo = 0, 0 -- the running total of the newest member
  if newest[1] then
    hi, lo = parse(newest[1])
    if not hi then return -1, 0, 0, 0 end
    if tonumber(newest[2]) > now then now = tonumber(newest[2]) end
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', str(now - w))
  local n, total, bhi, blo = redis.call('ZCARD', key), 0, 0, 0
  if n > 0 then
    local ohi, olo, units = parse((at_rank(key, 0)))
    if not ohi then return -1, 0, 0, 0 end
    bhi, blo = minus(ohi, olo, units)
    total = since(hi, lo, bhi, blo)
    if not total or total < n then return -1, 0, 0, 0 end
  else
    hi, lo = 0, 0 -- an empty set starts its running total anew
  end
  if total + cost <= max then
    if consume then
      hi, lo = plus(hi, lo, cost)
      redis.call('ZADD', key, str(now), member(hi, lo, cost))
      -- Only ever extend the key's life: a call with a shorter window must
      -- not cut short entries that a longer one still counts.
      if redis.call('PTTL', key) < w then
        redis.call('PEXPIRE', key, str(w))
      end
    end
    return 1, max - total - cost, 0, w
  end
  -- Refused: the (total + cost - max)th oldest unit must leave first; it
  -- is in the first member whose running total reaches that far.
  local must, first, last = total - (max - cost), 0, n - 1
  while first < last do
    local mid = fdiv(first + last, 2)
    local mhi, mlo = parse((at_rank(key, mid)))
    local reach = mhi and since(mhi, mlo, bhi, blo)
    if not reach then return -1, 0, 0, 0 end
    if reach >= must then last = mid else first = mid + 1 end
  end
  local _, leaving = at_rank(key, first)
  local _, newest_t = at_rank(key, -1)
  local remaining = 0
  if total < max then remaining = max - total end
  return 0, remaining, leaving - now + w, newest_t - now + w
end
