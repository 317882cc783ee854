-- frontier_pop.lua: hand out one request whose host AND IP are eligible now, and
-- book both buckets on the keys reserve.lua books, in the same atomic step.
--
-- Several processes pop concurrently; as each pick and its booking are one
-- script, no two processes can hand out starts the budget cannot take. The
-- host and IP instants, and what a start spends, are reserve.lua's: one rule,
-- in _eligibility.lua; server clock only.
--
-- ARGV: P NS pid lease picks default floor ceiling ip_floor margin idle looks lead
--       slip claim ip_ttl n_acks acks... n_ips (host_key ip)...
--       n_pushes (data priority host_key ip hold cfg)... [ip_model]
--   pid/lease: this process and how long its heartbeat lasts (0: no heartbeat on
--         this call: the client beats every few seconds, not every pop, and only
--         a beating call looks for dead processes); picks 0 = no pick
--   lead: a request eligible within this many seconds is handed out, booked at
--         its eligible instant (the middleware sleeps until it: the engine's
--         latency from here to the download then cannot shift the start)
--   slip: how late after its booked start this process expects its bytes to leave
--         (reserve.lua's slip): both buckets are spent at start + slip
--   claim: how long past its instant a claim holds (0: no claims; see below);
--          negative: this process was starved by claims (its last pop was
--          'claimed'): it takes over the claim of any process served more
--   acks: request ids this process finished (their leases end)
--   ips: hosts this process resolved since its last pop (share_ip, ip_ttl s): the
--        news rides on the pop instead of a round trip of its own
--   pushes: requests this process queued since its last pop (push_one), applied
--        before anything is picked, in the same atomic step as the acks: a
--        callback's new requests are queued when its lease ends, never after
--   ip_model: 'decoupled' spends the IP by ip_floor (the IP's own interval, as
--        IPTable.spacing before any evidence); absent or 'coupled': by the host's
-- Returns {'req', data, id, ip, booked, delay, next_in, start}, {'wait', seconds}, {'empty'},
--   {'claimed', seconds} or {'beat'};
--   booked: 0 no IP bucket, 1 the IP booked too, 2 IP unknown (host booked only)
--   start: the booked start on the server's clock (go_late.lua checks it);
--   next_in: -1 nothing this process should ask for; 'claimed': every queued host
--   is claimed by other processes; ask again in that many seconds (come_for: when
--   a retry may take a claim over and book, not at each lapse)
--
-- Claims (P:claims, bucket -> "pid until"): N processes told the same "wait until
-- T" would all pop at T and all but one find nothing, N round trips per start.
-- So the process told to wait for a bucket (the host's IP, or the host key
-- without one), or handed a request from it, claims the bucket's next instant;
-- the others pass over its hosts until the claim lapses (its instant + claim),
-- so a claimant that does not come back (busy, dead) delays nobody for long.
-- A claim renewed by each hand-out would keep a bucket with the process that
-- served it first: P:served counts each live process's hand-outs, and a process
-- TAKE behind a claimant (1 if starved) takes its claim over, told to come at
-- the claimed instant: the claimant comes too and passes over it, one round
-- trip per take-over, and the buckets spread by pages served, not by who began.
local now = server_now()
local P, NS, pid = ARGV[1], ARGV[2], ARGV[3]
local lease, picks = tonumber(ARGV[4]), tonumber(ARGV[5])
local default, floor, ceiling = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local ip_floor, margin, idle = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local looks, lead, slip = tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14])
local grace, ip_ttl, n_acks = tonumber(ARGV[15]), tonumber(ARGV[16]), tonumber(ARGV[17])
local TAKE = 3  -- hand-outs behind a claimant before taking its claim over
-- After a hand-out, at most this many hosts due within NEXT_HORIZON s are read
-- to say truly when to ask next (see the hand-out's end).
local NEXT_CHECKS, NEXT_HORIZON = 4, 2.0
local take = TAKE
if grace < 0 then grace, take = -grace, 1 end

if lease ~= 0 then  -- a heartbeat (the client sends one every _BEAT s, not every pop)
  reclaim_dead(P, now)  -- before our own heartbeat: never reclaim ourselves
  redis.call('ZADD', P .. ':procs', now + lease, pid)
end
if n_acks > 0 then
  local gone = redis.call('HDEL', P .. ':lease:' .. pid, unpack(ARGV, 18, 17 + n_acks))
  if gone > 0 then redis.call('DECRBY', P .. ':len', gone) end
end
local at_ips = 18 + n_acks
local ips_end = at_ips + 2 * tonumber(ARGV[at_ips])
for i = at_ips + 1, ips_end, 2 do
  share_ip(P, ARGV[i], ARGV[i + 1], ip_ttl, now)
end
local n_pushes = tonumber(ARGV[ips_end + 1]) or 0
local pushes_end = ips_end + 1 + 6 * n_pushes
local seq = 0  -- the batch's push numbers: one INCRBY for all
if n_pushes > 0 then seq = redis.call('INCRBY', P .. ':seq', n_pushes) - n_pushes end
local seen = {}
for i = ips_end + 2, pushes_end, 6 do
  seq = seq + 1
  push_one(P, now, ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ip_ttl, ARGV[i + 4],
           ARGV[i + 5], seq, seen)
end
if n_pushes > 0 then redis.call('INCRBY', P .. ':len', n_pushes) end
local decoupled = ARGV[pushes_end + 1] == 'decoupled'

if picks == 0 then return {'beat'} end

local ns = NS .. ':ns'
-- The grace window after a state loss (reserve.lua's hold): nobody books before
-- it ends. Read just before a booking: a pop that books nothing needs it not.
-- Its ``exp`` (until when its TTL holds) is read by the same HMGET: a booking
-- then extends the hash's life without reading it (keep_hash_at_least).
local ns_exp = nil
local function grace_ends()
  local h = redis.call('HMGET', ns, 'hold', 'exp')
  ns_exp = tonumber(h[2])
  local hold = tonumber(h[1]) or 0
  if hold > now then return hold end
end

local hosts, claims, served = P .. ':hosts', P .. ':claim:', P .. ':served'
-- Hand-outs (P:served) of this process and of the claimants met, read together
-- with the claims (one ZMSCORE), or when first needed: a pop that meets no
-- claim reads none.
local mine = nil
local counts = {}  -- owner -> hand-outs (false: not live)
-- A process joins at the least served live one's count: from then on it is even.
-- It joins before it claims or is handed anything (a claim of a process not in
-- P:served would be nobody's).
local function my_count(known)
  if mine then return mine end
  if known == nil then known = tonumber(redis.call('ZSCORE', served, pid)) end
  mine = known
  if not mine then
    mine = tonumber(redis.call('ZRANGE', served, 0, 0, 'WITHSCORES')[2]) or 0
    redis.call('ZADD', served, mine, pid)
  end
  return mine
end

-- The head of the index, read ONCE, with its hosts' IPs (P:ip:<key>; false:
-- nobody resolved it yet) and their buckets' claims in one MGET each: the
-- scans below look at these rows in memory, so a pop costs a few commands
-- plus a few per host it examines, not a few per host in the index head.
local flat = redis.call('ZRANGE', hosts, 0, 4 * looks - 1, 'WITHSCORES')
local n = #flat / 2
local rows = {}  -- {host key, its eligible instant; nil once its queue emptied}
local ips = {}
if n > 0 then
  local names = {}
  for i = 1, n do
    rows[i] = {flat[2 * i - 1], tonumber(flat[2 * i])}
    names[i] = P .. ':ip:' .. flat[2 * i - 1]
  end
  local got = redis.call('MGET', unpack(names))
  for i = 1, n do ips[rows[i][1]] = got[i] end
end
local function ip_of(key)
  local ip = ips[key]
  if ip == nil then
    ip = redis.call('GET', P .. ':ip:' .. key)
    ips[key] = ip
  end
  return ip
end

local function bucket_of(key)
  return bucket_for(key, ip_of(key))
end

local claim_of = {}  -- bucket -> "pid until" (false: none), as read or written here
if grace > 0 and n > 0 then
  local seen, buckets, names = {}, {}, {}
  for i = 1, n do
    local b = bucket_of(rows[i][1])
    if not seen[b] then
      seen[b] = true
      buckets[#buckets + 1] = b
      names[#names + 1] = claims .. b
    end
  end
  local got = redis.call('MGET', unpack(names))
  local ask, asked = {pid}, {[pid] = true}
  for i = 1, #buckets do
    claim_of[buckets[i]] = got[i]
    local owner = got[i] and string.match(got[i], '^(%S+)')
    if owner and not asked[owner] then
      asked[owner] = true
      ask[#ask + 1] = owner
    end
  end
  if #ask > 1 then  -- this process's count and every claimant's, in one command
    local cnt = redis.call('ZMSCORE', served, unpack(ask))
    for i = 2, #ask do counts[ask[i]] = tonumber(cnt[i]) or false end
    my_count(tonumber(cnt[1]) or false)
  end
end

-- Whether ``owner`` was served ``take`` or more hand-outs than this process.
local function is_ahead(owner)
  local cnt = counts[owner]
  if cnt == nil then
    cnt = tonumber(redis.call('ZSCORE', served, owner)) or false
    counts[owner] = cnt
  end
  return not cnt or cnt >= my_count() + take  -- not live: its claim is nobody's
end

-- When another process's live claim on ``bucket`` lapses; nil if free or ours
-- (or, ``taking``, the claimant's to take over: see the top). Then its owner and
-- step (the claimant's booked start to the claimed instant; 0: not a hand-out's).
local function claimed(bucket, taking)
  if grace <= 0 then return nil end
  local c = claim_of[bucket]
  if c == nil then
    c = redis.call('GET', claims .. bucket)
    claim_of[bucket] = c
  end
  if not c then return nil end
  local owner, untl, step = string.match(c, '^(%S+) (%S+) ?(%S*)')
  untl = tonumber(untl)
  if owner == pid or untl <= now then return nil end
  if taking and is_ahead(owner) then return nil end
  return untl, owner, tonumber(step) or 0
end

-- When this process should ask again for a bucket another process claimed until
-- ``untl`` (its instant + grace): when it may take the claim over, i.e. after the
-- ``d`` hand-outs the claimant still needs to be TAKE ahead of it, one per
-- ``step``, at the instant the next is due (that pop books it). Without a step
-- (not a hand-out's claim), when the claim lapses. Asking at each lapse instead
-- cost N-1 pops that hand out nothing per start of one busy bucket; this way a
-- bucket changes hands every TAKE starts, each costing the claimant passed over
-- one pop.
local function come_for(untl, owner, step)
  local at = untl - grace
  local cnt = counts[owner]
  local d = 0
  if cnt then d = my_count() + TAKE - cnt end
  if d > 0 then
    if step <= 0 then return untl end
    at = at + d * step
  end
  return at - lead
end

-- ``step``: this hand-out's start to ``at`` (nil: not a hand-out's claim).
local function claim(bucket, at, step)
  if grace <= 0 then return end
  my_count()  -- joined first (see my_count)
  local ms = math.ceil((at + grace - now) * 1000)
  if ms < 1 then ms = 1 end
  local value = pid .. ' ' .. fmt(at + grace)
  if step and step > 0 then value = value .. ' ' .. fmt(step) end
  redis.call('SET', claims .. bucket, value, 'PX', ms)
  claim_of[bucket] = value
end

-- The host due first among the rows (as this call left them) not claimed by
-- another process (nor one to take over), and when (nil, come: none; come, when
-- to ask again for the first claimed bucket (come_for); nil when nothing is queued at all). ``bkt``/``bkt_at``: a bucket just booked
-- and its next instant, which its other hosts' index entries (lower bounds) do
-- not know yet: next_in from those would be a pop that finds nothing.
local function first_free(bkt, bkt_at)
  local lapse, best, best_at = nil, nil, nil
  for i = 1, n do
    local key, at = rows[i][1], rows[i][2]
    if at then
      local b = bucket_of(key)
      local other, owner, step = claimed(b, true)
      if other then
        other = come_for(other, owner, step)
        if not lapse or other < lapse then lapse = other end
      else
        if bkt_at and b == bkt and at < bkt_at then at = bkt_at end
        if not best or at < best_at then best, best_at = key, at end
      end
    end
  end
  if best then return best, best_at end
  return nil, lapse
end

local cfg_queued = nil  -- POLITENESS_HOSTS overrides queued? Read once, when first asked
local function has_cfg()
  if cfg_queued == nil then cfg_queued = redis.call('EXISTS', P .. ':cfg') == 1 end
  return cfg_queued
end
local busy = {}  -- IP bucket -> its next instant, when found beyond the lead in this call

-- Host ``key``'s buckets as they stand (_eligibility.lua's rule): when its next
-- start may go, and what booking it needs (a table; ip false: nobody resolved it).
local function state_of(key)
  local s = {ready = now, interval = 0, adaptive = 0, crawl_delay = 0, not_before = 0,
             d = default, f = floor, c = ceiling, ip = false}
  s.cfg = has_cfg() and redis.call('HGET', P .. ':cfg', key)
  if s.cfg then
    local v = {}
    for x in string.gmatch(s.cfg, '%S+') do v[#v + 1] = tonumber(x) end
    s.d, s.f, s.c = v[1], v[2], v[3]
  end
  if key == '' then return s end  -- requests the gate ignores (no host): no bucket
  local last_start
  s.hkey = NS .. ':host:' .. key
  local skip
  s.adaptive, s.crawl_delay, last_start, s.not_before, skip, skip, skip, s.exp =
    read_host(s.hkey, s.d)
  s.interval = host_clamp(s.adaptive, s.crawl_delay, s.f, s.c)
  s.ready = host_ready(now, last_start, s.interval, s.not_before, margin)
  s.ip = ip_of(key)
  if s.ip and s.ip ~= '' then
    s.ipkey = NS .. ':ip:' .. s.ip
    s.ip_next = tonumber(redis.call('GET', s.ipkey))
    s.ready = held_until(s.ready, s.ip_next, margin)
    local ip_ready = held_until(now, s.ip_next, margin)
    if ip_ready > now + lead then busy[bucket_for(key, s.ip)] = ip_ready end
  end
  return s
end

-- Row ``i`` (host ``key``, queue ``q``) may go no sooner than ``ready``: re-file
-- it there. Hosts held by one IP tie there (and a tie goes by name, the same
-- host last each time): the one with more queued goes first (at most 1 ms
-- sooner, a lower bound still), so no host is left alone at the end at its own
-- pace while its IP idles. An emptied queue (a clear) drops its stale entry.
local function refile(i, key, q, ready)
  local cnt = redis.call('ZCARD', q)
  if cnt == 0 then
    redis.call('ZREM', hosts, key)
    if has_cfg() then redis.call('HDEL', P .. ':cfg', key) end
    rows[i][2] = nil
    return
  end
  if cnt > 100 then cnt = 100 end
  local score = ready - 1e-5 * cnt
  if score > rows[i][2] then
    redis.call('ZADD', hosts, score, key)
    rows[i][2] = score
  end
end

local function row_of(key)
  for i = 1, n do
    if rows[i][1] == key then return i end
  end
end

local tries = 0  -- hosts examined (those claimed elsewhere are passed over)
for i = 1, n do
  if tries >= looks then break end
  local key, at = rows[i][1], rows[i][2]
  local bucket = bucket_of(key)
  if at and not claimed(bucket, true) then
    tries = tries + 1
    -- Rows are in index order; a host re-filed above may now come sooner than
    -- this one: the end of the script picks the soonest.
    if at > now + lead then break end
    local q = P .. ':q:' .. key
    local held = busy[bucket]
    -- Its IP was found busy in this call: re-file it there (a lower bound
    -- still) without reading its host. Else read both buckets, and the queue's
    -- head only when it may go.
    local s = nil
    if not held then s = state_of(key) end
    if held or s.ready > now + lead then
      refile(i, key, q, held or s.ready)
    else
      local hold = grace_ends()
      if hold then return {'wait', fmt(hold - now)} end
      local head = redis.call('ZRANGE', q, 0, 1, 'WITHSCORES')  -- and the next?
      if #head == 0 then
        refile(i, key, q, 0)  -- emptied by a clear: drop the stale entry
      else
        local member, score = head[1], head[2]
        local more = #head > 2
        redis.call('ZREM', q, member)
        local start = s.ready
        local sent = start + slip  -- spent where the bytes are expected to leave
        local ip_at = nil  -- the IP's next start, whichever host it is for
        if s.hkey then  -- book both buckets as reserve.lua does (_eligibility.lua)
          local horizon = spend_host(s.hkey, sent, s.interval, s.crawl_delay, s.not_before,
                                     s.c, now, idle, s.exp)
          if s.ipkey then
            local own = nil  -- decoupled: the IP's own interval, its floor before any evidence
            if decoupled then own = ip_floor end
            local nxt = sent + ip_spacing(own, s.adaptive, s.f, s.c, ip_floor)
            spend_ip(s.ipkey, s.ip_next, nxt, now, idle)
            if nxt > horizon then horizon = nxt end
            if s.ip_next and s.ip_next > nxt then nxt = s.ip_next end
            ip_at = held_until(now, nxt, margin)
            busy[bucket] = ip_at
          end
          -- The namespace hash (epoch, hold) outlives every booking; extended
          -- by `idle` more than needed, most bookings neither read nor write it.
          keep_hash_at_least(ns, horizon - now + idle, idle, ns_exp, now)
        end
        if more then
          local next_at = host_ready(now, sent, s.interval, s.not_before, margin)
          redis.call('ZADD', hosts, next_at, key)
          rows[i][2] = next_at
          claim(bucket, next_at, next_at - start)  -- we come back for it (next_in)
        else
          redis.call('ZREM', hosts, key)
          if s.cfg then redis.call('HDEL', P .. ':cfg', key) end  -- a push writes it again
          rows[i][2] = nil
          if ip_at then
            claim(bucket, ip_at, ip_at - start)
          elseif grace > 0 then
            redis.call('DEL', claims .. bucket)
            claim_of[bucket] = false
          end
        end
        local id = string.sub(member, 1, 16)
        redis.call('HSET', P .. ':lease:' .. pid, id,
                   cmsgpack.pack({key, score, member, s.cfg or ''}))
        my_count()  -- joined at the least served count first
        redis.call('ZINCRBY', served, 1, pid)
        local booked = 0  -- no IP bucket; 1: the IP booked; 2: IP unknown, host only
        if s.ipkey then booked = 1 elseif not s.ip then booked = 2 end
        -- When to ask next (-1: nothing queued), so the engine's immediate next
        -- pull is answered without a round trip. The index entries are lower
        -- bounds (other processes booked their IPs since): the host due first
        -- is read here, re-filed if it is due later, and claimed when it is not
        -- due yet, so the next pop finds it ready instead of answering "wait"
        -- (that pop's round trip is saved).
        local nxt_key, nxt_at = first_free(bucket, ip_at)
        for _ = 1, NEXT_CHECKS do
          if not nxt_key or nxt_at > now + lead + NEXT_HORIZON then break end
          local j = row_of(nxt_key)
          local b = bucket_of(nxt_key)
          local real = busy[b]
          if not real then real = state_of(nxt_key).ready end
          if real <= now + lead or real <= nxt_at + 0.002 then break end  -- as filed
          refile(j, nxt_key, P .. ':q:' .. nxt_key, real)
          nxt_key, nxt_at = first_free(bucket, ip_at)
        end
        local next_in = -1
        if nxt_key then
          next_in = nxt_at - lead - now
          if next_in < 0 then next_in = 0 end
          local b = bucket_of(nxt_key)
          if next_in > 0 then  -- the bucket just booked: its step is this hand-out's
            claim(b, nxt_at, b == bucket and nxt_at - start or nil)
          end
        end
        return {'req', string.sub(member, 17), id, s.ip or '', booked, fmt(start - now),
                fmt(next_in), fmt(start)}
      end
    end
  end
end
local key, at = first_free()
if not key then
  if not at then return {'empty'} end
  local come = at - now
  if come < 0 then come = 0 end
  return {'claimed', fmt(come)}
end
local wait = at - lead - now
if wait < 0 then wait = 0 end
if wait > 0 then claim(bucket_of(key), at) end
return {'wait', fmt(wait)}
