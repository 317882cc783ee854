-- frontier_ip.lua: a process resolved a host and had no pop to carry the news
-- (frontier_pop.lua's ``ips``): share_ip alone.
-- ARGV: P host_key ip ip_ttl
share_ip(ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), server_now())
return 1
