-- frontier_ip.lua: a process resolved a host: share its IP bucket and let the
-- host (held while unresolved) be considered at once.
-- ARGV: P host_key ip ip_ttl
local now = now_of_server()
local P, key = ARGV[1], ARGV[2]
redis.call('SET', P .. ':ip:' .. key, ARGV[3], 'PX', math.ceil(tonumber(ARGV[4]) * 1000))
local at = tonumber(redis.call('ZSCORE', P .. ':hosts', key))
if at and at > now then redis.call('ZADD', P .. ':hosts', now, key) end
return 1
