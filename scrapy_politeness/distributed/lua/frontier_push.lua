-- frontier_push.lua: queue one request under its host key (one round trip).
--
-- ARGV: P data priority host_key ip ip_ttl hold cfg
--   ip: the host's IP bucket, '' for none, '?' when not resolved yet
--   hold: how long a host whose IP nobody has written yet waits for it
--   cfg: "default floor ceiling" when POLITENESS_HOSTS overrides the host, else ''
-- Returns the queued count.
local now = server_now()
local P, key, ip = ARGV[1], ARGV[4], ARGV[5]
local seq = redis.call('INCR', P .. ':seq')
redis.call('ZADD', P .. ':q:' .. key, -tonumber(ARGV[3]), string.format('%016x', seq) .. ARGV[2])
local ipkey = P .. ':ip:' .. key
if ip ~= '?' then redis.call('SET', ipkey, ip, 'PX', math.ceil(tonumber(ARGV[6]) * 1000)) end
if ARGV[8] ~= '' then redis.call('HSET', P .. ':cfg', key, ARGV[8]) end
local hosts = P .. ':hosts'
if not redis.call('ZSCORE', hosts, key) then
  local at = now
  if ip == '?' and redis.call('EXISTS', ipkey) == 0 then at = now + tonumber(ARGV[7]) end
  redis.call('ZADD', hosts, at, key)
end
return redis.call('INCR', P .. ':len')
