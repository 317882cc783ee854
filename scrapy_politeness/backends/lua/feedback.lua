-- feedback.lua: fold one fetch outcome into the shared host in ONE atomic step.
--
-- A line-by-line port of HostTable.feedback / Config.adapt, so every crawler
-- process sees the same AIMD state. The Retry-After window is anchored on the
-- server's clock (TIME).
--
-- KEYS[1] host hash
-- ARGV: status retry_after latency default floor ceiling backoff soft_widen
--       narrow latency_rise latency_min_rise dead_after alpha idle_margin
-- Returns: {adaptive, crawl_delay, not_before_in, latency, streak, dead}
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
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

local function clamp(adaptive, crawl_delay)
  return host_clamp(adaptive, crawl_delay, floor, ceiling)
end

local adaptive, crawl_delay, last_start, not_before, prev, streak, dead =
  read_host(KEYS[1], default)

-- Config.adapt, first match wins: failure, sharply rising latency, healthy.
local failed = status == 0 or status == 429 or status >= 500
local rising = prev > 0 and latency > prev * latency_rise
               and latency - prev >= latency_min_rise
local adapted
if failed then
  local widened = adaptive * backoff
  if retry_after > widened then adapted = retry_after else adapted = widened end
elseif rising then
  adapted = adaptive * soft_widen
else
  adapted = adaptive - narrow
end
adaptive = clamp(adapted, 0)  -- stored clamped, without the crawl-delay

if retry_after > 0 and now + retry_after > not_before then not_before = now + retry_after end
if latency > 0 and status ~= 0 then
  if prev <= 0 then prev = latency else prev = alpha * latency + (1 - alpha) * prev end
end
if adaptive >= ceiling then streak = streak + 1 else streak = 0 end
if dead == 0 and streak >= dead_after then dead = 1 end

redis.call('HSET', KEYS[1], 'adaptive', fmt(adaptive), 'not_before', fmt(not_before),
           'latency', fmt(prev), 'streak', streak, 'dead', dead)
local keep = ceiling
if crawl_delay > keep then keep = crawl_delay end
if not_before - now > keep then keep = not_before - now end
if last_start then
  local busy = last_start + clamp(adaptive, crawl_delay) - now
  if busy > keep then keep = busy end
end
redis.call('PEXPIRE', KEYS[1], math.ceil((keep + idle) * 1000))

local nb_in = not_before - now
if nb_in < 0 then nb_in = 0 end
return {fmt(adaptive), fmt(crawl_delay), fmt(nb_in), fmt(prev), streak, dead}
