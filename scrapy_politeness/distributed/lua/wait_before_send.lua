-- wait_before_send.lua: just before a booked request is sent, how much longer
-- must it wait for a late start reported after it was booked (late_start.lua),
-- or for a Retry-After pause another process learnt after it was booked
-- (feedback.lua sets the host's not_before)?
--
-- A booking held by a pause must not start beside one booked after it for
-- the same pause end (two processes starting together right after a
-- Retry-After: a second 429 and a wrong lesson): it goes to the back of the
-- line, an interval after the host's last booked start, and is booked there
-- at once ('moved_to'), so late_start.lua does not hold back the bookings now
-- ahead of it.
--
-- KEYS[1] host hash   KEYS[2] the IP's late key (optional)
-- ARGV: margin, slip (how late after now this booking's send leaves),
--       default floor ceiling (the host's Config: the interval behind the line)
-- Returns the extra wait in seconds (0: none).
local now = server_now()
local margin = tonumber(ARGV[1])
local slip = tonumber(ARGV[2]) or 0
local mine = now + slip + 0.001  -- this booking's send, and a bit
local h = redis.call('HMGET', KEYS[1], 'late_next', 'not_before', 'last_start',
                     'adaptive', 'crawl_delay')
-- What holds it now (_eligibility.lua's rule): the late starts reported since it
-- was booked (the host's and its IP's) and a pause.
local ready = tonumber(h[1]) or 0
if KEYS[2] then ready = held_until(ready, tonumber(redis.call('GET', KEYS[2])), 0) end
local paused = tonumber(h[2]) or 0
local behind = paused > now and paused >= ready  -- the pause holds it: to the back of the line
ready = held_until(ready, paused, 0)
local last = tonumber(h[3]) or 0
if behind and last > mine then
  local interval = host_clamp(tonumber(h[4]) or tonumber(ARGV[3]), tonumber(h[5]) or 0,
                              tonumber(ARGV[4]), tonumber(ARGV[5]))
  ready = held_until(ready, last + interval, 0)
end
local go = held_until(now, ready, margin)
if behind and go + slip > last then
  redis.call('HSET', KEYS[1], 'last_start', fmt(go + slip), 'moved_to', fmt(go + slip))
end
return fmt(go - now)
