-- reserve.lua: book the next start of one host (and its IP) in ONE atomic step.
--
-- "Both buckets permit, then spend both" must not interleave between crawler
-- processes, so it runs server side. Instants are the server's clock (TIME);
-- only the relative delay (start - now) goes back to the client.
--
-- KEYS[1] host hash   KEYS[2] namespace hash (horizon, hold)   KEYS[3] IP key (optional)
-- ARGV: default floor ceiling ip_floor margin idle_margin
--       epoch (the client's, '' at first) new_epoch grace
--       crawl_delay (the client's: the larger one is kept, a restart forgets it)
--       slip (how late after its booked start the client expects to send)
--       ip_spacing (optional: the decoupled IP model's own spacing, IPTable.spacing;
--       absent: the coupled model, max(ip_floor, the clamped adaptive))
-- Returns: {delay, adaptive, crawl_delay, not_before_in, latency, streak, dead, epoch, gap}
--          (gap: this booking's start-to-start time, 0 for a host's first),
--          or {'resync', epoch}, or {'wait', seconds, epoch} (nothing booked)
local now = server_now()
local default = tonumber(ARGV[1])
local floor = tonumber(ARGV[2])
local ceiling = tonumber(ARGV[3])
local ip_floor = tonumber(ARGV[4])
local margin = tonumber(ARGV[5])
local idle = tonumber(ARGV[6])
local client_epoch = ARGV[7]

local adaptive, crawl_delay, last_start, not_before, latency, streak, dead, exp =
  read_host(KEYS[1], default)
local client_delay = tonumber(ARGV[10]) or 0
local slip = tonumber(ARGV[11]) or 0
if client_delay > crawl_delay then crawl_delay = client_delay end
local interval = host_clamp(adaptive, crawl_delay, floor, ceiling)

local start = host_ready(now, last_start, interval, not_before, margin)  -- _eligibility.lua
-- A server that lost its state (restarted without persistence) forgets the
-- starts it booked while crawlers still sleep towards them. The namespace
-- epoch reveals it: a client that booked under another epoch books nothing
-- and is told to resync (resync.lua re-seeds its pending bookings); the first
-- one also opens a grace window in which the others resync too, and nobody
-- books before it ends.
local epoch = redis.call('HGET', KEYS[2], 'epoch')
local hold = tonumber(redis.call('HGET', KEYS[2], 'hold')) or 0
if not epoch then
  epoch = ARGV[8]
  redis.call('HSET', KEYS[2], 'epoch', epoch)
  if client_epoch ~= '' then
    hold = now + tonumber(ARGV[9])
    redis.call('HSET', KEYS[2], 'hold', fmt(hold))
    keep_at_least(KEYS[2], hold - now + idle)
  end
end
if client_epoch ~= '' and client_epoch ~= epoch then return {'resync', epoch} end
if hold > now then return {'wait', fmt(hold - now), epoch} end

local own_start = start  -- when the host's own bucket lets it go (HostTable.start)
local ip_next = nil
if KEYS[3] then
  ip_next = tonumber(redis.call('GET', KEYS[3]))
  start = held_until(start, ip_next, margin)
end

-- Spend both at the real send the client expects (start + slip), so the next
-- booking of any process is spaced from when the bytes leave, not from the plan.
local sent = start + slip
-- The pace the host's controller chose, for the fast recovery (feedback.lua):
-- a start held later by the IP (busy with other vhosts) is judged at its own.
local gap = 0
local extra = {'crawl_delay', fmt(crawl_delay)}
if last_start then
  gap = own_start + slip - last_start
  extra = {'crawl_delay', fmt(crawl_delay), 'gap', fmt(gap)}
end
local horizon = spend_host(KEYS[1], sent, interval, crawl_delay, not_before, ceiling, now, idle,
                           exp, unpack(extra))
if KEYS[3] then
  local nxt = sent + ip_spacing(tonumber(ARGV[12]), adaptive, floor, ceiling, ip_floor)
  spend_ip(KEYS[3], ip_next, nxt, now, idle)
  if nxt > horizon then horizon = nxt end
end
keep_at_least(KEYS[2], horizon - now + idle)  -- the epoch outlives every booking

local nb_in = not_before - now
if nb_in < 0 then nb_in = 0 end
return {fmt(start - now), fmt(adaptive), fmt(crawl_delay), fmt(nb_in), fmt(latency),
        streak, dead, epoch, fmt(gap)}
