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
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local default = tonumber(ARGV[1])
local floor = tonumber(ARGV[2])
local ceiling = tonumber(ARGV[3])
local ip_floor = tonumber(ARGV[4])
local margin = tonumber(ARGV[5])
local idle = tonumber(ARGV[6])
local client_epoch = ARGV[7]

local function clamp(adaptive, crawl_delay)
  return host_clamp(adaptive, crawl_delay, floor, ceiling)
end

local adaptive, crawl_delay, last_start, not_before, latency, streak, dead =
  read_host(KEYS[1], default)
local client_delay = tonumber(ARGV[10]) or 0
local slip = tonumber(ARGV[11]) or 0
if client_delay > crawl_delay then crawl_delay = client_delay end
local interval = clamp(adaptive, crawl_delay)

-- HostState.eligible_at, plus the send margin the local gate adds too.
local start = now
if last_start and last_start + interval + margin > start then
  start = last_start + interval + margin
end
if not_before > 0 and not_before + margin > start then start = not_before + margin end
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
    redis.call('PEXPIRE', KEYS[2], math.ceil((hold - now + idle) * 1000))
  end
end
if client_epoch ~= '' and client_epoch ~= epoch then return {'resync', epoch} end
if hold > now then return {'wait', fmt(hold - now), epoch} end

local own_start = start  -- when the host's own bucket lets it go (HostTable.start)
local ip_next = nil
if KEYS[3] then
  ip_next = tonumber(redis.call('GET', KEYS[3]))
  if ip_next and ip_next + margin > start then start = ip_next + margin end
end

-- Spend both at the real send the client expects (start + slip), so the next
-- booking of any process is spaced from when the bytes leave, not from the
-- plan. IPTable.spend: next = sent + spacing, never backwards; coupled, the
-- spacing is max(ip_floor, the clamped adaptive WITHOUT the crawl-delay).
local sent = start + slip
redis.call('HSET', KEYS[1], 'last_start', fmt(sent), 'crawl_delay', fmt(crawl_delay))
-- The pace the host's controller chose, for the fast recovery (feedback.lua):
-- a start held later by the IP (busy with other vhosts) is judged at its own.
local gap = 0
if last_start then
  gap = own_start + slip - last_start
  redis.call('HSET', KEYS[1], 'gap', fmt(gap))
end
local keep = ceiling
if crawl_delay > keep then keep = crawl_delay end
if not_before - now > keep then keep = not_before - now end
if sent + interval - now > keep then keep = sent + interval - now end
redis.call('PEXPIRE', KEYS[1], math.ceil((keep + idle) * 1000))

local horizon = sent + interval
if KEYS[3] then
  local spacing = tonumber(ARGV[12])
  if not spacing then
    spacing = clamp(adaptive, 0)
    if ip_floor > spacing then spacing = ip_floor end
  end
  local nxt = sent + spacing
  if not ip_next or nxt > ip_next then
    redis.call('SET', KEYS[3], fmt(nxt), 'PX', math.ceil((nxt - now + idle) * 1000))
  end
  if nxt > horizon then horizon = nxt end
end

local want = math.ceil((horizon - now + idle) * 1000)  -- the epoch outlives every booking
if redis.call('PTTL', KEYS[2]) < want then redis.call('PEXPIRE', KEYS[2], want) end

local nb_in = not_before - now
if nb_in < 0 then nb_in = 0 end
return {fmt(start - now), fmt(adaptive), fmt(crawl_delay), fmt(nb_in), fmt(latency),
        streak, dead, epoch, fmt(gap)}
