-- late_start.lua: a booked request started later than its booking covered;
-- move the host and IP buckets to its real start, never backwards, and note
-- the spacing it needs where bookings made before this news look (recheck.lua).
--
-- KEYS[1] host hash   KEYS[2] IP key (optional)   KEYS[3] the IP's late key (with KEYS[2])
-- ARGV: started_ago interval ip_spacing idle_margin
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local started = now - tonumber(ARGV[1])
local idle = tonumber(ARGV[4])
local function fmt(x) return string.format('%.17g', x) end
local h = redis.call('HMGET', KEYS[1], 'last_start', 'late_next', 'moved_to')
local host_next = started + tonumber(ARGV[2])
-- recheck.lua already booked this start behind every other: the late keys
-- would only hold back the bookings ahead of it.
local moved = tonumber(h[3]) or 0
local late_news = not (started >= moved and started - moved < 0.1)
if not tonumber(h[1]) or started > tonumber(h[1]) then
  redis.call('HSET', KEYS[1], 'last_start', fmt(started))
end
if late_news and (not tonumber(h[2]) or host_next > tonumber(h[2])) then
  redis.call('HSET', KEYS[1], 'late_next', fmt(host_next))
end
local want = math.ceil((host_next - now + idle) * 1000)
if redis.call('PTTL', KEYS[1]) < want then redis.call('PEXPIRE', KEYS[1], want) end
if KEYS[2] then
  local nxt = started + tonumber(ARGV[3])
  local px = math.ceil((nxt - now + idle) * 1000)
  local ip_next = tonumber(redis.call('GET', KEYS[2]))
  if not ip_next or nxt > ip_next then redis.call('SET', KEYS[2], fmt(nxt), 'PX', px) end
  local late = tonumber(redis.call('GET', KEYS[3]))
  if late_news and (not late or nxt > late) then redis.call('SET', KEYS[3], fmt(nxt), 'PX', px) end
end
return 0
