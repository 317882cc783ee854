-- _late_start.lua: prepended to late_start.lua and feedback.lua (which folds
-- the late start its fetch's headers revealed, or the sooner start its answer
-- bounds, into the same round trip).
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

-- A start the frontier booked whose answer came sooner than where its pop spent
-- the buckets (``spent``: its start + the slip it booked for): the server read
-- the request before that answer, ``ago`` s before now, so both buckets move
-- back to the answer less ``margin`` (every spacing adds it back), as the
-- gate's own do (SendSlip._bound_by_answer). Each only while this booking is
-- still its last spend (nobody booked or reported a start behind it since).
local function answer_bound(now, host, ipkey, ago, spent, spacing, margin)
  local at = now - ago - margin
  if at >= spent then return end
  local last = tonumber(redis.call('HGET', host, 'last_start'))
  if last and math.abs(last - spent) < 1e-4 then
    redis.call('HSET', host, 'last_start', fmt(at))
  end
  if ipkey then
    local nxt = tonumber(redis.call('GET', ipkey))
    if nxt and math.abs(nxt - spent - spacing) < 1e-4 then
      redis.call('SET', ipkey, fmt(at + spacing), 'KEEPTTL')
    end
  end
end
