-- peek.lua: the shared host as every process left it, changing nothing. A request
-- booked before another process suspended the host learns of the pause just
-- before its send (wait_before_send.lua); whether it is a suspension (the
-- ceiling streak reached, the interval at the ceiling) is read here, not from
-- the state merged at its booking, which may predate the trip.
--
-- KEYS[1] host hash   ARGV: default (the host's Config: a host not seen yet)
-- Returns: {adaptive, crawl_delay, not_before_in, latency, streak, dead}
local now = server_now()
local adaptive, crawl_delay, _, not_before, latency, streak, dead =
  read_host(KEYS[1], tonumber(ARGV[1]))
local nb_in = not_before - now
if nb_in < 0 then nb_in = 0 end
return {fmt(adaptive), fmt(crawl_delay), fmt(nb_in), fmt(latency), streak, dead}
