-- frontier_push.lua: queue one request under its host key (one round trip).
-- The frontier's own pushes ride on its pops (frontier_pop.lua); this one is for
-- a push with no pop to carry it.
--
-- ARGV: P data priority host_key ip ip_ttl hold cfg (push_one in _frontier.lua)
-- Returns the queued count.
local P = ARGV[1]
push_one(P, server_now(), ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8])
return redis.call('INCR', P .. ':len')
