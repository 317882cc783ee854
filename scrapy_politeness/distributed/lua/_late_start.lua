-- _late_start.lua: prepended to late_start.lua and feedback.lua (which folds
-- the late start its fetch's headers revealed into the same round trip).
--
-- A booked request started later than its booking allowed for: move the host
-- and IP buckets to its real start, never backwards, and note the spacing it
-- needs where bookings made before this news look (wait_before_send.lua).
-- host: the host hash; ipkey, latekey: the IP's key and late key (nil: no IP).
local function late_start(now, host, ipkey, latekey, started_ago, interval, spacing, idle)
  local started = now - started_ago
  local h = redis.call('HMGET', host, 'last_start', 'late_next', 'moved_to')
  local host_next = started + interval
  -- wait_before_send.lua already booked this start behind every other: the
  -- late keys would only hold back the bookings ahead of it.
  local moved = tonumber(h[3]) or 0
  local late_news = not (started >= moved and started - moved < 0.1)
  if not tonumber(h[1]) or started > tonumber(h[1]) then
    redis.call('HSET', host, 'last_start', fmt(started))
  end
  if late_news and (not tonumber(h[2]) or host_next > tonumber(h[2])) then
    redis.call('HSET', host, 'late_next', fmt(host_next))
  end
  keep_at_least(host, host_next - now + idle)
  if ipkey then
    local nxt = started + spacing
    spend_ip(ipkey, tonumber(redis.call('GET', ipkey)), nxt, now, idle)
    if late_news then spend_ip(latekey, tonumber(redis.call('GET', latekey)), nxt, now, idle) end
  end
end
