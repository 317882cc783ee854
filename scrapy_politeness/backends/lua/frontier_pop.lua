-- frontier_pop.lua: hand out one request whose host AND IP are eligible now, and
-- book both buckets on the keys reserve.lua books, in the same atomic step.
--
-- Several processes pop concurrently; as each pick and its booking are one
-- script, no two processes can hand out starts the budget cannot take. The
-- host and IP instants are reserve.lua's: last_start + interval + margin,
-- not_before + margin, the IP key + margin; server clock only.
--
-- ARGV: P NS pid lease picks default floor ceiling ip_floor margin idle looks lead
--       slip n_acks acks...
--   pid/lease: this process and how long its heartbeat lasts; picks 0 = heartbeat only
--   lead: a request eligible within this many seconds is handed out, booked at
--         its eligible instant (the middleware sleeps until it: the engine's
--         latency from here to the download then cannot shift the start)
--   slip: how late after its booked start this process expects its bytes to leave
--         (reserve.lua's slip): both buckets are spent at start + slip
--   acks: request ids this process finished (their leases end)
-- Returns {'req', data, id, ip, booked, delay, next_in}, {'wait', seconds}, {'empty'} or {'beat'};
--   booked: 0 no IP bucket, 1 the IP booked too, 2 IP unknown (host booked only)
local now = now_of_server()
local P, NS, pid = ARGV[1], ARGV[2], ARGV[3]
local lease, picks = tonumber(ARGV[4]), tonumber(ARGV[5])
local default, floor, ceiling = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local ip_floor, margin, idle = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local looks, lead, slip = tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14])
local n_acks = tonumber(ARGV[15])

reclaim_dead(P, now)  -- before our own heartbeat: never reclaim ourselves
redis.call('ZADD', P .. ':procs', now + lease, pid)
if n_acks > 0 then
  local gone = redis.call('HDEL', P .. ':lease:' .. pid, unpack(ARGV, 16, 15 + n_acks))
  if gone > 0 then redis.call('DECRBY', P .. ':leased', gone) end
end
if picks == 0 then return {'beat'} end

local ns = NS .. ':ns'
local hold = tonumber(redis.call('HGET', ns, 'hold')) or 0
if hold > now then return {'wait', fmt(hold - now)} end

local hosts = P .. ':hosts'
for _ = 1, looks do
  local top = redis.call('ZRANGE', hosts, 0, 0, 'WITHSCORES')
  if #top == 0 then return {'empty'} end
  local key, at = top[1], tonumber(top[2])
  if at > now + lead then return {'wait', fmt(at - lead - now)} end
  local q = P .. ':q:' .. key
  local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
  if #head == 0 then
    redis.call('ZREM', hosts, key)  -- emptied by a clear: drop the stale entry
  else
    local d, f, c = default, floor, ceiling
    local cfg = redis.call('HGET', P .. ':cfg', key)
    if cfg then
      local v = {}
      for x in string.gmatch(cfg, '%S+') do v[#v + 1] = tonumber(x) end
      d, f, c = v[1], v[2], v[3]
    end
    local ready, hkey, interval, adaptive, crawl_delay, not_before = now, nil, 0, 0, 0, 0
    local ip, ipkey, ip_next = false, nil, nil
    if key ~= '' then  -- '' holds requests the gate ignores (no host): no bucket
      local last_start
      hkey = NS .. ':host:' .. key
      adaptive, crawl_delay, last_start, not_before = read_host(hkey, d)
      interval = host_clamp(adaptive, crawl_delay, f, c)
      if last_start and last_start + interval + margin > ready then
        ready = last_start + interval + margin
      end
      if not_before > 0 and not_before + margin > ready then ready = not_before + margin end
      ip = redis.call('GET', P .. ':ip:' .. key)  -- false: nobody resolved it yet
      if ip and ip ~= '' then
        ipkey = NS .. ':ip:' .. ip
        ip_next = tonumber(redis.call('GET', ipkey))
        if ip_next and ip_next + margin > ready then ready = ip_next + margin end
      end
    end
    if ready > now + lead then
      redis.call('ZADD', hosts, ready, key)  -- not yet: re-file it at its real instant
    else
      local member, score = head[1], head[2]
      redis.call('ZREM', q, member)
      local start = ready
      local sent = start + slip  -- spent where the bytes are expected to leave
      if hkey then  -- book both buckets exactly as reserve.lua does
        redis.call('HSET', hkey, 'last_start', fmt(sent))
        local keep = c
        if crawl_delay > keep then keep = crawl_delay end
        if not_before - now > keep then keep = not_before - now end
        if sent + interval - now > keep then keep = sent + interval - now end
        redis.call('PEXPIRE', hkey, math.ceil((keep + idle) * 1000))
        local horizon = sent + interval
        if ipkey then
          local spacing = host_clamp(adaptive, 0, f, c)
          if ip_floor > spacing then spacing = ip_floor end
          local nxt = sent + spacing
          if not ip_next or nxt > ip_next then
            redis.call('SET', ipkey, fmt(nxt), 'PX', math.ceil((nxt - now + idle) * 1000))
          end
          if nxt > horizon then horizon = nxt end
        end
        local want = math.ceil((horizon - now + idle) * 1000)
        if redis.call('PTTL', ns) < want then redis.call('PEXPIRE', ns, want) end
      end
      if redis.call('EXISTS', q) == 1 then
        redis.call('ZADD', hosts, sent + interval + margin, key)
      else
        redis.call('ZREM', hosts, key)
      end
      local id = string.sub(member, 1, 16)
      redis.call('HSET', P .. ':lease:' .. pid, id, cmsgpack.pack({key, score, member}))
      redis.call('DECR', P .. ':len')
      redis.call('INCR', P .. ':leased')
      local booked = 0  -- no IP bucket; 1: the IP booked; 2: IP unknown, host only
      if ipkey then booked = 1 elseif not ip then booked = 2 end
      -- when to ask next (-1: nothing queued), so the engine's immediate next
      -- pull is answered without a round trip
      local nxt_top = redis.call('ZRANGE', hosts, 0, 0, 'WITHSCORES')
      local next_in = -1
      if #nxt_top > 0 then
        next_in = tonumber(nxt_top[2]) - lead - now
        if next_in < 0 then next_in = 0 end
      end
      return {'req', string.sub(member, 17), id, ip or '', booked, fmt(start - now),
              fmt(next_in)}
    end
  end
end
local top = redis.call('ZRANGE', hosts, 0, 0, 'WITHSCORES')
if #top == 0 then return {'empty'} end
local wait = tonumber(top[2]) - lead - now
if wait < 0 then wait = 0 end
return {'wait', fmt(wait)}
