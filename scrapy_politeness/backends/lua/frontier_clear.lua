-- frontier_clear.lua: scrapy-redis's flush: drop every queued and leased request.
-- ARGV: P
local P = ARGV[1]
for _, key in ipairs(redis.call('ZRANGE', P .. ':hosts', 0, -1)) do
  redis.call('DEL', P .. ':q:' .. key)
end
for _, pid in ipairs(redis.call('ZRANGE', P .. ':procs', 0, -1)) do
  redis.call('DEL', P .. ':lease:' .. pid)
end
redis.call('DEL', P .. ':hosts', P .. ':claims', P .. ':cfg', P .. ':len', P .. ':leased', P .. ':procs')
return 1
