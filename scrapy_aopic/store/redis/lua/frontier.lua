-- The AOPIC frontier in Redis: one script, dispatched on ARGV[2]; every op
-- runs atomically, mirroring MemoryStore operation by operation (the same
-- float arithmetic in the same order).
--
-- KEYS (FrontierKeys.script_keys, all on the crawl's hash tag):
--   1 tot  2 acct  3 req  4 alias  5 hosts  6 hadv  7 lease  8 ldl  9 hbusy
-- ARGV: 1 the key tag, 2 op, 3 all-targets flag ('1': lambda pays every
-- account, '0': pending ones only), 4.. the op's arguments.
-- Floats travel as decimal strings: Python's repr in, '%.17g' out (Lua's
-- tostring and redis.call's number conversion keep only 14 digits).
-- Reply: {result, unreadable record...}: the records skipped as hostile
-- follow the result, for the caller to log.

local K_TOT, K_ACCT, K_REQ, K_ALIAS, K_HOSTS, K_HADV, K_LEASE, K_LDL, K_HBUSY =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
-- The two families of keys named by a host or a worker, chosen inside the
-- script (which host's queue to pop is the script's decision): derived from
-- the prefix, which carries the crawl's hash tag, so they share the declared
-- keys' slot on a Redis Cluster.
local P = ARGV[1]
local QP = P .. ':q:'
local OP = ARGV[2]
local ALL = ARGV[3] == '1'
local A = 4  -- first op argument

local PENDING, LEASED, CRAWLED, FAILED, REFUSED, ALIAS = 0, 1, 2, 3, 4, 5
local MAX_ALIAS_HOPS = 8
local REC = '<BBdddddi4i4'
local REC_SIZE = 50
-- lease: id, cash, deadline, and the account's cash, mark, the dividend and
-- the total in flight before the lease (to undo a lease exactly, see 'unlease')
local LEASE_REC = '<ddddddd'
local LEASE_SIZE = 56

local function fmt(x) return string.format('%.17g', x) end

local CORRUPT = {}
local function corrupt(what) CORRUPT[#CORRUPT + 1] = what end

-- totals ---------------------------------------------------------------
-- Read with one HMGET into a table built by one constructor (its size known
-- at once: no rehash as fields arrive), by every op but 'register', which
-- needs them only for a new URL and reads them then (load_totals): most
-- links registered are known already.
-- Whether ``v`` (tonumber of a stored value) is one this script never
-- writes as a number of the books: not a number, nan or +-inf (v - v ~= 0),
-- below 0 where the number cannot be (``signed``: sums that may drift below
-- 0 by an ulp), or for a ``count`` no integer (counts stay below 2^53,
-- exact doubles).
local function bad_number(v, count, signed)
  return not v or v - v ~= 0 or (v < 0 and not signed)
    or (count and (v % 1 ~= 0 or v > 9007199254740992))
end

local T, T0 = nil, nil
local function load_totals()
  if T then return end
  -- (in this order: T0[i]; 6..14 but 12, the dividend, are counts)
  T0 = redis.call('HMGET', K_TOT, 'injected', 'lambda_cash', 'lambda_history',
    'in_flight', 'history_sum', 'lambda_visits', 'visits', 'known', 'pending',
    'leased', 'crawled', 'dividend', 'next_seq', 'next_lease')
  -- an account once made wrote 'known' and 'next_seq' (neither goes down;
  -- 'pending' may be missing: back to 0 in the op that made it, a refusal)
  if T0[8] and not T0[13] then
    error('AOPICCORRUPT total next_seq missing, with known = ' .. string.format('%q', string.sub(T0[8], 1, 40)))
  end
  for i = 1, 14 do
    local raw = T0[i]
    if raw then
      local v = tonumber(raw)
      -- Checked as read, before any write (in flight and the history sum
      -- are the signed ones). The op stops with a reply the store raises
      -- as FrontierCorrupt, naming the value: the books cannot be trusted
      -- past it.
      if bad_number(v, i >= 6 and i ~= 12, i == 4 or i == 5) then
        -- (the names again, not a table every run would allocate)
        error('AOPICCORRUPT total ' .. select(i, 'injected', 'lambda_cash', 'lambda_history',
          'in_flight', 'history_sum', 'lambda_visits', 'visits', 'known', 'pending', 'leased',
          'crawled', 'dividend', 'next_seq', 'next_lease') .. ' = ' .. string.format('%q', string.sub(raw, 1, 40)))
      end
      T0[i] = v
    else
      T0[i] = 0
    end
  end
  T = {injected = T0[1], lambda_cash = T0[2], lambda_history = T0[3],
    in_flight = T0[4], history_sum = T0[5], lambda_visits = T0[6], visits = T0[7],
    known = T0[8], pending = T0[9], leased = T0[10], crawled = T0[11],
    dividend = T0[12], next_seq = T0[13], next_lease = T0[14]}
end
-- ('ack', 'outbox' and 'in_transit', of a sharded frontier's outbox, touch no total)
if OP ~= 'register' and OP ~= 'ping' and OP ~= 'ack' and OP ~= 'outbox' and OP ~= 'in_transit' then
  load_totals()
end

-- write back the totals that changed
local function save_totals()
  if not T then return end
  local args = {}
  local function put(i, f)
    local v = T[f]
    if v ~= T0[i] then
      args[#args + 1] = f
      args[#args + 1] = fmt(v)
    end
  end
  put(1, 'injected'); put(2, 'lambda_cash'); put(3, 'lambda_history')
  put(4, 'in_flight'); put(5, 'history_sum'); put(6, 'lambda_visits')
  put(7, 'visits'); put(8, 'known'); put(9, 'pending'); put(10, 'leased')
  put(11, 'crawled'); put(12, 'dividend'); put(13, 'next_seq'); put(14, 'next_lease')
  if #args > 0 then redis.call('HSET', K_TOT, unpack(args)) end
end

-- accounts -------------------------------------------------------------
-- The last record read or written (LAST): the richest URL, the head of its
-- host's queue and the entry popped are often one account, read once so.
-- Every change to a loaded table is followed by save(), which keeps LAST
-- and Redis the same.
local LAST = nil
-- load: a table, nil (unknown) or false (record unreadable: hostile data)
local function load(url)
  if LAST and LAST.url == url then return LAST end
  local raw = redis.call('HGET', K_ACCT, url)
  if not raw then return nil end
  if #raw < REC_SIZE then corrupt(url); return false end
  local ok, st, fl, cash, mark, hist, lv, seq, visits, depth, pos = pcall(struct.unpack, REC, raw)
  -- (x - x ~= 0: nan or +-inf; cash, mark and history never go below 0,
  -- and a mark is a dividend already paid)
  if not ok or st > ALIAS or cash - cash ~= 0 or mark - mark ~= 0 or hist - hist ~= 0 or lv - lv ~= 0
      or cash < 0 or mark < 0 or hist < 0 or (T and mark > T.dividend) then
    corrupt(url); return false
  end
  LAST = {url = url, state = st, flags = fl, cash = cash, mark = mark,
    history = hist, lv = lv, seq = seq, visits = visits, depth = depth,
    host = string.sub(raw, pos)}
  return LAST
end

local function save(a)
  redis.call('HSET', K_ACCT, a.url, struct.pack(REC, a.state, a.flags, a.cash,
    a.mark, a.history, a.lv, a.seq, a.visits, a.depth) .. a.host)
  LAST = a
end

local function is_target(a)
  local s = a.state
  if ALL then return s == PENDING or s == LEASED or s == CRAWLED end
  return s == PENDING
end

local function settle(a)
  if is_target(a) and a.mark ~= T.dividend then
    a.cash = a.cash + (T.dividend - a.mark)
    a.mark = T.dividend
  end
end

local function effective(a)
  if is_target(a) then return a.cash + (T.dividend - a.mark) end
  return a.cash
end

-- the host order: K_HOSTS holds each host with pending URLs, scored by its
-- best entry, member seq8 .. host; K_HADV remembers what was advertised
-- (seq8 .. score), read once per script per host (ADV)
local ADV = {}
-- Reads of the host order and of a host's queue head, kept for the rest of
-- the run (lambda's check, the min-share floor and the pop itself look at
-- the same head): every write to K_HOSTS or a queue drops what it changed.
local TOP_HOSTS = nil  -- the first TOP_SIZE members of K_HOSTS
local TOP_SIZE = 4
local HEADS = {}  -- host -> {member, score text} of its queue's head, or false
local function read_head(host)
  local top = redis.call('ZRANGE', QP .. host, 0, 0, 'WITHSCORES')
  return #top > 0 and top
end
local function head(host)
  local h = HEADS[host]
  if h == nil then
    h = read_head(host)
    HEADS[host] = h
  end
  return h
end
local function adv_of(host)
  local v = ADV[host]
  if v == nil then
    v = false
    local raw = redis.call('HGET', K_HADV, host)
    if raw and #raw > 8 then
      local score = tonumber(string.sub(raw, 9))
      if score then v = {seq8 = string.sub(raw, 1, 8), score = score} end
    end
    ADV[host] = v
  end
  return v
end

local function advertise(host, seq8, score_text)
  redis.call('ZADD', K_HOSTS, score_text, seq8 .. host)
  TOP_HOSTS = nil
  redis.call('HSET', K_HADV, host, seq8 .. score_text)
  ADV[host] = {seq8 = seq8, score = tonumber(score_text)}
end

-- (a head read here is not kept: the hosts re-advertised at the end of a
-- visit are many and not read again)
local function refresh_host(host)
  local top = HEADS[host]
  if top == nil then top = read_head(host) end
  local old = adv_of(host)
  if not top then
    if old then
      redis.call('ZREM', K_HOSTS, old.seq8 .. host); TOP_HOSTS = nil
      redis.call('HDEL', K_HADV, host)
      ADV[host] = false
    end
    return
  end
  local seq8 = string.sub(top[1], 1, 8)
  if old and old.seq8 == seq8 and old.score == tonumber(top[2]) then return end
  if old and old.seq8 ~= seq8 then redis.call('ZREM', K_HOSTS, old.seq8 .. host); TOP_HOSTS = nil end
  advertise(host, seq8, top[2])
end

-- hosts whose best entry may have changed: re-advertised once, before
-- K_HOSTS is read and at the end of the op
local DIRTY = {}
local function flush_hosts()
  for host in pairs(DIRTY) do
    refresh_host(host)
    DIRTY[host] = nil
  end
end

-- queue ``a`` or change its priority (same member: seq8 .. url); the host
-- needs re-advertising only if this entry is or beats its best
local function push(a)
  local host = a.host
  local score = a.mark - a.cash
  local seq8 = struct.pack('>I8', a.seq)
  redis.call('ZADD', QP .. host, fmt(score), seq8 .. a.url)
  HEADS[host] = nil
  if DIRTY[host] then return end
  local adv = adv_of(host)
  -- (sequence numbers compared as numbers: Lua compares strings with strcoll)
  if not adv or adv.seq8 == seq8 or score < adv.score
      or (score == adv.score and a.seq < struct.unpack('>I8', adv.seq8)) then
    DIRTY[host] = true
  end
end

local function unpush(a)
  local seq8 = struct.pack('>I8', a.seq)
  redis.call('ZREM', QP .. a.host, seq8 .. a.url)
  HEADS[a.host] = nil
  if DIRTY[a.host] then return end
  local adv = adv_of(a.host)
  if not adv or adv.seq8 == seq8 then DIRTY[a.host] = true end
end

local function new_account(url, host, depth, req, cash, queue)
  local a = {url = url, state = PENDING, flags = 0, cash = cash, mark = T.dividend,
    history = 0, lv = 0, seq = T.next_seq, visits = 0, depth = depth, host = host}
  T.next_seq = T.next_seq + 1
  T.known = T.known + 1
  T.pending = T.pending + 1
  save(a)
  if req ~= '' then redis.call('HSET', K_REQ, url, req) end
  if queue then push(a) end
  return a
end

local function count(state, delta)
  if state == PENDING then T.pending = T.pending + delta
  elseif state == LEASED then T.leased = T.leased + delta
  elseif state == CRAWLED then T.crawled = T.crawled + delta end
end

-- settle the dividend before leaving the target set; start at the current
-- dividend when entering it (MemoryStore._set_state)
local function set_state(a, state)
  local was = is_target(a)
  if was then settle(a) end
  count(a.state, -1)
  a.state = state
  count(state, 1)
  if not was and is_target(a) then a.mark = T.dividend end
end

-- follow aliases: url, account (nil / false / table), ok
local function resolve(url)
  local a = load(url)
  local hops = 0
  while a and a.state == ALIAS do
    if hops == MAX_ALIAS_HOPS then return url, a, false end
    local target = redis.call('HGET', K_ALIAS, url)
    if not target then corrupt(url); return url, false, false end
    url = target
    a = load(url)
    hops = hops + 1
  end
  return url, a, true
end

local function to_lambda(amount) T.lambda_cash = T.lambda_cash + amount end
-- What a visit's credits leave of its cash. Shares of the cash summed in
-- another order can leave a rounding residue below zero, which must not
-- make lambda's cash negative (load_totals refuses that as corrupt): it
-- counts as zero. (Anything larger is the caller's, passed on as is.)
local function to_lambda_rest(rest, cash)
  if rest < 0 and rest > -1e-12 * cash then rest = 0 end
  to_lambda(rest)
end

-- ops, in three groups ---------------------------------------------------
-- Each op returns as soon as the functions it needs are defined: a run
-- creates every function defined above its op (Redis 6 keeps nothing from
-- one run to the next) and each costs an allocation and collector work, so
-- the ops that register URLs come first, then selection and leases, then
-- settlements, the cross-shard ones of a sharded frontier among them (each
-- after the helpers it uses; 'ack' uses none and comes first).

-- write back the host order and the totals; the reply: {result, unreadable record...}
local function done(result)
  flush_hosts()
  save_totals()
  if result == nil then result = false end
  return {result, unpack(CORRUPT)}
end

if OP == 'ping' then
  return {1}
end

if OP == 'ack' then
  -- outbox entries delivered: removed (an entry already removed is ignored);
  -- see 'Cross-shard credits' below
  return done(redis.call('ZREM', P .. ':out', unpack(ARGV, A)))
end

if OP == 'inject' then
  -- url host depth req cash
  local result
  local url = ARGV[A]
  if redis.call('HEXISTS', K_ACCT, url) == 1 then
    result = 0
  else
    local cash = tonumber(ARGV[A + 4])
    T.injected = T.injected + cash
    new_account(url, ARGV[A + 1], tonumber(ARGV[A + 2]), ARGV[A + 3], cash, true)
    result = 1
  end
  return done(result)
end

if OP == 'register' then
  -- url host depth req -> previous state, or -1 when new
  local result
  local lurl, depth = ARGV[A], tonumber(ARGV[A + 2])
  local url, a = resolve(lurl)
  if a == nil then
    if url == lurl then
      load_totals()
      new_account(lurl, ARGV[A + 1], depth, ARGV[A + 3], 0, true)
      result = -1
    else
      result = ALIAS
    end
  elseif a == false then
    result = REFUSED
  else
    if depth < a.depth then a.depth = depth; save(a) end
    result = a.state
  end
  return done(result)
end

if OP == 'repend' then
  -- url host depth req
  local result
  local url, a, ok = resolve(ARGV[A])
  if not ok or not a or (a.state ~= CRAWLED and a.state ~= FAILED) then
    result = 0
  else
    if ARGV[A + 3] ~= '' then redis.call('HSET', K_REQ, url, ARGV[A + 3]) end
    set_state(a, PENDING)
    save(a)
    push(a)
    result = 1
  end
  return done(result)
end

if OP == 'refuse' then
  -- url host depth
  local url = ARGV[A]
  local a = load(url)
  if a == nil then a = new_account(url, ARGV[A + 1], tonumber(ARGV[A + 2]), '', 0, false) end
  if a and (a.state == PENDING or a.state == CRAWLED or a.state == FAILED) then
    if a.state == PENDING then unpush(a) end
    set_state(a, REFUSED)
    to_lambda(a.cash)
    a.cash = 0
    save(a)
  end
  return done(0)
end

-- leases ---------------------------------------------------------------
local function server_now(arg)
  if arg ~= nil and arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

-- An account whose record is unreadable, met at the head of its queue. The
-- queue score still tells its cash (the score is mark - cash, so the cash
-- with its lambda dividend is dividend - score): it goes to lambda, and the
-- account is rewritten as refused, never fetched nor counted pending again.
-- Without this the crawl never ends (one pending URL nobody can lease).
local function write_off(url, host, score)
  local cash = score and (T.dividend - score)
  if cash == nil or cash ~= cash or cash < 0 or cash > T.injected then
    corrupt('queue score of ' .. url)  -- not ours either: nothing to recover
    cash = 0
  end
  to_lambda(cash)
  T.pending = T.pending - 1
  save({url = url, state = REFUSED, flags = 0, cash = 0, mark = T.dividend,
    history = 0, lv = 0, seq = 0, visits = 0, depth = 0, host = host})
end

-- open leases of ``host`` (the cross-worker cap) changed by ``delta``: a
-- count that is no integer (not ours) is named and starts again from here
local function busy_add(host, delta)
  local n = redis.pcall('HINCRBY', K_HBUSY, host, delta)
  if type(n) == 'table' then
    corrupt('open leases of host ' .. host)
    n = math.max(delta, 0)
    redis.call('HSET', K_HBUSY, host, n)
  end
  return n
end

local function open_lease(a, deadline)
  local before_cash, before_mark, before_flight = a.cash, a.mark, T.in_flight
  set_state(a, LEASED)
  local cash = a.cash
  a.cash = 0
  T.next_lease = T.next_lease + 1
  local id = T.next_lease
  redis.call('HSET', K_LEASE, a.url, struct.pack(LEASE_REC, id, cash, deadline,
    before_cash, before_mark, T.dividend, before_flight))
  redis.call('ZADD', K_LDL, fmt(deadline), a.url)
  busy_add(a.host, 1)
  T.in_flight = T.in_flight + cash
  save(a)
  return {a = a, id = id, cash = cash}
end

-- a lease as a flat reply: one binary header (exact doubles, cheap to parse)
-- then url, host and the stored request (or nil)
local LEASE_HEAD = '<BdddBdddddd'
local function lease_reply(l, paid, reclaimed)
  if not l then
    return {struct.pack(LEASE_HEAD, 0, 0, 0, 0, 0, 0, 0, 0, paid, T.pending, reclaimed), false, false, false}
  end
  local a = l.a
  return {struct.pack(LEASE_HEAD, 1, l.id, l.cash, a.history, a.flags % 2, a.lv, a.visits, a.depth,
      paid, T.pending, reclaimed),
    a.url, a.host, redis.call('HGET', K_REQ, a.url)}
end

-- close lease ``id`` of ``url``: account (dividend settled) and its cash, or nil
local function close_lease(url, id)
  local raw = redis.call('HGET', K_LEASE, url)
  if not raw then
    -- (a settlement after the lease was reclaimed finds it gone, and its
    -- account pending or leased again; a leased account with no lease
    -- record at all lost it to a foreign write, its cash with it)
    if id ~= nil then
      local a = load(url)
      if a and a.state == LEASED then corrupt('lease of ' .. url .. ' (missing)') end
    end
    return nil
  end
  local ok, lid, cash, _, before_cash, before_mark, before_dividend, before_flight =
    pcall(struct.unpack, LEASE_REC, raw)
  -- (lid - lid ~= 0: nan or +-inf)
  if not ok or #raw ~= LEASE_SIZE or bad_number(cash) or lid - lid ~= 0 then
    corrupt('lease ' .. url)
    redis.call('HDEL', K_LEASE, url)
    redis.call('ZREM', K_LDL, url)
    return nil
  end
  if id ~= nil and lid ~= id then return nil end
  redis.call('HDEL', K_LEASE, url)
  redis.call('ZREM', K_LDL, url)
  local a = load(url)
  if a and a.state ~= LEASED then
    -- a lease record on an account that is not leased: not ours, and its
    -- cash was never in flight; the account keeps what it has
    corrupt('lease of ' .. url .. ' (account not leased)')
    return nil
  end
  local flight = T.in_flight
  -- recount from scratch when nothing is in flight: no float drift
  if redis.call('HLEN', K_LEASE) == 0 then T.in_flight = 0 else T.in_flight = T.in_flight - cash end
  if not a then
    -- nowhere to return it: keep the books balanced (named: an account is
    -- never deleted by this script)
    if a == nil then corrupt('lease of ' .. url .. ' (no account)') end
    to_lambda(cash)
    return nil
  end
  if busy_add(a.host, -1) <= 0 then redis.call('HDEL', K_HBUSY, a.host) end
  settle(a)
  return a, cash, {before_cash, before_mark, before_dividend, before_flight, flight}
end

local function requeue(url, id)
  local a, cash = close_lease(url, id)
  if not a then return false end
  set_state(a, PENDING)
  a.cash = a.cash + cash
  save(a)
  push(a)
  return true
end


local function reclaim(now, limit)
  if limit <= 0 then return 0 end
  local urls = redis.call('ZRANGEBYSCORE', K_LDL, '-inf', fmt(now), 'LIMIT', 0, limit)
  local n = 0
  for _, url in ipairs(urls) do
    if redis.call('HEXISTS', K_LEASE, url) == 0 then
      redis.call('ZREM', K_LDL, url)
    elseif requeue(url, nil) then
      n = n + 1
    else
      redis.call('ZREM', K_LDL, url)
    end
  end
  return n
end

-- selection ------------------------------------------------------------
local function richest()
  flush_hosts()
  if TOP_HOSTS == nil then TOP_HOSTS = redis.call('ZRANGE', K_HOSTS, 0, TOP_SIZE - 1) end
  local top = TOP_HOSTS
  if #top == 0 then return nil end
  local entry = head(string.sub(top[1], 9))
  if not entry then return nil end
  local url = string.sub(entry[1], 9)
  local a = load(url)
  if not a then return nil end
  return url, effective(a)
end

local function visit_lambda()
  local targets = T.pending
  if ALL then targets = targets + T.leased + T.crawled end
  local amount = T.lambda_cash
  if targets == 0 or amount <= 0 then return 0 end
  T.dividend = T.dividend + amount / targets
  T.lambda_cash = 0
  T.lambda_history = T.lambda_history + amount
  T.history_sum = T.history_sum + amount
  T.lambda_visits = T.lambda_visits + 1
  return amount
end

local function lambda_if_due()
  if T.lambda_cash <= 0 then return 0 end
  local _, cash = richest()
  if cash ~= nil and T.lambda_cash < cash then return 0 end
  return visit_lambda()
end

-- lease the richest pending URL of a host not excluded and under the cap
local function head_cash(host)
  local entry = head(host)
  if not entry then return nil end
  local a = load(string.sub(entry[1], 9))
  if not a then return nil end
  return effective(a)
end

-- min_share > 0: stop (nil) at the first host whose best URL holds less than
-- min_share times the richest pending URL's cash (MemoryStore.pop), both
-- counted beyond ``minted``, the discovery cash every URL discovered brought
-- in: a host minting URLs gets as much of it per URL as any other, and would
-- fund itself with the free slots on it (issue 18)
local function pop(cap, deadline, excluded, min_share, minted)
  flush_hosts()
  local offset, size = 0, TOP_SIZE  -- the first host almost always qualifies
  local repairs = 0
  local floor = nil
  while true do
    local batch
    if offset > 0 then
      batch = redis.call('ZRANGE', K_HOSTS, offset, offset + size - 1)
    else
      if TOP_HOSTS == nil then TOP_HOSTS = redis.call('ZRANGE', K_HOSTS, 0, TOP_SIZE - 1) end
      batch = TOP_HOSTS
    end
    if #batch == 0 then return nil end
    local rescan = false
    for _, m in ipairs(batch) do
      local host = string.sub(m, 9)
      if min_share > 0 then
        local cash = head_cash(host)
        if cash ~= nil then
          cash = math.max(cash - minted, 0)
          if floor == nil then
            floor = cash * min_share  -- hosts come richest first
          elseif cash < floor then
            return nil
          end
        end
      end
      if not excluded[host] and (cap <= 0 or (tonumber(redis.call('HGET', K_HBUSY, host)) or 0) < cap) then
        local q = QP .. host
        local top = redis.call('ZPOPMIN', q)
        HEADS[host] = nil
        if #top > 0 then
          local url = string.sub(top[1], 9)
          local a = load(url)
          if a and a.state == PENDING and a.host == host then
            -- advertise the host's next entry in place of ``m``
            local nxt = head(host)
            redis.call('ZREM', K_HOSTS, m); TOP_HOSTS = nil
            if not nxt then
              redis.call('HDEL', K_HADV, host)
              ADV[host] = false
            else
              advertise(host, string.sub(nxt[1], 1, 8), nxt[2])
            end
            return open_lease(a, deadline)
          end
          if a == false then
            write_off(url, host, tonumber(top[2]))
          elseif a then
            corrupt('queue entry ' .. url)
          else
            -- (accounts are never deleted: an entry of none is not ours; its
            -- score is no cash of the books, whoever wrote it)
            corrupt('queue entry ' .. url .. ' (no account)')
          end
        end
        -- an entry or advertisement that does not match the books: repair, rescan
        ADV[host] = nil  -- reread: the advertisement may be what is wrong
        refresh_host(host)
        local adv = adv_of(host)
        if not adv or adv.seq8 .. host ~= m then redis.call('ZREM', K_HOSTS, m); TOP_HOSTS = nil end
        repairs = repairs + 1
        rescan = true
        break
      end
    end
    if rescan then
      offset, size, floor = 0, 4, nil
      if repairs > 1000 then return nil end
    else
      offset = offset + size
      size = math.min(size * 4, 256)
    end
  end
end

-- selection and lease ops
if OP == 'pop' then
  -- cap timeout reclaim-limit now visit-lambda min-share discovery-cash token excluded-host...
  -- -> {lease or false, lambda payout, pending count, leases reclaimed}
  -- token 'worker:seq' (or ''): a pop resent after its reply was lost (a
  -- connection failure) gets the lease the first one opened, not another
  local minted = tonumber(ARGV[A + 6])  -- checked before any write
  if not minted or minted ~= minted or minted < 0 or minted == math.huge then
    return redis.error_reply('discovery cash is not an amount: ' .. tostring(ARGV[A + 6]))
  end
  local token = ARGV[A + 7]
  local tkey, tseq
  if token ~= '' then
    local worker
    worker, tseq = string.match(token, '^(.*):([^:]*)$')
    if worker then
      tkey = P .. ':pop:' .. worker
      local prev = redis.call('GET', tkey)
      if prev then
        local seq, id, url = string.match(prev, '^([^\n]*)\n([^\n]*)\n(.*)$')
        if seq == tseq then
          local raw = redis.call('HGET', K_LEASE, url)
          local a = load(url)
          if raw and #raw == LEASE_SIZE and a and a.state == LEASED then
            local lid, cash = struct.unpack('<dd', raw)
            if fmt(lid) == id then
              return lease_reply({a = a, id = lid, cash = cash}, 0, 0)
            end
          end
        end
      end
    end
  end
  local now = server_now(ARGV[A + 3])
  local reclaimed = reclaim(now, tonumber(ARGV[A + 2]))
  local paid = 0
  if ARGV[A + 4] == '1' then paid = lambda_if_due() end
  local excluded = {}
  for i = A + 8, #ARGV do excluded[ARGV[i]] = true end
  local timeout = tonumber(ARGV[A + 1])
  local lease = pop(tonumber(ARGV[A]), now + timeout, excluded, tonumber(ARGV[A + 5]), minted)
  if lease and tkey then
    redis.call('SET', tkey, tseq .. '\n' .. fmt(lease.id) .. '\n' .. lease.a.url,
      'PX', math.floor(timeout * 1000) + 1000)
  end
  flush_hosts()
  save_totals()
  local reply = lease_reply(lease, paid, reclaimed)
  for _, what in ipairs(CORRUPT) do reply[#reply + 1] = what end
  return reply
end

if OP == 'take' then
  -- url timeout now
  local a = load(ARGV[A])
  local lease = nil
  if a and a.state == PENDING then
    unpush(a)
    lease = open_lease(a, server_now(ARGV[A + 2]) + tonumber(ARGV[A + 1]))
  end
  flush_hosts()
  save_totals()
  local reply = lease_reply(lease, 0, 0)
  for _, what in ipairs(CORRUPT) do reply[#reply + 1] = what end
  return reply
end

if OP == 'peek' then
  local url, cash = richest()
  local reply = {url or false, cash and fmt(cash) or false}
  for _, what in ipairs(CORRUPT) do reply[#reply + 1] = what end
  return reply
end

if OP == 'reclaim' then
  -- now limit
  local result = reclaim(server_now(ARGV[A]), tonumber(ARGV[A + 1]))
  return done(result)
end

if OP == 'visit_lambda' then
  local result = fmt(visit_lambda())
  return done(result)
end

if OP == 'settle_requeue' then
  local result
  if requeue(ARGV[A], tonumber(ARGV[A + 1])) then result = 1 else result = 0 end
  return done(result)
end

if OP == 'settle_failure' then
  -- url id refuse
  local result
  local a, cash = close_lease(ARGV[A], tonumber(ARGV[A + 1]))
  if not a then
    result = 0
  else
    if ARGV[A + 2] == '1' then set_state(a, REFUSED) else set_state(a, FAILED) end
    to_lambda(cash + a.cash)
    a.cash = 0
    save(a)
    result = 1
  end
  return done(result)
end

-- settlements ----------------------------------------------------------
-- bonus: discovery cash a new account opened here brings in (a visit's
-- credits only, AOPIC_DISCOVERY_CASH); counted as injected so the books balance
local function credit(lurl, host, depth, req, amount, bonus)
  local url, a, ok = resolve(lurl)
  if not ok or a == false then to_lambda(amount); return end
  if a == nil then
    if url ~= lurl then
      -- an alias whose target has no account here: on a sharded frontier,
      -- a redirect to another shard's URL (aliases are followed within a
      -- shard only): the credit goes to lambda, counted (tot 'xalias_n',
      -- 'xalias_cash'; see 'Credits to an alias' in docs/distributed.rst)
      redis.call('HINCRBY', K_TOT, 'xalias_n', 1)
      redis.call('HINCRBYFLOAT', K_TOT, 'xalias_cash', fmt(amount))
      to_lambda(amount); return
    end
    if bonus and bonus > 0 then
      T.injected = T.injected + bonus
      amount = amount + bonus
    end
    new_account(lurl, host, depth, req, amount, true)
    return
  end
  local state = a.state
  if state == REFUSED or state == FAILED then to_lambda(amount); return end
  local changed = false
  if amount ~= 0 then a.cash = a.cash + amount; changed = true end
  if depth < a.depth then a.depth = depth; changed = true end
  if changed then save(a) end
  if state == PENDING and amount ~= 0 then push(a) end
end

-- close the lease of a visited page: the account is CRAWLED with its new
-- history; the lease's cash, or nil for a stale lease
local function visited(url, id, history, lv)
  local a, cash = close_lease(url, id)
  if not a then return nil end
  set_state(a, CRAWLED)
  T.history_sum = T.history_sum + (history - a.history)
  a.history = history
  a.lv = lv
  if a.flags % 2 == 0 then a.flags = a.flags + 1 end
  a.visits = a.visits + 1
  T.visits = T.visits + 1
  save(a)  -- before the credits: one may reach this account through an alias
  return cash
end

-- the credits (url host depth req amount) in ARGV[first..last]; their sum
-- (the discovery cash ``bonus`` they bring in is not in it: it is injected)
local function credit_all(first, last, bonus)
  local paid = 0
  for i = first, last, 5 do
    local amount = tonumber(ARGV[i + 4])
    paid = paid + amount
    credit(ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], amount, bonus)
  end
  return paid
end

if OP == 'settle_visit' then
  -- url id history visited_at discovery-cash, then (url host depth req
  -- amount) per credit
  local result
  local bonus = tonumber(ARGV[A + 4])
  if not bonus or bonus ~= bonus or bonus < 0 or bonus == math.huge then  -- before any write
    return redis.error_reply('discovery cash is not an amount: ' .. tostring(ARGV[A + 4]))
  end
  local cash = visited(ARGV[A], tonumber(ARGV[A + 1]), tonumber(ARGV[A + 2]), tonumber(ARGV[A + 3]))
  if not cash then
    result = 0
  else
    to_lambda_rest(cash - credit_all(A + 5, #ARGV, bonus), cash)
    result = 1
  end
  return done(result)
end

-- A number of a sharded frontier's books (tot 'xseq', 'xsent', 'xrecv', a
-- shard's last sequence applied in P:xin), as load_totals checks the
-- totals: 0 when missing, anything not written here stops the op (read
-- before its first write) with an AOPICCORRUPT reply naming it.
local function stored_number(raw, what, count)
  if not raw then return 0 end
  local v = tonumber(raw)
  if bad_number(v, count, false) then
    error('AOPICCORRUPT ' .. what .. ' = ' .. string.format('%q', string.sub(raw, 1, 40)))
  end
  return v
end

-- whether the credits of an outbox entry are all amounts (each 5th part)
local function entry_ok(parts)
  for j = 5, #parts, 5 do
    local amount = tonumber(parts[j])
    if bad_number(amount) then return false end
  end
  return true
end

if OP == 'receive' then
  -- source-shard, then (seq payload) per outbox entry of that source, in
  -- sequence order -> how many were applied (a repeated one is skipped)
  -- (see 'Cross-shard credits' below)
  local source = ARGV[A]
  local last = stored_number(redis.call('HGET', P .. ':xin', source), 'xin ' .. source, true)
  -- ('xrecv' is not among the totals every op reads: read here)
  local applied, received = 0, stored_number(redis.call('HGET', K_TOT, 'xrecv'), 'total xrecv')
  for i = A + 1, #ARGV, 2 do
    local seq = tonumber(ARGV[i])
    if seq > last then
      local ok, parts = pcall(cmsgpack.unpack, ARGV[i + 1])
      -- (an entry with an amount that is none is skipped whole, named)
      if ok and type(parts) == 'table' and entry_ok(parts) then
        for j = 1, #parts - 4, 5 do
          local amount = tonumber(parts[j + 4]) or 0
          received = received + amount
          if parts[j] == '' then
            to_lambda(amount)
          else
            credit(parts[j], parts[j + 1], tonumber(parts[j + 2]) or 0, parts[j + 3], amount)
          end
        end
      else
        corrupt('outbox entry ' .. source .. ':' .. ARGV[i])
      end
      last = seq
      applied = applied + 1
    end
  end
  if applied > 0 then
    redis.call('HSET', P .. ':xin', source, last)
    redis.call('HSET', K_TOT, 'xrecv', fmt(received))
  end
  return done(applied)
end

-- Cross-shard credits (a frontier sharded over a Redis Cluster, one such
-- frontier per shard; see store/redis/cluster.py). The credits ``parts``
-- (url host depth req amount, ...) for accounts of shard ``dest`` leave
-- this shard's books (tot field 'xsent') into its outbox P:out: a sorted
-- set by sequence number (tot 'xseq'), member seq (8 bytes) .. dest (4
-- bytes) .. the credits (msgpack: strings, amounts in decimal as they
-- came). A worker delivers them with 'receive' on shard ``dest``, which
-- adds them to its 'xrecv' and remembers the last sequence applied per
-- source (P:xin), then removes them here ('ack'): a delivery repeated
-- after a crash is a no-op. Each shard balances on its own: accounts +
-- lambda + in flight == injected + xrecv - xsent. An entry whose url is ''
-- credits the destination's lambda (see 'lambda_send'). Returns the
-- amount sent. ('xseq' and 'xsent' are not among the totals every op
-- reads: read and checked once per run, first thing, by the ops that send.)
local function load_x()
  if T.xseq == nil then
    local x = redis.call('HMGET', K_TOT, 'xseq', 'xsent')
    T.xseq = stored_number(x[1], 'total xseq', true)
    T.xsent = stored_number(x[2], 'total xsent')
  end
end

local function send_parts(dest, parts)
  local amount = 0
  for i = 5, #parts, 5 do amount = amount + tonumber(parts[i]) end
  load_x()
  T.xseq = T.xseq + 1
  T.xsent = T.xsent + amount
  redis.call('HSET', K_TOT, 'xseq', T.xseq, 'xsent', fmt(T.xsent))
  redis.call('ZADD', P .. ':out', T.xseq,
    struct.pack('>I8I4', T.xseq, tonumber(dest)) .. cmsgpack.pack(parts))
  return amount
end

-- the credits in ARGV[first..last]
local function send(dest, first, last)
  local parts = {}
  for i = first, last do parts[#parts + 1] = ARGV[i] end
  return send_parts(dest, parts)
end

-- The first ``n`` entries of the outbox, oldest first: a deliverer always
-- delivers a prefix of the outbox, in order (never only the entries it sent
-- itself), which is what makes the per-source last sequence on the
-- receiving side a sound guard: an entry skipped there was applied, in the
-- same script, before a later one of the same prefix.
local function outbox_head(n)
  return redis.call('ZRANGE', P .. ':out', 0, n - 1)
end

if OP == 'settle_visit_x' then
  -- url id history visited_at ndest, then per destination shard: shard n
  -- and n credits (url host depth req amount), then the local credits
  load_x()  -- checked before any write
  local result
  local cash = visited(ARGV[A], tonumber(ARGV[A + 1]), tonumber(ARGV[A + 2]), tonumber(ARGV[A + 3]))
  if not cash then
    result = 0
  else
    local i, sent = A + 5, 0
    for _ = 1, tonumber(ARGV[A + 4]) do
      local n = tonumber(ARGV[i + 1])
      sent = sent + send(ARGV[i], i + 2, i + 1 + 5 * n)
      i = i + 2 + 5 * n
    end
    to_lambda_rest(cash - credit_all(i, #ARGV) - sent, cash)
    result = {1, unpack(outbox_head(64))}
  end
  return done(result)
end

-- the leased ``url`` becomes an ALIAS of ``turl``: the cash to pass on and
-- the alias's depth, or nil for a stale lease
local function make_alias(url, id, turl)
  local a, cash = close_lease(url, id)
  if not a then return nil end
  set_state(a, ALIAS)
  local amount = cash + a.cash
  a.cash = 0
  redis.call('HSET', K_ALIAS, url, turl)
  redis.call('HDEL', K_REQ, url)
  save(a)
  return amount, a.depth
end

if OP == 'settle_transfer' then
  -- url id target-url target-host target-depth target-req
  local result
  local url, turl = ARGV[A], ARGV[A + 2]
  if turl == url then
    -- a retry: requeue, keeping the new request (its retry count) if any
    if requeue(url, tonumber(ARGV[A + 1])) then
      if ARGV[A + 5] ~= '' then redis.call('HSET', K_REQ, url, ARGV[A + 5]) end
      result = 1
    else
      result = 0
    end
  else
    local amount, depth = make_alias(url, tonumber(ARGV[A + 1]), turl)
    if not amount then
      result = 0
    else
      credit(turl, ARGV[A + 3], math.min(tonumber(ARGV[A + 4]), depth), ARGV[A + 5], amount)
      result = 1
    end
  end
  return done(result)
end

if OP == 'settle_transfer_x' then
  -- url id shard target-url target-host target-depth target-req '': the
  -- target lives on another shard (never the url itself); the amount is
  -- written in place of the last argument
  load_x()  -- checked before any write
  local result
  local amount, depth = make_alias(ARGV[A], tonumber(ARGV[A + 1]), ARGV[A + 3])
  if not amount then
    result = 0
  else
    ARGV[A + 5] = tostring(math.min(tonumber(ARGV[A + 5]), depth))
    ARGV[A + 7] = fmt(amount)
    send(ARGV[A + 2], A + 3, A + 7)
    result = {1, unpack(outbox_head(64))}
  end
  return done(result)
end

if OP == 'lambda_send' then
  -- (shard amount)...: move up to these amounts of lambda's cash to other
  -- shards' lambda, through the outbox (never more than lambda holds)
  -- -> {amount sent, entries written, outbox entries...}
  load_x()  -- checked before any write
  local sent, entries = 0, 0
  for i = A, #ARGV - 1, 2 do
    local amount = math.min(tonumber(ARGV[i + 1]), T.lambda_cash)
    if amount > 0 then
      T.lambda_cash = T.lambda_cash - amount
      sent = sent + send_parts(ARGV[i], {'', '', '0', '', fmt(amount)})
      entries = entries + 1
    end
  end
  return done({fmt(sent), entries, unpack(outbox_head(64))})
end

if OP == 'outbox' then
  -- n -> the first n entries of the outbox
  return done(outbox_head(tonumber(ARGV[A])))
end

if OP == 'in_transit' then
  -- (dest last)...: ``last`` the last sequence from this shard that shard
  -- ``dest`` applied (its xin) -> {the cash of the outbox entries their
  -- destination has not applied, this shard's last sequence (xseq)}. What
  -- the crawl's books count as cash between shards: were a shard's last
  -- writes lost (a failover to a replica that lacked them), sum(sent) -
  -- sum(received) would disagree with it (see store/redis/cluster.py).
  local last = {}
  for i = A, #ARGV - 1, 2 do last[tonumber(ARGV[i])] = tonumber(ARGV[i + 1]) end
  local amount = 0
  for _, member in ipairs(redis.call('ZRANGE', P .. ':out', 0, -1)) do
    local seq, dest = 0, nil
    if #member >= 12 then seq, dest = struct.unpack('>I8I4', member) else corrupt('outbox entry (too short)') end
    if dest and seq > (last[dest] or 0) then
      local ok, parts = pcall(cmsgpack.unpack, string.sub(member, 13))
      if ok and type(parts) == 'table' and entry_ok(parts) then
        for j = 5, #parts, 5 do amount = amount + tonumber(parts[j]) end
      else
        corrupt('outbox entry ' .. seq)
      end
    end
  end
  return done({fmt(amount), fmt(stored_number(redis.call('HGET', K_TOT, 'xseq'), 'total xseq', true))})
end

-- undo a lease nobody used (the host was not ready after all): the account
-- gets back its exact cash and mark, so its key and place do not move by an
-- ulp; if cash or a payout arrived meanwhile, a plain requeue
local function unlease(url, id)
  local a, cash, before = close_lease(url, id)
  if not a then return false end
  -- (the amounts kept in the lease record checked as the account's are)
  local exact = a.cash == 0 and before[3] == T.dividend and before[1] - before[1] == 0
    and before[1] >= 0 and before[2] >= 0 and before[2] <= T.dividend
  set_state(a, PENDING)
  if exact then
    a.cash = before[1]
    a.mark = before[2]
    -- no lease opened or closed meanwhile: the total is what it was
    if before[5] == before[4] + cash then T.in_flight = before[4] end
  else
    a.cash = a.cash + cash
  end
  save(a)
  push(a)
  return true
end

if OP == 'unlease' then
  local result
  if unlease(ARGV[A], tonumber(ARGV[A + 1])) then result = 1 else result = 0 end
  return done(result)
end

if OP == 'recount' then
  -- one consistent recount of the books (O(n), blocks Redis meanwhile):
  -- {account cash, lambda, in flight (leases), injected, accounts}
  -- Neumaier-compensated sums: n terms lose no more than one rounding
  local function adder()
    local sum, c = 0, 0
    return function(x)
      if x == nil then return sum + c end
      local t = sum + x
      if math.abs(sum) >= math.abs(x) then c = c + ((sum - t) + x) else c = c + ((x - t) + sum) end
      sum = t
    end
  end
  local cash, flight, n = adder(), adder(), 0
  local counted = {[PENDING] = 0, [LEASED] = 0, [CRAWLED] = 0}  -- accounts by state
  local cursor = '0'
  repeat
    local page = redis.call('HSCAN', K_ACCT, cursor, 'COUNT', 1000)
    cursor = page[1]
    local items = page[2]
    for i = 1, #items, 2 do
      local raw = items[i + 1]
      local st, _, c, mark
      if #raw >= REC_SIZE then st, _, c, mark = struct.unpack('<BBdd', raw) end
      -- a record the ops would refuse (see load) is named, not summed
      if not st or st > ALIAS or bad_number(c) or bad_number(mark) or mark > T.dividend then
        corrupt(items[i])
      else
        if (ALL and (st == PENDING or st == LEASED or st == CRAWLED)) or st == PENDING then
          c = c + (T.dividend - mark)
        end
        if counted[st] then counted[st] = counted[st] + 1 end
        cash(c)
        n = n + 1
      end
    end
  until cursor == '0'
  cursor = '0'
  repeat
    local page = redis.call('HSCAN', K_LEASE, cursor, 'COUNT', 1000)
    cursor = page[1]
    local items = page[2]
    for i = 1, #items, 2 do
      local _, c
      if #items[i + 1] == LEASE_SIZE then _, c = struct.unpack(LEASE_REC, items[i + 1]) end
      if bad_number(c) then corrupt('lease ' .. items[i]) else flight(c) end
    end
  until cursor == '0'
  -- the counts the ops keep against the records: a state or a count
  -- changed by someone else (lambda divides among T.pending) is named
  for st, name in pairs({[PENDING] = 'pending', [LEASED] = 'leased', [CRAWLED] = 'crawled'}) do
    if counted[st] ~= T[name] then
      corrupt('total ' .. name .. ' = ' .. fmt(T[name]) .. ', the records count ' .. counted[st])
    end
  end
  return {fmt(cash()), fmt(T.lambda_cash), fmt(flight()), fmt(T.injected), n, unpack(CORRUPT)}
end

return redis.error_reply('aopic: unknown op ' .. tostring(OP))
