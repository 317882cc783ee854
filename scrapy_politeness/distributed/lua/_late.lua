-- _late.lua: prepended to late_start.lua and feedback.lua (which folds the late
-- start its fetch's headers revealed into the same round trip).
--
-- A booked request started later than its booking allowed for: move the host and
-- IP buckets to its real start, never backwards, and note the spacing it needs
-- where bookings made before this news look (recheck.lua).
-- host: the host hash; ipkey, latekey: the IP's key and late key (nil: no IP).
local function late_start(now, host, ipkey, latekey, started_ago, interval, ip_spacing, idle)
  local started = now - started_ago
  local h = redis.call('HMGET', host, 'last_start', 'late_next', 'moved_to')
  local host_next = started + interval
  -- recheck.lua already booked this start behind every other: the late keys
  -- would only hold back the bookings ahead of it.
  local moved = tonumber(h[3]) or 0
  local late_news = not (started >= moved and started - moved < 0.1)
  if not tonumber(h[1]) or started > tonumber(h[1]) then
    redis.call('HSET', host, 'last_start', fmt(started))
  end
  if late_news and (not tonumber(h[2]) or host_next > tonumber(h[2])) then
    redis.call('HSET', host, 'late_next', fmt(host_next))
  end
  local want = math.ceil((host_next - now + idle) * 1000)
  if redis.call('PTTL', host) < want then redis.call('PEXPIRE', host, want) end
  if ipkey then
    local nxt = started + ip_spacing
    local px = math.ceil((nxt - now + idle) * 1000)
    local ip_next = tonumber(redis.call('GET', ipkey))
    if not ip_next or nxt > ip_next then redis.call('SET', ipkey, fmt(nxt), 'PX', px) end
    local late = tonumber(redis.call('GET', latekey))
    if late_news and (not late or nxt > late) then redis.call('SET', latekey, fmt(nxt), 'PX', px) end
  end
end
