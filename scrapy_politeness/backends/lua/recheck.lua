-- recheck.lua: just before a booked request is sent, how much longer must it
-- wait for a late start reported after it was booked (late_start.lua), or for
-- a Retry-After pause another process learnt after it was booked (feedback.lua
-- sets the host's not_before)?
--
-- KEYS[1] host hash   KEYS[2] the IP's late key (optional)
-- ARGV: margin
-- Returns the extra wait in seconds (0: none).
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local margin = tonumber(ARGV[1])
local h = redis.call('HMGET', KEYS[1], 'late_next', 'not_before')
local ready = tonumber(h[1]) or 0
local paused = tonumber(h[2]) or 0
if paused > ready then ready = paused end
if KEYS[2] then
  local ip_ready = tonumber(redis.call('GET', KEYS[2])) or 0
  if ip_ready > ready then ready = ip_ready end
end
local wait = ready + margin - now
if wait < 0 then wait = 0 end
return string.format('%.17g', wait)
