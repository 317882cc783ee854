-- resync.lua: after the server lost its state, re-seed one client's pending
-- bookings (the starts it is still sleeping towards) so new bookings respect them.
--
-- KEYS[1] namespace hash, then n host hashes, then the IP keys
-- ARGV: n idle_margin, then per host its start (relative) and interval,
--       then per IP its next-eligible (relative)
-- Returns the namespace epoch.
local now = server_now()
local n = tonumber(ARGV[1])
local idle = tonumber(ARGV[2])
for i = 1, n do
  local key = KEYS[1 + i]
  local start = now + tonumber(ARGV[1 + 2 * i])
  local cur = tonumber(redis.call('HGET', key, 'last_start'))
  if not cur or start > cur then redis.call('HSET', key, 'last_start', fmt(start)) end
  keep_at_least(key, start - now + tonumber(ARGV[2 + 2 * i]) + idle)
end
for j = n + 2, #KEYS do
  local nxt = now + tonumber(ARGV[n + j + 1])  -- ARGV[2 + 2n + (j - n - 1)]
  spend_ip(KEYS[j], tonumber(redis.call('GET', KEYS[j])), nxt, now, idle)
end
return redis.call('HGET', KEYS[1], 'epoch')
