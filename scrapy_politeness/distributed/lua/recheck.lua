-- recheck.lua: just before a booked request is sent, how much longer must it
-- wait for a late start reported after it was booked (late_start.lua), or for
-- a Retry-After pause another process learnt after it was booked (feedback.lua
-- sets the host's not_before)?
--
-- A booking held by a pause must not start beside one booked after it for
-- the same pause end (two processes starting together right after a
-- Retry-After: a second 429 and a wrong lesson): it goes to the back of the
-- line, an interval after the host's last booked start, and is booked there
-- at once ('moved_to'), so late_start.lua does not hold back the bookings now
-- ahead of it.
--
-- KEYS[1] host hash   KEYS[2] the IP's late key (optional)
-- ARGV: margin, slip (how late after now this booking's send leaves)
-- Returns the extra wait in seconds (0: none).
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local margin = tonumber(ARGV[1])
local slip = tonumber(ARGV[2]) or 0
local mine = now + slip + 0.001  -- this booking's send, and a bit
local h = redis.call('HMGET', KEYS[1], 'late_next', 'not_before', 'last_start',
                     'adaptive', 'crawl_delay')
local ready = tonumber(h[1]) or 0
local paused = tonumber(h[2]) or 0
if KEYS[2] then
  local ip_ready = tonumber(redis.call('GET', KEYS[2])) or 0
  if ip_ready > ready then ready = ip_ready end
end
if paused > now and paused >= ready then  -- the pause holds it: to the back of the line
  ready = paused
  local last = tonumber(h[3]) or 0
  if last > mine then
    local interval = tonumber(h[4]) or 0
    local delay = tonumber(h[5]) or 0
    if delay > interval then interval = delay end
    if last + interval > ready then ready = last + interval end
  end
  local sent = ready + margin + slip
  if sent > last then
    redis.call('HSET', KEYS[1], 'last_start', string.format('%.17g', sent),
               'moved_to', string.format('%.17g', sent))
  end
elseif paused > ready then
  ready = paused
end
local wait = ready + margin - now
if wait < 0 then wait = 0 end
return string.format('%.17g', wait)
