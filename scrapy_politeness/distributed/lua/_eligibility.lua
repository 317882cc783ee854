-- _eligibility.lua: "may it go now" and "spend both", once for every script.
--
-- The Redis mirror of policy/eligibility.py and the gate's spend, prepended
-- (after _host.lua) to every script, so reserve.lua, frontier_pop.lua and
-- wait_before_send.lua decide by one rule. A start may go at the latest of
--   last_start + interval + margin   the host's bucket (HostState.eligible_at)
--   not_before + margin              a Retry-After pause
--   the IP key's instant + margin    the IP's bucket (IPTable.eligible_at)
-- and starting spends both at the expected send (start + slip): the host's
-- last start, and the IP's next instant (send + spacing, never backwards).

local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

-- ``ready``, or ``at`` + margin when that is later (``at`` nil or 0: nothing holds it).
local function held_until(ready, at, margin)
  if at and at > 0 and at + margin > ready then return at + margin end
  return ready
end

-- When the host's own bucket lets its next start go, never before ``now``.
local function host_ready(now, last_start, interval, not_before, margin)
  local ready = now
  if last_start then ready = held_until(ready, last_start + interval, margin) end
  return held_until(ready, not_before, margin)
end

-- Extend ``key``'s time to live to at least ``seconds``; by ``slack`` s more when
-- it falls short (so the next calls only read it: one command, not two). An
-- absent key (-2) has no lifetime to extend.
local function keep_at_least(key, seconds, slack)
  local want = math.ceil(seconds * 1000)
  local ttl = redis.call('PTTL', key)
  if ttl ~= -2 and ttl < want then
    redis.call('PEXPIRE', key, want + math.ceil((slack or 0) * 1000))
  end
end

-- keep_at_least for a hash that notes until when its TTL holds (field ``exp``,
-- read by the caller with its other fields; nil: unknown): nothing runs while
-- that covers ``seconds``; else the TTL is read (PTTL), extended if short, and
-- noted, so the next calls skip even the read. An absent hash is created with
-- only ``exp`` (else every call would read its TTL again): whoever reads its
-- other fields finds them absent as before.
local function keep_hash_at_least(key, seconds, slack, exp, now)
  if exp and exp >= now + seconds then return end
  local want = math.ceil(seconds * 1000)
  local ttl = redis.call('PTTL', key)
  if ttl < want then
    ttl = want + math.ceil((slack or 0) * 1000)
    redis.call('PEXPIRE', key, ttl)
  end
  redis.call('HSET', key, 'exp', fmt(now + ttl / 1000))
end

-- What one start spends on its IP: the decoupled model's own spacing
-- (``own``, IPTable.spacing), or coupled, max(ip_floor, the clamped adaptive
-- WITHOUT the crawl-delay: a site's wish stays with that site).
local function ip_spacing(own, adaptive, floor, ceiling, ip_floor)
  if own then return own end
  local spacing = host_clamp(adaptive, 0, floor, ceiling)
  if ip_floor > spacing then spacing = ip_floor end
  return spacing
end

-- The host hash lives while any of its state matters: a ceiling's worth (what
-- the recovery and the dead verdict remember), a crawl-delay, a pause, its
-- next start (``nxt``; nil: none), plus ``idle``. Its field ``exp`` says until
-- when its TTL was last set: while that covers the need, nothing is written
-- (nil); else the TTL in seconds to set, ``slack`` more than needed. A booking
-- passes ``idle`` as slack, so most bookings of a busy host skip the PEXPIRE
-- (one command each); an outcome, which may change a verdict, passes no
-- ``exp`` and 0: the hash then lives exactly ``idle`` past what it needs, so a
-- dead or paused host is forgotten when JOBDIR's saved state forgets it. The
-- caller writes ``exp`` = now + that in its own HSET, then keep_host sets the
-- TTL (after the HSET: a hash it created has one too).
local function host_ttl(nxt, crawl_delay, not_before, ceiling, now, idle, exp, slack)
  local keep = ceiling
  if crawl_delay > keep then keep = crawl_delay end
  if not_before - now > keep then keep = not_before - now end
  if nxt and nxt - now > keep then keep = nxt - now end
  if exp and exp >= now + keep + idle then return nil end
  return keep + idle + slack
end

local function keep_host(hkey, ttl)
  if ttl then redis.call('PEXPIRE', hkey, math.ceil(ttl * 1000)) end
end

-- Spend the host's bucket: its last start is ``sent`` (more field/value pairs
-- ride on the same HSET); ``exp``: read_host's. Returns its next start.
local function spend_host(hkey, sent, interval, crawl_delay, not_before, ceiling, now, idle,
                          exp, ...)
  local ttl = host_ttl(sent + interval, crawl_delay, not_before, ceiling, now, idle, exp, idle)
  if ttl then
    redis.call('HSET', hkey, 'last_start', fmt(sent), 'exp', fmt(now + ttl), ...)
    keep_host(hkey, ttl)
  else
    redis.call('HSET', hkey, 'last_start', fmt(sent), ...)
  end
  return sent + interval
end

-- Move an IP key (its bucket, or its late key) to ``nxt``, never backwards
-- (``cur``: its value now, nil if none); it lives until then.
local function spend_ip(ipkey, cur, nxt, now, idle)
  if not cur or nxt > cur then
    redis.call('SET', ipkey, fmt(nxt), 'PX', math.ceil((nxt - now + idle) * 1000))
  end
end
