-- resync.lua: after the server lost its state, re-seed one client's pending
-- bookings (the starts it is still sleeping towards) so new bookings respect them.
--
-- KEYS[1] namespace hash, then n host hashes, then the IP keys
-- ARGV: n idle_margin, then per host its start (relative) and interval,
--       then per IP its next-eligible (relative)
-- Returns the namespace epoch.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local n = tonumber(ARGV[1])
local idle = tonumber(ARGV[2])
local function fmt(x) return string.format('%.17g', x) end
for i = 1, n do
  local key = KEYS[1 + i]
  local start = now + tonumber(ARGV[1 + 2 * i])
  local cur = tonumber(redis.call('HGET', key, 'last_start'))
  if not cur or start > cur then redis.call('HSET', key, 'last_start', fmt(start)) end
  local want = math.ceil((start - now + tonumber(ARGV[2 + 2 * i]) + idle) * 1000)
  if redis.call('PTTL', key) < want then redis.call('PEXPIRE', key, want) end
end
for j = n + 2, #KEYS do
  local nxt = now + tonumber(ARGV[n + j + 1])  -- ARGV[2 + 2n + (j - n - 1)]
  local cur = tonumber(redis.call('GET', KEYS[j]))
  if not cur or nxt > cur then
    redis.call('SET', KEYS[j], fmt(nxt), 'PX', math.ceil((nxt - now + idle) * 1000))
  end
end
return redis.call('HGET', KEYS[1], 'epoch')
