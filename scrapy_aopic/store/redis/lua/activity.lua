local pending = tonumber(redis.call('HGET', KEYS[1], 'pending') or '0') or 0
local leases = redis.call('HLEN', KEYS[2])
local seeds = 0
if KEYS[3] then
  local kind = redis.call('TYPE', KEYS[3]).ok
  if kind == 'list' then seeds = redis.call('LLEN', KEYS[3])
  elseif kind == 'set' then seeds = redis.call('SCARD', KEYS[3])
  elseif kind == 'zset' then seeds = redis.call('ZCARD', KEYS[3]) end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  seeds = seeds + redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf')
end
return {pending, leases, seeds}
