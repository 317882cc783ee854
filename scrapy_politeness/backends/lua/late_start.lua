-- late_start.lua: a booked request started later than its booking covered;
-- move the host and IP buckets to its real start, never backwards.
--
-- KEYS[1] host hash   KEYS[2] IP key (optional)
-- ARGV: started_ago interval ip_spacing idle_margin
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local started = now - tonumber(ARGV[1])
local idle = tonumber(ARGV[4])
local function fmt(x) return string.format('%.17g', x) end
local cur = tonumber(redis.call('HGET', KEYS[1], 'last_start'))
if not cur or started > cur then
  redis.call('HSET', KEYS[1], 'last_start', fmt(started))
  local want = math.ceil((started + tonumber(ARGV[2]) - now + idle) * 1000)
  if redis.call('PTTL', KEYS[1]) < want then redis.call('PEXPIRE', KEYS[1], want) end
end
if KEYS[2] then
  local nxt = started + tonumber(ARGV[3])
  local ip_next = tonumber(redis.call('GET', KEYS[2]))
  if not ip_next or nxt > ip_next then
    redis.call('SET', KEYS[2], fmt(nxt), 'PX', math.ceil((nxt - now + idle) * 1000))
  end
end
return 0
