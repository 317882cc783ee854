-- crawl_delay.lua: raise a host's shared crawl-delay (keeps the max) atomically.
--
-- KEYS[1] host hash   ARGV: delay idle_margin
local delay = tonumber(ARGV[1])
local cur = tonumber(redis.call('HGET', KEYS[1], 'crawl_delay')) or 0
if delay > cur then redis.call('HSET', KEYS[1], 'crawl_delay', fmt(delay)) end
keep_at_least(KEYS[1], delay + tonumber(ARGV[2]))
return 0
