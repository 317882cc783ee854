-- frontier_release.lua: a process closes: its finished requests' leases end and
-- whatever it still holds goes back to the queue for the others.
-- ARGV: P pid n_acks acks...
local now = server_now()
local P, pid, n_acks = ARGV[1], ARGV[2], tonumber(ARGV[3])
if n_acks > 0 then
  local gone = redis.call('HDEL', P .. ':lease:' .. pid, unpack(ARGV, 4, 3 + n_acks))
  if gone > 0 then redis.call('DECRBY', P .. ':len', gone) end
end
return requeue(P, pid, now)
