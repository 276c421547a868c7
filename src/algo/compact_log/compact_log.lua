--[[ compact_log.lua - the compact sliding log (see src/algo/prelude.lua for
the arguments and reply of every algorithm).

KEYS[i]  one string per request: a 16-byte header, 'SLCL' then head, len
         and cap as little-endian uint32; then a ring of cap slots, slot j
         at byte 16 + 8j holding the time in ms of one admitted unit
         (little-endian uint64). The live units are the len slots from head
         on (mod cap), oldest first. The string holds only the slots ever
         written, so it grows with admitted units up to 16 + 8 cap bytes.
ARGV[5]  unused

The sliding log's decision (src/algo/sliding_log/sliding_log.lua), field for
field, read and written a few bytes at a time with GETRANGE and SETRANGE,
never the whole ring: the header and the newest unit; the units that left
the span (t <= now - window, a prefix) found by galloping from the head then
bisecting; then, when refused, the unit that must leave last (the
(len + cost - max)'th oldest), or, when admitted, 'cost' slots written at
the tail in one SETRANGE (two when the ring wraps). The ring's cap is the
max that made the key; a larger max asked of it later lays the ring out
again in one SET (the only whole write). A key whose units have all left is
deleted; the key expires one window after its newest unit (never sooner
than it already would). Mirrors src/algo/compact_log/compact_log.c. A clock
that reads earlier than the newest unit is held at it. ]]

local HEAD = 16

-- The time in the ring's slot 'j'.
local function slot(key, j)
  local at = HEAD + 8 * j
  return (struct.unpack('<I8', redis.call('GETRANGE', key, at, at + 7)))
end

local function header(head, len, cap)
  return 'SLCL' .. struct.pack('<I4I4I4', head, len, cap)
end

-- The header of 'key': head, len, cap (0, 0, 0 when there is no key), or
-- nil when the key holds something else.
local function read_header(key)
  local raw = redis.pcall('GETRANGE', key, 0, HEAD - 1)
  if type(raw) ~= 'string' then return nil end
  if raw == '' then return 0, 0, 0 end
  if #raw ~= HEAD or string.sub(raw, 1, 4) ~= 'SLCL' then return nil end
  local head, len, cap = struct.unpack('<I4I4I4', raw, 5)
  local used = math.min(head + len, cap)
  if cap < 1 or head >= cap or len > cap or len < 1 or
      redis.call('STRLEN', key) < HEAD + 8 * used then
    return nil
  end
  return head, len, cap
end

-- How many of the 'len' units from 'head' have left by 'now' (a prefix):
-- the newest has not. Gallop from the oldest, then bisect.
local function gone(key, head, len, cap, now)
  local function left(i) return slot(key, (head + i) % cap) <= now - w end
  if not left(0) then return 0 end
  local lo, hi, step = 0, len - 1, 1 -- unit lo has left, unit hi has not
  while lo + step < hi and left(lo + step) do
    lo = lo + step
    step = step * 2
  end
  if lo + step < hi then hi = lo + step end
  while hi - lo > 1 do
    local mid = fdiv(lo + hi, 2)
    if left(mid) then lo = mid else hi = mid end
  end
  return hi
end

-- 'n' copies of 'unit', made by doubling: string.rep() adds them one at a
-- time, several times slower.
local function repeated(unit, n)
  local out, part = '', unit
  while n > 0 do
    if math.fmod(n, 2) == 1 then out = out .. part end
    n = fdiv(n, 2)
    if n > 0 then part = part .. part end
  end
  return out
end

-- Writes 'cost' units at 'now' after the 'len' live units from 'head'.
local function append(key, head, len, cap, now, cost)
  local unit = struct.pack('<I8', now)
  if len == 0 then
    redis.call('SET', key, header(0, cost, max) .. repeated(unit, cost))
  elseif len + cost > cap then
    -- A larger max than the ring's: lay it out again, oldest first.
    local first = math.min(len, cap - head)
    local live = redis.call('GETRANGE', key, HEAD + 8 * head,
                            HEAD + 8 * (head + first) - 1)
    if first < len then
      live = live .. redis.call('GETRANGE', key, HEAD, HEAD + 8 * (len - first) - 1)
    end
    redis.call('SET', key, header(0, len + cost, max) .. live ..
               repeated(unit, cost), 'KEEPTTL')
  else
    local tail = (head + len) % cap
    local first = math.min(cost, cap - tail)
    redis.call('SETRANGE', key, HEAD + 8 * tail, repeated(unit, first))
    if first < cost then
      redis.call('SETRANGE', key, HEAD, repeated(unit, cost - first))
    end
    redis.call('SETRANGE', key, 0, header(head, len + cost, cap))
  end
  -- Only ever extend the key's life: a call with a shorter window must not
  -- cut short units that a longer one still counts.
  if redis.call('PTTL', key) < w then
    redis.call('PEXPIRE', key, str(w))
  end
end

local function decide(key, cost, place)
  local now = clock()
  local head, len, cap = read_header(key)
  if not head then return -1, 0, 0, 0 end
  local newest, moved = 0, false
  if len > 0 then
    newest = slot(key, (head + len - 1) % cap)
    if newest > now then now = newest end
    local n = len
    if newest > now - w then n = gone(key, head, len, cap, now) end
    if n == len then
      redis.call('DEL', key)
      head, len, cap = 0, 0, 0
    elseif n > 0 then
      head, len, moved = (head + n) % cap, len - n, true
    end
  end
  if len + cost <= max and consume then
    append(key, head, len, cap, now, cost) -- writes the header too
  elseif moved then
    redis.call('SETRANGE', key, 0, header(head, len, cap))
  end
  if len + cost <= max then return 1, max - len - cost, 0, w end
  local must = len + cost - max
  local leaving = slot(key, (head + must - 1) % cap)
  local remaining = 0
  if len < max then remaining = max - len end
  return 0, remaining, leaving - now + w, newest - now + w
end
