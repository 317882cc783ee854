-- feedback.lua: fold one fetch outcome into the shared host in ONE atomic step.
--
-- A line-by-line port of HostTable.feedback / Config.adapt, so every crawler
-- process sees the same AIMD state. The Retry-After window is anchored on the
-- server's clock (TIME).
--
-- KEYS[1] host hash; with a late start: KEYS[2] IP key, KEYS[3] the IP's late key
--   (both optional, as late_start.lua's)
-- ARGV: status retry_after latency default floor ceiling backoff soft_widen
--       narrow latency_rise latency_min_rise dead_after alpha idle_margin
--       recovery ('fast', 'bracket' or 'additive') and the fast recovery's constants:
--       shrink confirm patience probe_share margin forget_after forget_step min_widen
--       at_pace refused_weight pending_at_most round_belief
--       gap (the judged fetch's own booked gap; 0: the last booked one)
--       backlog (the host's requests still queued, recovery.pays_back; -1: unknown)
--       and, optionally, the late start this fetch's headers revealed (late_start.lua's
--       started_ago interval ip_spacing): it is applied first, as it happened first;
--       or 'early' answered_ago spent ip_spacing margin: a frontier booking's
--       answer came sooner than its spend (answer_bound, KEYS[2] the IP key)
-- Returns: {adaptive, crawl_delay, not_before_in, latency, streak, dead,
--           fail_at, good_at, healthy_run, fail_cost}
local now = server_now()
local status = tonumber(ARGV[1])
local retry_after = tonumber(ARGV[2])
local latency = tonumber(ARGV[3])
local default = tonumber(ARGV[4])
local floor = tonumber(ARGV[5])
local ceiling = tonumber(ARGV[6])
local backoff = tonumber(ARGV[7])
local soft_widen = tonumber(ARGV[8])
local narrow = tonumber(ARGV[9])
local latency_rise = tonumber(ARGV[10])
local latency_min_rise = tonumber(ARGV[11])
local dead_after = tonumber(ARGV[12])
local alpha = tonumber(ARGV[13])
local idle = tonumber(ARGV[14])
local recovery = ARGV[15]
local shrink = tonumber(ARGV[16])
local confirm = tonumber(ARGV[17])
local patience = tonumber(ARGV[18])
local probe_share = tonumber(ARGV[19])
local margin = tonumber(ARGV[20])
local forget_after = tonumber(ARGV[21])
local forget_step = tonumber(ARGV[22])
local min_widen = tonumber(ARGV[23])
local at_pace = tonumber(ARGV[24])
local refused_weight = tonumber(ARGV[25])
local pending_at_most = tonumber(ARGV[26])
local round_belief = tonumber(ARGV[27])
local own_gap = tonumber(ARGV[28]) or 0
local backlog = tonumber(ARGV[29]) or -1
if ARGV[30] == 'early' then
  answer_bound(now, KEYS[1], KEYS[2], tonumber(ARGV[31]), tonumber(ARGV[32]),
               tonumber(ARGV[33]), tonumber(ARGV[34]))
elseif ARGV[30] then
  late_start(now, KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[30]), tonumber(ARGV[31]),
             tonumber(ARGV[32]), idle)
end

local function clamp(adaptive, crawl_delay)
  return host_clamp(adaptive, crawl_delay, floor, ceiling)
end

-- read_host's fields and the recovery's in ONE HMGET (a command per request saved)
local adaptive, crawl_delay, last_start, not_before, prev, streak, dead, _, f =
  read_host(KEYS[1], default, 'fail_at', 'good_at', 'run', 'gap', 'cost')
local fail_at, good_at, run = tonumber(f[1]) or 0, tonumber(f[2]) or 0, tonumber(f[3]) or 0
local gap = tonumber(f[4]) or 0  -- start-to-start before the last booked start (reserve.lua)
local cost = tonumber(f[5]) or 0
if own_gap > 0 then gap = own_gap end

-- Config.widen: multiply, and always wider (0 x backoff is 0).
local function widen(x)
  local w = x * backoff
  if w > x then return w end
  if narrow > min_widen then return x + narrow end
  return x + min_widen
end

-- recovery.is_round / round_pace_in: n requests per second or one per n seconds.
local exact = 1e-9
local function is_round(x)
  if x <= 0 then return false end
  local n = x
  if x < 1 then n = 1 / x end
  return math.abs(n - math.floor(n + 0.5)) <= exact * n
end
local function round_pace_in(low, high)
  local top = high * (1 - exact)
  if top <= 0 then return 0 end
  local pace
  if top > 1 then pace = math.ceil(top) - 1 else pace = 1 / (math.floor(1 / top) + 1) end
  if pace > low * (1 + exact) then return pace end
  return 0
end

local failed = status == 0 or status == 429 or status >= 500
local rising = prev > 0 and latency > prev * latency_rise
               and latency - prev >= latency_min_rise
local adapted
if recovery ~= 'additive' then
  -- policy/recovery.py fast_step, line by line.
  local x = adaptive
  local seen = x
  if gap > 0 then seen = gap end
  local descending = fail_at <= 0
  -- asked_for: the interval that produced the gap (x, or x / shrink in the descent)
  local function asked_for(g)
    local ref = x
    if descending and g >= x / shrink then ref = x / shrink end
    if ref <= g and g <= ref * at_pace then return ref end
    return g
  end
  if failed then
    -- past what the interval that spaced it explains: partly idle, failed at the pace held
    local spaced = x
    if descending then spaced = x / shrink end
    if seen > spaced * at_pace then seen = x end
    seen = asked_for(seen)
    fail_at = seen
    run = 0
    if good_at <= seen then good_at = 0 end
    if good_at > x then adapted = good_at else adapted = widen(x) end
    local paid = cost
    if retry_after > adapted then cost = retry_after else cost = adapted end
    if good_at > x then cost = cost + refused_weight * paid end  -- paid for these, doubled
  elseif rising then
    run = 0
    adapted = x * soft_widen
  elseif fail_at > 0 and seen > x * at_pace then
    adapted = x  -- not a fetch at the pace held: it proves nothing
  else
    run = run + 1
    if run < confirm and fail_at > 0 then
      adapted = x
    elseif fail_at > 0 and x < good_at and good_at <= seen and run < pending_at_most then
      adapted = x  -- a probe pending: this gap ran at the old pace (a few fetches at most)
    else
      good_at = asked_for(seen)
      local closest = fail_at * margin
      if fail_at <= 0 then
        run = confirm - 1
        adapted = x * shrink
      elseif x <= closest then
        if run >= forget_after then  -- the failing pace and the refusal record with it
          fail_at = fail_at * forget_step
          cost = cost / refused_weight
          run = confirm - 1
        end
        adapted = x
      else
        local price = cost
        local round_pace = 0
        if recovery == 'fast' then  -- round paces first
          round_pace = round_pace_in(fail_at, x)
          if round_pace > 0 then price = price / round_belief
          elseif is_round(x) then price = price * round_belief end
        end
        if run * (x - fail_at) >= patience * price then
          local probe = round_pace
          if round_pace <= 0 then
            probe = x * (fail_at / x) ^ probe_share
            if probe < closest then probe = closest end
          end
          -- recovery.pays_back: the saving over the work left against the price
          if backlog < 0 or backlog * (x - probe) * (1 - patience) >= patience * price then
            run = 0  -- the next probe pays its own rent
            adapted = probe
          else
            adapted = x  -- too little work left for a faster pace to pay for a refusal
          end
        else
          adapted = x
        end
      end
    end
  end
else
  -- Config.adapt, first match wins: failure, sharply rising latency, healthy.
  if failed then
    local widened = widen(adaptive)
    if retry_after > widened then adapted = retry_after else adapted = widened end
  elseif rising then
    adapted = adaptive * soft_widen
  else
    adapted = adaptive - narrow
  end
end
adaptive = clamp(adapted, 0)  -- stored clamped, without the crawl-delay

if retry_after > 0 and now + retry_after > not_before then not_before = now + retry_after end
if latency > 0 and status ~= 0 then
  if prev <= 0 then prev = latency else prev = alpha * latency + (1 - alpha) * prev end
end
if adaptive >= ceiling then streak = streak + 1 else streak = 0 end
if dead == 0 and streak >= dead_after then dead = 1 end

local nxt = nil
if last_start then nxt = last_start + clamp(adaptive, crawl_delay) end
local ttl = host_ttl(nxt, crawl_delay, not_before, ceiling, now, idle, nil, 0)  -- exact
local extend = {}
if ttl then extend = {'exp', fmt(now + ttl)} end
redis.call('HSET', KEYS[1], 'adaptive', fmt(adaptive), 'not_before', fmt(not_before),
           'latency', fmt(prev), 'streak', streak, 'dead', dead,
           'fail_at', fmt(fail_at), 'good_at', fmt(good_at), 'run', run, 'cost', fmt(cost),
           unpack(extend))
keep_host(KEYS[1], ttl)

local nb_in = not_before - now
if nb_in < 0 then nb_in = 0 end
return {fmt(adaptive), fmt(crawl_delay), fmt(nb_in), fmt(prev), streak, dead,
        fmt(fail_at), fmt(good_at), run, fmt(cost)}
