-- go_late.lua: a request the frontier booked reached the gate after its booked
-- start; may it still go now? One atomic step, before its send.
--
-- Reported after the send (late_start.lua, in the background), the news raced
-- the next booking of every other process: on a busy loop (a crawl starting)
-- it landed after another process had booked behind the old start, and two
-- starts came closer than allowed. So the late start is put in force first:
-- if nobody booked behind this booking yet (the host's last start and the
-- IP's next instant are still about where it left them), both buckets move
-- to the real start and it goes; else it goes nowhere (0) and is booked
-- afresh behind the others.
--
-- The start it puts in force is now + starts_in (the script's now), returned
-- on the server's clock: a reply that reaches a busy loop later than that
-- leaves the bytes later still, so the client puts it in force again from
-- there (booked = that start, booked_slip 0) before it goes.
--
-- KEYS[1] host hash   KEYS[2] IP key (optional)   KEYS[3] the IP's late key (with KEYS[2])
-- ARGV: booked (its booked start, the server's clock, as the pop answered it)
--       booked_slip (what the booking spent for after it) starts_in (when its
--       bytes leave, from now) interval ip_spacing idle_margin
-- Returns 0 (booked behind meanwhile: nothing moved) or the start put in force.
local now = server_now()
local booked = tonumber(ARGV[1])
local spent = booked + tonumber(ARGV[2])  -- where the booking left the buckets
local interval, spacing = tonumber(ARGV[4]), tonumber(ARGV[5])
local last = tonumber(redis.call('HGET', KEYS[1], 'last_start'))
if last and last > spent + interval / 2 then return 0 end
if KEYS[2] then
  local nxt = tonumber(redis.call('GET', KEYS[2]))
  if nxt and nxt > spent + spacing * 1.5 then return 0 end
end
local starts_in = tonumber(ARGV[3])
late_start(now, KEYS[1], KEYS[2], KEYS[3], -starts_in, interval, spacing, tonumber(ARGV[6]))
return fmt(now + starts_in)
