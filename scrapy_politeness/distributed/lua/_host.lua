-- _host.lua: prepended to every script when it is loaded (lua_source.py), so
-- the clamp and the host hash layout exist once.

-- Config.host_interval: clamp into [max(floor, crawl_delay), ceiling]; a
-- crawl-delay above the ceiling wins.
local function host_clamp(adaptive, crawl_delay, floor, ceiling)
  local low = floor
  if crawl_delay > floor then low = crawl_delay end
  if adaptive < low then return low end
  if adaptive > ceiling then
    if low > ceiling then return low end
    return ceiling
  end
  return adaptive
end

local function fmt(x) return string.format('%.17g', x) end

-- The host hash as numbers: adaptive, crawl_delay, last_start (nil before the
-- first start), not_before, latency, streak, dead, exp (the instant its TTL was
-- last extended to, _eligibility.lua's host_ttl; nil: unknown); then the raw
-- values of any ``...`` fields, read by the same HMGET (one command, not two).
local function read_host(key, default, ...)
  local h = redis.call('HMGET', key, 'adaptive', 'crawl_delay', 'last_start',
                       'not_before', 'latency', 'streak', 'dead', 'exp', ...)
  return tonumber(h[1]) or default, tonumber(h[2]) or 0, tonumber(h[3]),
         tonumber(h[4]) or 0, tonumber(h[5]) or 0, tonumber(h[6]) or 0, tonumber(h[7]) or 0,
         tonumber(h[8]), {unpack(h, 9)}
end
