redis.replicate_commands()  -- writes after TIME (Redis 5-6; a no-op from 7)
local key, taken, n = KEYS[1], KEYS[2], tonumber(ARGV[1])
local kind = redis.call('TYPE', key).ok
local out
if kind == 'list' then
  out = redis.call('LRANGE', key, 0, n - 1)
  redis.call('LTRIM', key, n, -1)
elseif kind == 'set' then
  out = redis.call('SPOP', key, n)
elseif kind == 'zset' then
  -- highest score first, as scrapy-redis reads a zset of start URLs
  out = redis.call('ZREVRANGE', key, 0, n - 1)
  if #out > 0 then redis.call('ZREMRANGEBYRANK', key, -#out, -1) end
else
  out = {}
end
if #out > 0 then
  -- A claim on the batch until the taker has scheduled it (or its deadline
  -- passed: a worker killed in between): the crawl is not idle meanwhile.
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', taken, '-inf', now)
  redis.call('ZADD', taken, now + tonumber(ARGV[3]), ARGV[2])
end
table.insert(out, 1, kind)
return out
