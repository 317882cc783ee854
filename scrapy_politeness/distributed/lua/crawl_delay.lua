-- crawl_delay.lua: raise a host's shared crawl-delay (keeps the max) atomically.
--
-- KEYS[1] host hash   ARGV: delay idle_margin
local delay = tonumber(ARGV[1])
local cur = tonumber(redis.call('HGET', KEYS[1], 'crawl_delay')) or 0
if delay > cur then
  redis.call('HSET', KEYS[1], 'crawl_delay', string.format('%.17g', delay))
end
local want = math.ceil((delay + tonumber(ARGV[2])) * 1000)
if redis.call('PTTL', KEYS[1]) < want then redis.call('PEXPIRE', KEYS[1], want) end
return 0
