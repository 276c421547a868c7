--[[ sliding_counter.lua - the sliding-window counter (see
src/algo/prelude.lua for the arguments and reply of every algorithm).

KEYS[i]  one hash per request: w (window_ms), i (current window's index),
         c (its count), p (the previous window's count)
ARGV[5]  unused here

Mirrors src/algo/sliding_counter/sliding_counter.c line for line; see it
for the arithmetic. A clock that reads earlier than the key's window is
held at that window's start. ]]

local function decide(key, cost)
  local now = clock()
  local s = redis.pcall('HMGET', key, 'w', 'i', 'c', 'p')
  if s.err then return -1, 0, 0, 0 end
  local idx = fdiv(now, w)
  local cur, prev = 0, 0
  if tonumber(s[1]) == w and tonumber(s[2]) then
    local si = tonumber(s[2])
    if idx < si then
      idx = si
      now = si * w
    end
    if si == idx then
      cur, prev = tonumber(s[3]), tonumber(s[4])
    elseif si + 1 == idx then
      prev = tonumber(s[3])
    end
  end
  local elapsed = now - idx * w
  local r = w - elapsed
  local wceil = cdiv(prev * r, w)
  local allowed, retry = 0, 0
  if cur + wceil + cost <= max then
    allowed = 1
    cur = cur + cost
    if consume then
      redis.call('HSET', key, 'w', str(w), 'i', str(idx), 'c', str(cur), 'p', str(prev))
      redis.call('PEXPIRE', key, str(2 * w - elapsed))
    end
  else
    if cur + cost <= max and prev > 0 then
      local rr = fdiv((max - cur - cost) * w, prev)
      if rr >= 1 then retry = (w - rr) - elapsed end
    end
    if retry == 0 then
      if cur == 0 then
        retry = w - elapsed
      else
        local rr = fdiv((max - cost) * w, cur)
        local e = 0
        if rr < w then e = w - rr end
        retry = (w - elapsed) + e
      end
    end
  end
  local used = cur + wceil
  local remaining = 0
  if used < max then remaining = max - used end
  local reset = 0
  if cur > 0 then reset = 2 * w - elapsed elseif prev > 0 then reset = w - elapsed end
  return allowed, remaining, retry, reset
end
