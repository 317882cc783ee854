-- _frontier.lua: prepended (after _host.lua and _eligibility.lua) to the
-- frontier_*.lua scripts.
--
-- The frontier's keys, all under the scrapy-redis queue key P:
--   P:q:<host key>   ZSET of requests: score -priority, member 16 hex digits of a
--                    push counter + the serialised request (FIFO within a priority)
--   P:hosts          ZSET host key -> earliest instant (server clock) it may be
--                    eligible: a lower bound, re-evaluated when it reaches the top
--   P:ip:<host key>  the host's IP bucket ('' = none), written once resolved, TTL
--   P:cfg            host key -> "default floor ceiling" for POLITENESS_HOSTS overrides,
--                    while the host has queued requests (a lease carries its own copy)
--   P:len            requests queued or leased (not finished): a hand-out or a
--                    requeue leaves it as it is; a push adds, an ack subtracts.
--                    (P:leased, the leased count of versions before, still adds to
--                    it: a fleet mixing both versions counts right)
--   P:procs          ZSET process id -> heartbeat deadline
--   P:lease:<pid>    HASH request id -> msgpack {host key, score, member, cfg}: what a
--                    process holds until its request ends; requeued if it dies
--   P:claim:<bucket> "pid until" (bucket: IP, or host key without one): the process
--                    that comes for the bucket's next instant (frontier_pop.lua);
--                    expires when the claim lapses, so claims never outgrow the working set
--   P:served         ZSET live process id -> requests handed out to it (who takes a
--                    claim over: frontier_pop.lua); a process leaves it with its leases

-- The bucket a host's starts queue on: its IP (``ip``, read from P:ip:<key>) if
-- known, else the host key.
local function bucket_for(key, ip)
  if ip and ip ~= '' then return ip end
  return key
end

-- A process resolved host ``key``: share its IP bucket (TTL ``ttl`` s) and let
-- the host (held while unresolved) be considered at once.
local function share_ip(P, key, ip, ttl, now)
  redis.call('SET', P .. ':ip:' .. key, ip, 'PX', math.ceil(ttl * 1000))
  local at = tonumber(redis.call('ZSCORE', P .. ':hosts', key))
  if at and at > now then redis.call('ZADD', P .. ':hosts', now, key) end
end

-- Queue one request under its host key (frontier_push.lua; pushes carried by a
-- pop: frontier_pop.lua). ip: the host's IP bucket, '' for none, '?' when not
-- resolved yet; hold: how long a host whose IP nobody wrote yet waits for it;
-- cfg: "default floor ceiling" when POLITENESS_HOSTS overrides the host, else ''.
-- seq: its push number, taken by the caller for a batch (nil: one of its own);
-- seen: a batch's table of the host entries written already (nil: none), so a
-- host pushed again in the same batch costs one command, not four.
local function push_one(P, now, data, priority, key, ip, ip_ttl, hold, cfg, seq, seen)
  seq = seq or redis.call('INCR', P .. ':seq')
  redis.call('ZADD', P .. ':q:' .. key, -tonumber(priority), string.format('%016x', seq) .. data)
  if seen then
    local tag = key .. ' ' .. ip .. ' ' .. cfg
    if seen[tag] then return end
    seen[tag] = true
  end
  local ipkey = P .. ':ip:' .. key
  if ip ~= '?' then redis.call('SET', ipkey, ip, 'PX', math.ceil(tonumber(ip_ttl) * 1000)) end
  if cfg ~= '' then redis.call('HSET', P .. ':cfg', key, cfg) end
  local at = now
  if ip == '?' and redis.call('EXISTS', ipkey) == 0 then at = now + tonumber(hold) end
  redis.call('ZADD', P .. ':hosts', 'NX', at, key)  -- queued already: its entry stands
end

-- Put every request leased by process ``pid`` back into its host queue.
local function requeue(P, pid, now)
  local lk = P .. ':lease:' .. pid
  local all = redis.call('HGETALL', lk)
  local n = 0
  for i = 2, #all, 2 do
    local e = cmsgpack.unpack(all[i])
    redis.call('ZADD', P .. ':q:' .. e[1], e[2], e[3])
    redis.call('ZADD', P .. ':hosts', 'NX', now, e[1])
    if e[4] and e[4] ~= '' then redis.call('HSET', P .. ':cfg', e[1], e[4]) end
    local ck = P .. ':claim:' .. bucket_for(e[1], redis.call('GET', P .. ':ip:' .. e[1]))
    local c = redis.call('GET', ck)
    if c and string.match(c, '^(%S+)') == pid then redis.call('DEL', ck) end
    n = n + 1
  end
  redis.call('DEL', lk)
  redis.call('ZREM', P .. ':procs', pid)
  redis.call('ZREM', P .. ':served', pid)
  return n
end

-- At most one process whose heartbeat ran out per call: O(its leases).
local function reclaim_dead(P, now)
  local dead = redis.call('ZRANGEBYSCORE', P .. ':procs', '-inf', now, 'LIMIT', 0, 1)
  if #dead == 0 then return 0 end
  return requeue(P, dead[1], now)
end
