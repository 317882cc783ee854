-- late_start.lua: a booked request started later than its booking allowed for
-- (_late_start.lua says what moves).
--
-- KEYS[1] host hash   KEYS[2] IP key (optional)   KEYS[3] the IP's late key (with KEYS[2])
-- ARGV: started_ago interval ip_spacing idle_margin
late_start(server_now(), KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), tonumber(ARGV[2]),
           tonumber(ARGV[3]), tonumber(ARGV[4]))
return 0
