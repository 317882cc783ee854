-- frontier_clear.lua: scrapy-redis's flush: drop every queued and leased request.
-- ARGV: P
local P = ARGV[1]
for _, key in ipairs(redis.call('ZRANGE', P .. ':hosts', 0, -1)) do
  redis.call('DEL', P .. ':q:' .. key)
end
local cursor = '0'
repeat  -- the claims (they expire within their lapse anyway)
  local page = redis.call('SCAN', cursor, 'MATCH', P .. ':claim:*', 'COUNT', 1000)
  cursor = page[1]
  for _, k in ipairs(page[2]) do redis.call('DEL', k) end
until cursor == '0'
for _, pid in ipairs(redis.call('ZRANGE', P .. ':procs', 0, -1)) do
  redis.call('DEL', P .. ':lease:' .. pid)
end
redis.call('DEL', P .. ':hosts', P .. ':cfg', P .. ':len', P .. ':leased', P .. ':procs',
           P .. ':served')
return 1
