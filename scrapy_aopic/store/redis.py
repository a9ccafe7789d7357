"""The Redis store: one AOPIC frontier shared by any number of workers.

Every method that changes the books is **one Lua script call** (``EVALSHA``,
one round trip), which Redis runs atomically: workers on any number of machines can enqueue,
lease and settle at the same time without creating or losing cash and without
leasing a URL twice. The script mirrors :class:`~scrapy_aopic.store.memory.MemoryStore`
operation by operation (the same float arithmetic in the same order), so both
stores give the same crawl order.

Key layout (``P`` is the key prefix, e.g. ``myspider:aopic``):

``P:tot`` (hash)
    running totals (:class:`~scrapy_aopic.store.base.Totals`), the lambda
    ``dividend`` and the sequence / lease counters.
``P:acct`` (hash ``url -> record``)
    one packed record per account: state, cash, dividend mark, history, last
    visit, discovery sequence, visits, depth (50 bytes, little-endian
    ``<BBdddddii``) followed by the host. Doubles are stored as their 8 bytes,
    so nothing is lost to decimal formatting.
``P:req`` (hash ``url -> JSON``)
    the request to fetch, only for accounts whose request is not a plain GET
    of their URL. JSON text, never pickle; decoded in Python only.
``P:alias`` (hash ``url -> url``)
    target of each ALIAS account (redirects, near-duplicates).
``P:q:<host>`` (sorted set)
    pending URLs of one host. Score ``mark - cash`` (the negated
    :class:`MemoryStore` key, so the richest comes first), member
    ``seq (8 bytes, big-endian) + url``: equal scores sort by member, which
    is the discovery order (FIFO ties), not the URL's spelling.
``P:hosts`` (sorted set) and ``P:hadv`` (hash ``host -> seq + score``)
    every host with pending URLs, scored by its best entry, member
    ``seq of that entry + host``: the cross-host order, FIFO ties included;
    ``P:hadv`` remembers what is advertised, so a credit that does not beat
    a host's best entry costs no write there.
``P:lease`` (hash ``url -> lease record``), ``P:ldl`` (sorted set ``url``
by deadline) and ``P:hbusy`` (hash ``host -> open leases``)
    open leases (id, cash, deadline, and what is needed to undo the lease
    exactly), their expiry and the per-host count that enforces the
    concurrency cap across all workers.
``P:pop:<worker>`` (string ``seq \n lease id \n url``, expires with the lease)
    the last lease a worker process (a :class:`RedisStore`) was given and the
    sequence number of that request: a pop resent after a connection failure
    gets the same lease back instead of leaving it to expire.

Lambda payouts are O(1): they raise ``dividend`` in ``P:tot``; a target
account is settled when it is next touched (see :mod:`~scrapy_aopic.store.memory`).

Leases expire after ``lease_timeout`` seconds of Redis server time; every
:meth:`RedisStore.pop` first requeues a few expired leases, so the cash of a
SIGKILLed worker returns to the frontier. Connection failures are retried
with backoff for ``retry_timeout`` seconds (a Redis restart is survived);
scripts are reloaded after a restart (``NOSCRIPT``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import struct
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

import redis

from .base import (
    ALIAS,
    CRAWLED,
    LEASED,
    PENDING,
    REFERER_KEY,
    AccountView,
    Credit,
    FrontierStore,
    Lease,
    Link,
    FrontierLost,
    StoreUnavailable,
    Totals,
    UnreadableData,
)

logger = logging.getLogger(__name__)

#: Account record: state, flags (bit 0: has last visit), cash, mark, history,
#: last visit, seq, visits, depth; the host follows.
_RECORD = struct.Struct("<BBdddddii")
#: Header of a pop / take reply: has lease, lease id, cash, history, has last
#: visit, last visit, visits, depth, lambda payout, pending, leases reclaimed.
_LEASE_HEAD = struct.Struct("<BdddBdddddd")
#: Lease record: lease id, cash, deadline, and the account's cash, mark, the
#: dividend and the total in flight before the lease (to undo it exactly).
_LEASE = struct.Struct("<ddddddd")

_TOTAL_FIELDS = (
    "injected",
    "lambda_cash",
    "lambda_history",
    "in_flight",
    "history_sum",
    "lambda_visits",
    "visits",
    "known",
    "pending",
    "leased",
    "crawled",
    "dividend",
    "next_seq",
    "next_lease",
)

# One script, dispatched on ARGV[2]; every op runs atomically.
# KEYS: the totals hash; the other keys are derived from the prefix (on a
# Redis Cluster the prefix must carry a hash tag: all keys on one slot).
# ARGV: 1 key prefix, 2 op, 3 all-targets flag, 4.. op arguments.
# Floats travel as decimal strings: Python's repr in, '%.17g' out (Lua's
# tostring and redis.call's number conversion keep only 14 digits).
LUA = r"""
local P = ARGV[1]
local K_TOT = KEYS[1]
local K_ACCT, K_REQ, K_ALIAS, K_HOSTS, K_HADV, K_LEASE, K_LDL, K_HBUSY =
  P .. ':acct', P .. ':req', P .. ':alias', P .. ':hosts', P .. ':hadv',
  P .. ':lease', P .. ':ldl', P .. ':hbusy'
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
local FIELDS = {'injected', 'lambda_cash', 'lambda_history', 'in_flight',
  'history_sum', 'lambda_visits', 'visits', 'known', 'pending', 'leased',
  'crawled', 'dividend', 'next_seq', 'next_lease'}
local T, T0 = {}, {}
do
  local raw = redis.call('HGETALL', K_TOT)
  for i = 1, #raw, 2 do T[raw[i]] = tonumber(raw[i + 1]) end
  for _, f in ipairs(FIELDS) do
    if T[f] == nil then T[f] = 0 end
    T0[f] = T[f]
  end
end
-- write back the totals that changed
local function save_totals()
  local args = {}
  for _, f in ipairs(FIELDS) do
    if T[f] ~= T0[f] then
      args[#args + 1] = f
      args[#args + 1] = fmt(T[f])
    end
  end
  if #args > 0 then redis.call('HSET', K_TOT, unpack(args)) end
end

local function server_now(arg)
  if arg ~= nil and arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

-- accounts -------------------------------------------------------------
-- load: a table, nil (unknown) or false (record unreadable: hostile data)
local function load(url)
  local raw = redis.call('HGET', K_ACCT, url)
  if not raw then return nil end
  if #raw < REC_SIZE then corrupt(url); return false end
  local ok, st, fl, cash, mark, hist, lv, seq, visits, depth, pos = pcall(struct.unpack, REC, raw)
  if not ok or st > ALIAS or cash ~= cash or mark ~= mark or hist ~= hist then
    corrupt(url); return false
  end
  return {url = url, state = st, flags = fl, cash = cash, mark = mark,
    history = hist, lv = lv, seq = seq, visits = visits, depth = depth,
    host = string.sub(raw, pos)}
end

local function save(a)
  redis.call('HSET', K_ACCT, a.url, struct.pack(REC, a.state, a.flags, a.cash,
    a.mark, a.history, a.lv, a.seq, a.visits, a.depth) .. a.host)
end

local function member(a) return struct.pack('>I8', a.seq) .. a.url end

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
  redis.call('HSET', K_HADV, host, seq8 .. score_text)
  ADV[host] = {seq8 = seq8, score = tonumber(score_text)}
end

local function refresh_host(host)
  local top = redis.call('ZRANGE', QP .. host, 0, 0, 'WITHSCORES')
  local old = adv_of(host)
  if #top == 0 then
    if old then
      redis.call('ZREM', K_HOSTS, old.seq8 .. host)
      redis.call('HDEL', K_HADV, host)
      ADV[host] = false
    end
    return
  end
  local seq8 = string.sub(top[1], 1, 8)
  if old and old.seq8 == seq8 and old.score == tonumber(top[2]) then return end
  if old and old.seq8 ~= seq8 then redis.call('ZREM', K_HOSTS, old.seq8 .. host) end
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

local function credit(lurl, host, depth, req, amount)
  local url, a, ok = resolve(lurl)
  if not ok or a == false then to_lambda(amount); return end
  if a == nil then
    if url ~= lurl then to_lambda(amount); return end
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

-- leases ---------------------------------------------------------------
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
  redis.call('HINCRBY', K_HBUSY, a.host, 1)
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
  if not raw then return nil end
  local ok, lid, cash, _, before_cash, before_mark, before_dividend, before_flight =
    pcall(struct.unpack, LEASE_REC, raw)
  if not ok or #raw ~= LEASE_SIZE then
    corrupt('lease ' .. url)
    redis.call('HDEL', K_LEASE, url)
    redis.call('ZREM', K_LDL, url)
    return nil
  end
  if id ~= nil and lid ~= id then return nil end
  redis.call('HDEL', K_LEASE, url)
  redis.call('ZREM', K_LDL, url)
  local flight = T.in_flight
  -- recount from scratch when nothing is in flight: no float drift
  if redis.call('HLEN', K_LEASE) == 0 then T.in_flight = 0 else T.in_flight = T.in_flight - cash end
  local a = load(url)
  if not a then
    to_lambda(cash)  -- nowhere to return it: keep the books balanced
    return nil
  end
  if redis.call('HINCRBY', K_HBUSY, a.host, -1) <= 0 then redis.call('HDEL', K_HBUSY, a.host) end
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

-- undo a lease nobody used (the host was not ready after all): the account
-- gets back its exact cash and mark, so its key and place do not move by an
-- ulp; if cash or a payout arrived meanwhile, a plain requeue
local function unlease(url, id)
  local a, cash, before = close_lease(url, id)
  if not a then return false end
  local exact = a.cash == 0 and before[3] == T.dividend
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
  local top = redis.call('ZRANGE', K_HOSTS, 0, 0)
  if #top == 0 then return nil end
  local host = string.sub(top[1], 9)
  local entry = redis.call('ZRANGE', QP .. host, 0, 0)
  if #entry == 0 then return nil end
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
  local entry = redis.call('ZRANGE', QP .. host, 0, 0)
  if #entry == 0 then return nil end
  local a = load(string.sub(entry[1], 9))
  if not a then return nil end
  return effective(a)
end

-- min_share > 0: stop (nil) at the first host whose best URL holds less than
-- min_share times the richest pending URL's cash (MemoryStore.pop)
local function pop(cap, deadline, excluded, min_share)
  flush_hosts()
  local offset, size = 0, 4  -- the first host almost always qualifies
  local repairs = 0
  local floor = nil
  while true do
    local batch = redis.call('ZRANGE', K_HOSTS, offset, offset + size - 1)
    if #batch == 0 then return nil end
    local rescan = false
    for _, m in ipairs(batch) do
      local host = string.sub(m, 9)
      if min_share > 0 then
        local cash = head_cash(host)
        if cash ~= nil then
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
        if #top > 0 then
          local url = string.sub(top[1], 9)
          local a = load(url)
          if a and a.state == PENDING and a.host == host then
            -- advertise the host's next entry in place of ``m``
            local nxt = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
            redis.call('ZREM', K_HOSTS, m)
            if #nxt == 0 then
              redis.call('HDEL', K_HADV, host)
              ADV[host] = false
            else
              advertise(host, string.sub(nxt[1], 1, 8), nxt[2])
            end
            return open_lease(a, deadline)
          end
          if a then corrupt('queue entry ' .. url) end
        end
        -- an entry or advertisement that does not match the books: repair, rescan
        ADV[host] = nil  -- reread: the advertisement may be what is wrong
        refresh_host(host)
        local adv = adv_of(host)
        if not adv or adv.seq8 .. host ~= m then redis.call('ZREM', K_HOSTS, m) end
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

-- ops ------------------------------------------------------------------
local result

if OP == 'inject' then
  -- url host depth req cash
  local url = ARGV[A]
  if redis.call('HEXISTS', K_ACCT, url) == 1 then
    result = 0
  else
    local cash = tonumber(ARGV[A + 4])
    T.injected = T.injected + cash
    new_account(url, ARGV[A + 1], tonumber(ARGV[A + 2]), ARGV[A + 3], cash, true)
    result = 1
  end

elseif OP == 'register' then
  -- url host depth req -> previous state, or -1 when new
  local lurl, depth = ARGV[A], tonumber(ARGV[A + 2])
  local url, a = resolve(lurl)
  if a == nil then
    if url == lurl then
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

elseif OP == 'repend' then
  -- url host depth req
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

elseif OP == 'pop' then
  -- cap timeout reclaim-limit now visit-lambda min-share token excluded-host...
  -- -> {lease or false, lambda payout, pending count, leases reclaimed}
  -- token 'worker:seq' (or ''): a pop resent after its reply was lost (a
  -- connection failure) gets the lease the first one opened, not another
  local token = ARGV[A + 6]
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
  for i = A + 7, #ARGV do excluded[ARGV[i]] = true end
  local timeout = tonumber(ARGV[A + 1])
  local lease = pop(tonumber(ARGV[A]), now + timeout, excluded, tonumber(ARGV[A + 5]))
  if lease and tkey then
    redis.call('SET', tkey, tseq .. '\n' .. fmt(lease.id) .. '\n' .. lease.a.url,
      'PX', math.floor(timeout * 1000) + 1000)
  end
  flush_hosts()
  save_totals()
  local reply = lease_reply(lease, paid, reclaimed)
  for _, what in ipairs(CORRUPT) do reply[#reply + 1] = what end
  return reply

elseif OP == 'take' then
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

elseif OP == 'visit_lambda' then
  result = fmt(visit_lambda())

elseif OP == 'settle_visit' then
  -- url id history visited_at, then (url host depth req amount) per credit
  local a, cash = close_lease(ARGV[A], tonumber(ARGV[A + 1]))
  if not a then
    result = 0
  else
    set_state(a, CRAWLED)
    local history = tonumber(ARGV[A + 2])
    T.history_sum = T.history_sum + (history - a.history)
    a.history = history
    a.lv = tonumber(ARGV[A + 3])
    if a.flags % 2 == 0 then a.flags = a.flags + 1 end
    a.visits = a.visits + 1
    T.visits = T.visits + 1
    save(a)  -- before the credits: one may reach this account through an alias
    local paid = 0
    for i = A + 4, #ARGV, 5 do
      local amount = tonumber(ARGV[i + 4])
      paid = paid + amount
      credit(ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], amount)
    end
    to_lambda(cash - paid)
    result = 1
  end

elseif OP == 'settle_failure' then
  -- url id refuse
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

elseif OP == 'settle_transfer' then
  -- url id target-url target-host target-depth target-req
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
    local a, cash = close_lease(url, tonumber(ARGV[A + 1]))
    if not a then
      result = 0
    else
      set_state(a, ALIAS)
      local amount = cash + a.cash
      a.cash = 0
      redis.call('HSET', K_ALIAS, url, turl)
      redis.call('HDEL', K_REQ, url)
      save(a)
      credit(turl, ARGV[A + 3], math.min(tonumber(ARGV[A + 4]), a.depth), ARGV[A + 5], amount)
      result = 1
    end
  end

elseif OP == 'settle_requeue' then
  if requeue(ARGV[A], tonumber(ARGV[A + 1])) then result = 1 else result = 0 end

elseif OP == 'refuse' then
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
  result = 0

elseif OP == 'unlease' then
  if unlease(ARGV[A], tonumber(ARGV[A + 1])) then result = 1 else result = 0 end

elseif OP == 'reclaim' then
  -- now limit
  result = reclaim(server_now(ARGV[A]), tonumber(ARGV[A + 1]))

elseif OP == 'ping' then
  return {1}

elseif OP == 'recount' then
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
  local cursor = '0'
  repeat
    local page = redis.call('HSCAN', K_ACCT, cursor, 'COUNT', 1000)
    cursor = page[1]
    local items = page[2]
    for i = 1, #items, 2 do
      local raw = items[i + 1]
      if #raw >= REC_SIZE then
        local st, _, c, mark = struct.unpack('<BBdd', raw)
        if (ALL and (st == PENDING or st == LEASED or st == CRAWLED)) or st == PENDING then
          c = c + (T.dividend - mark)
        end
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
      if #items[i + 1] == LEASE_SIZE then
        local _, c = struct.unpack(LEASE_REC, items[i + 1])
        flight(c)
      end
    end
  until cursor == '0'
  return {fmt(cash()), fmt(T.lambda_cash), fmt(flight()), fmt(T.injected), n}

elseif OP == 'peek' then
  local url, cash = richest()
  local reply = {url or false, cash and fmt(cash) or false}
  for _, what in ipairs(CORRUPT) do reply[#reply + 1] = what end
  return reply

else
  return redis.error_reply('aopic: unknown op ' .. tostring(OP))
end

flush_hosts()
save_totals()
if result == nil then result = false end
return {result, unpack(CORRUPT)}
"""

_SHA = hashlib.sha1(LUA.encode()).hexdigest()
_SHA_BYTES = _SHA.encode()


def _pack_command(*args: Any) -> bytes:
    """One Redis command in RESP: ``bytes`` as is, ``str`` as UTF-8, ints
    in decimal (floats are passed as ``_fmt`` strings)."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif not isinstance(arg, bytes):
            arg = str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)

_RETRYABLE = (redis.ConnectionError, redis.TimeoutError)

#: Script ops that change nothing (or only what ``pop`` reports itself).
_READ_OPS = frozenset({"pop", "peek", "ping", "recount"})

# Take up to ARGV[1] entries from a seeds key, atomically, whatever its type
# (scrapy-redis feeds lists, sets or sorted sets): {type, entries...}
_TAKE_SEEDS_LUA = r"""
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
"""

# How much work the shared crawl has, read atomically: {pending, open
# leases, seeds waiting in KEYS[3] (list, set or zset) or taken from it and
# not yet scheduled (live claims in KEYS[4])}
_ACTIVITY_LUA = r"""
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
"""

#: Seconds a batch of seeds taken by a worker counts as work of the crawl
#: before that worker has scheduled it (longer only if the worker died).
SEED_CLAIM_SECONDS = 60


def seed_claims_key(seeds_key: str) -> str:
    """The sorted set of claims on batches taken from ``seeds_key``."""
    return f"{seeds_key}:taken"


def _text(value: bytes | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return value.decode("utf-8", "replace")


def encode_request_data(request: Any) -> str:
    """The ``P:req`` text of a store request: ``""`` for ``None``, else JSON.

    Raises :class:`TypeError` for data that is not JSON (the Redis store
    keeps data only, never objects).
    """
    if request is None:
        return ""
    if not isinstance(request, (str, dict)):
        raise TypeError(
            f"RedisStore keeps requests as JSON data (None, str or dict), got {type(request).__name__}"
        )
    try:
        return json.dumps(request, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"request data is not JSON-serializable: {exc}") from None


def _is_http_url(value: Any) -> bool:
    """Whether ``value`` is a URL Scrapy would fetch over http(s).

    A scheme-less string passes (Scrapy cannot fetch it anyway); ``file:``,
    ``s3:``, ``ftp:``, ``data:`` do not: a writable Redis must not make the
    crawler read local files or other services.
    """
    if not isinstance(value, str):
        return False
    try:
        scheme = urlsplit(value).scheme.lower()
    except ValueError:
        return False
    return scheme in ("", "http", "https")


def _is_referred(data: dict) -> bool:
    """Whether ``data`` is the portable form of a Referer-only link (see
    :mod:`scrapy_aopic.frontier.requestcodec`): its Referer, and its URL only when
    spelt differently from the account's."""
    return (
        isinstance(data.get(REFERER_KEY), str)
        and data.keys() <= {REFERER_KEY, "url"}
        and ("url" not in data or _is_http_url(data["url"]))
    )


#: Stored request JSON larger than this is refused unread.
MAX_REQUEST_BYTES = 1 << 20


def decode_request_data(url: str, raw: bytes | None) -> Any:
    """Request data of account ``url`` from its stored JSON, or ``None``
    (a plain GET of ``url``, as written for plain links).

    Anything else in Redis — bytes that are not UTF-8 JSON (a pickle, say),
    JSON nested beyond the interpreter's limits or larger than
    :data:`MAX_REQUEST_BYTES`, JSON of the wrong shape, a string or dict
    pointing at a non-http(s) URL — becomes :class:`UnreadableData`: the
    frontier then sends that URL's cash to lambda and says why, and never
    fetches something else in its place. Nothing is ever unpickled or
    evaluated.
    """
    if raw is None:
        return None
    if len(raw) > MAX_REQUEST_BYTES:
        return UnreadableData(f"{len(raw)} bytes, more than {MAX_REQUEST_BYTES}")
    try:
        data = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return UnreadableData(f"not JSON ({type(exc).__name__}; {len(raw)} bytes starting {raw[:16]!r})")
    if isinstance(data, str) and _is_http_url(data):
        return data
    if isinstance(data, dict) and (_is_referred(data) or _is_http_url(data.get("url"))):
        return data
    shape = type(data).__name__ if not isinstance(data, (str, dict)) else "non-http(s) URL"
    return UnreadableData(f"an unusable shape ({shape})")


def _fmt(value: float) -> str:
    """A float as the shortest decimal that reads back to the same double."""
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"cash and history must be finite numbers, got {value!r}")
    return repr(value)


class RedisStore(FrontierStore):
    """:class:`~scrapy_aopic.store.base.FrontierStore` in Redis, shared by workers.

    :param server: a ``redis.Redis`` client created with
        ``decode_responses=False`` (records are binary).
    :param key_prefix: prefix of every key (e.g. ``"myspider:aopic"``).
    :param lambda_targets: ``"pending"`` or ``"all"``; every worker of a crawl
        must use the same value.
    :param host_concurrency: most open leases per host across all workers
        (``CONCURRENT_REQUESTS_PER_DOMAIN``); ``0`` means no cap.
    :param lease_timeout: seconds (Redis server time) after which a lease
        nobody settled is requeued by the next :meth:`pop` — a dead worker's
        requests come back. Make it longer than a download can take.
    :param retry_timeout: how long a call keeps retrying while Redis is
        unreachable before it raises; ``0`` fails at once.
    :param reclaim_batch: expired leases requeued per :meth:`pop`.
    :param owns_server: :meth:`close` also closes ``server``'s connections.
    :param readonly: for tools that only read: the constructor does not
        record the lambda targets of a frontier that has none yet.
    """

    shared = True

    def __init__(
        self,
        server: redis.Redis,
        key_prefix: str = "aopic",
        lambda_targets: str = "pending",
        *,
        host_concurrency: int = 8,
        lease_timeout: float = 600.0,
        retry_timeout: float = 300.0,
        reclaim_batch: int = 16,
        owns_server: bool = False,
        readonly: bool = False,
    ):
        if lambda_targets not in ("pending", "all"):
            raise ValueError(
                f"AOPIC_LAMBDA_TARGETS must be 'pending' or 'all', got {lambda_targets!r}"
            )
        if not lease_timeout > 0:
            raise ValueError(f"lease_timeout must be > 0 seconds, got {lease_timeout!r}")
        if server.get_encoder().decode_responses:
            raise ValueError("RedisStore needs a Redis client with decode_responses=False")
        self.server = server
        self.key_prefix = key_prefix
        self.lambda_targets = lambda_targets
        self._all_flag = "1" if lambda_targets == "all" else "0"
        self.host_concurrency = int(host_concurrency or 0)
        self.lease_timeout = float(lease_timeout)
        self.retry_timeout = float(retry_timeout)
        self.reclaim_batch = int(reclaim_batch)
        self._owns_server = owns_server
        #: a reader (``scrapy aopic``): the constructor writes nothing
        self.readonly = readonly
        self._conn = None
        self._conn_pid = 0
        self._conn_lock = threading.Lock()
        #: lambda payout made by the last :meth:`pop` (``visit_lambda=True``)
        self.last_lambda_payout = 0.0
        #: pending URLs right after the last :meth:`pop`
        self.last_pending = 0
        #: expired leases the last :meth:`pop` requeued
        self.last_reclaimed = 0
        # Whether ``last_pending`` still holds: no change by this process
        # since it was read (other workers' changes are seen by the next pop).
        self._pending_fresh = False
        self._scripts: dict[str, Any] = {}
        self._seed_claims: list[str] = []  # see take_seeds
        # pop tokens (see the script's 'pop'): this worker's id and a counter
        self._worker_id = ""
        self._token_pid = 0
        self._pop_seq = 0
        p = key_prefix
        self.keys = {
            name: f"{p}:{name}"
            for name in ("tot", "acct", "req", "alias", "hosts", "hadv", "lease", "ldl", "hbusy", "epoch")
        }
        self._tot_key = self.keys["tot"].encode()
        self._prefix_arg = p.encode()
        self._queue_prefix = f"{p}:q:"
        self._check_lambda_targets()
        #: the identity of the frontier this store opened (``P:epoch``)
        self.epoch = self._open_epoch()

    @classmethod
    def from_url(cls, url: str, key_prefix: str = "aopic", lambda_targets: str = "pending", **kwargs) -> RedisStore:
        """A store on the Redis at ``url`` (``redis://host:port/db``)."""
        # a Redis that hangs (stopped, network partition) must raise, not block forever
        server = redis.Redis.from_url(url, decode_responses=False, socket_timeout=30, socket_connect_timeout=10)
        return cls(server, key_prefix, lambda_targets, owns_server=True, **kwargs)

    @classmethod
    def from_settings(cls, settings, key_prefix: str, lambda_targets: str = "pending", **kwargs) -> RedisStore:
        """A store on the Redis described by Scrapy ``settings`` (``REDIS_URL``,
        ``REDIS_PARAMS``, ``REDIS_HOST`` / ``REDIS_PORT``, as in scrapy-redis)."""
        from ..connection import get_redis_from_settings

        return cls(get_redis_from_settings(settings), key_prefix, lambda_targets, owns_server=True, **kwargs)

    @classmethod
    def from_crawler(cls, crawler, spider, lambda_targets: str = "pending", **kwargs) -> RedisStore:
        """The shared frontier of ``spider``'s crawl, configured by the
        crawler's settings (``AOPIC_REDIS_*``, scrapy-redis' ``REDIS_*``).

        ``SCHEDULER_FLUSH_ON_START`` deletes the frontier first: set it only
        on the *first* worker of a fresh crawl (any later worker would wipe
        what the others did).
        """
        from .. import settings as aopic_settings
        from ..connection import format_key, get_redis_from_settings

        settings = crawler.settings
        prefix = format_key(aopic_settings.get(settings, "AOPIC_REDIS_KEY"), spider)
        host_concurrency = aopic_settings.get(settings, "AOPIC_REDIS_HOST_CONCURRENCY")
        if host_concurrency is None:
            host_concurrency = settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN", 8)
        kwargs.setdefault("host_concurrency", int(host_concurrency))
        kwargs.setdefault("lease_timeout", aopic_settings.get_float(settings, "AOPIC_REDIS_LEASE_TIMEOUT"))
        kwargs.setdefault("retry_timeout", aopic_settings.get_float(settings, "AOPIC_REDIS_RETRY_TIMEOUT"))
        server = get_redis_from_settings(settings)
        if settings.getbool("SCHEDULER_FLUSH_ON_START"):
            deleted = delete_frontier(server, prefix)
            logger.info("aopic: SCHEDULER_FLUSH_ON_START: deleted the %d keys of frontier %s", deleted, prefix)
        store = cls(server, prefix, lambda_targets, owns_server=True, **kwargs)
        totals = store.totals()
        logger.info(
            "aopic: shared frontier %s on Redis %s (%d known, %d pending, %d leased)",
            prefix, store._where(), totals.known, totals.pending, totals.leased,
        )
        return store

    # -- plumbing -------------------------------------------------------------

    def _retrying(self, what: str, call: Callable[[], Any]) -> Any:
        """Run ``call``; while Redis is unreachable, log and retry with backoff
        for up to ``retry_timeout`` seconds."""
        failures = 0
        delay = 0.05
        give_up_at = None
        while True:
            try:
                result = call()
            except _RETRYABLE as exc:
                now = time.monotonic()
                if give_up_at is None:
                    give_up_at = now + self.retry_timeout
                failures += 1
                if now >= give_up_at:
                    raise StoreUnavailable(
                        f"Redis at {self._where()} unreachable for {self.retry_timeout:.0f}s "
                        f"({type(exc).__name__}: {exc}); gave up on {what}"
                    ) from exc
                logger.warning(
                    "aopic: Redis at %s unreachable (%s: %s); %s retry %d in %.2fs",
                    self._where(), type(exc).__name__, exc, what, failures, delay,
                )
                time.sleep(min(delay, max(0.0, give_up_at - now)))
                delay = min(delay * 2, 5.0)
                continue
            if failures:
                logger.warning("aopic: Redis at %s is back; %s succeeded after %d retries",
                               self._where(), what, failures)
            return result

    def _where(self) -> str:
        kwargs = self.server.connection_pool.connection_kwargs
        if "path" in kwargs:
            return kwargs["path"]
        return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"

    def _connection(self):
        """The store's own connection for script calls (one per process)."""
        pid = os.getpid()
        if self._conn is None or self._conn_pid != pid:
            # After a fork the parent's socket is not ours to use.
            self._conn = self.server.connection_pool.make_connection()
            self._conn_pid = pid
        return self._conn

    def _run(self, op: str, *args: Any, head: int = 0) -> Any:
        """Run script ``op``; log hostile records it skipped (listed after
        the result); return the result (``head=0``) or the first ``head``
        elements of the reply."""
        if op not in _READ_OPS:
            self._pending_fresh = False
        command = _pack_command(b"EVALSHA", _SHA_BYTES, b"1", self._tot_key, self._prefix_arg, op, self._all_flag, *args)
        reply = self._retrying(op, lambda: self._eval_packed(command))
        size = head or 1
        for what in reply[size:]:
            logger.warning(
                "aopic: unreadable frontier data in Redis for %s (not written by this "
                "store); skipped, its cash goes to lambda",
                _text(what),
            )
        return reply[:size] if head else reply[0]

    def _eval_packed(self, command: bytes) -> Any:
        """Send a packed EVALSHA on the store's own connection; load the
        script and resend on NOSCRIPT."""
        with self._conn_lock:
            conn = self._connection()
            try:
                try:
                    conn.send_packed_command([command])
                    return conn.read_response()
                except redis.exceptions.NoScriptError:
                    conn.send_command("SCRIPT", "LOAD", LUA)
                    conn.read_response()
                    conn.send_packed_command([command])
                    return conn.read_response()
            except redis.exceptions.ResponseError:
                raise  # the connection is fine
            except BaseException:
                conn.disconnect()  # a reply may be half read: start clean
                raise

    def _open_epoch(self) -> str | None:
        """The frontier's identity, written when it is created: a Redis that
        restarts empty loses it, which :meth:`check_epoch` notices."""
        key = self.keys["epoch"]

        def open_epoch():
            if not self.readonly:
                self.server.set(key, uuid.uuid4().hex, nx=True)
            return self.server.get(key)

        return _text(self._retrying("epoch", open_epoch))

    def check_epoch(self) -> None:
        """Raise :class:`FrontierLost` when the frontier this store opened is
        gone (its identity key missing or replaced): an empty Redis must not
        look like a finished crawl."""
        if self.epoch is None:
            return  # a reader of a frontier that had none
        current = _text(self._retrying("epoch", lambda: self.server.get(self.keys["epoch"])))
        if current != self.epoch:
            raise FrontierLost(
                f"the shared frontier {self.key_prefix} on Redis {self._where()} is gone "
                f"(identity {self.epoch} now {current or 'missing'}): Redis lost its data "
                "(restarted without persistence?) or the keys were deleted"
            )

    def _check_lambda_targets(self) -> None:
        """Record the crawl's lambda targets; refuse to join with another value."""
        key = self.keys["tot"]

        def check():
            stored = self.server.hget(key, "lambda_targets")
            if stored is None and not self.readonly:
                self.server.hsetnx(key, "lambda_targets", self.lambda_targets)
                stored = self.server.hget(key, "lambda_targets")
            return stored

        stored = _text(self._retrying("setup", check))
        if stored is not None and stored != self.lambda_targets:
            raise ValueError(
                f"the frontier at {key} was started with AOPIC_LAMBDA_TARGETS={stored!r}; "
                f"this worker uses {self.lambda_targets!r}"
            )

    def _lease(self, reply: list) -> tuple[Lease | None, float, int, int]:
        """``(lease or None, lambda payout, pending, reclaimed)`` of a
        pop / take reply (see ``lease_reply`` in the script)."""
        header, url, host, req = reply
        (has, lease_id, cash, history, has_last, last_visit, visits, depth,
         paid, pending, reclaimed) = _LEASE_HEAD.unpack(header)
        if not has:
            return None, paid, int(pending), int(reclaimed)
        url = _text(url)
        lease = Lease(
            url,
            int(lease_id),
            cash,
            _text(host),
            int(depth),
            decode_request_data(url, req),
            history,
            last_visit if has_last else None,
            int(visits),
        )
        return lease, paid, int(pending), int(reclaimed)

    def _view(self, url: str, raw: bytes, dividend: float, leased: float, target: str | None) -> AccountView | None:
        try:
            state, flags, cash, mark, history, last_visit, _seq, visits, depth = _RECORD.unpack_from(raw)
        except struct.error:
            logger.warning("aopic: unreadable account record for %s in Redis; skipped", url)
            return None
        if state == PENDING or (self._all_flag == "1" and state in (LEASED, CRAWLED)):
            cash = cash + (dividend - mark)
        return AccountView(
            url,
            state,
            cash,
            history,
            leased,
            visits,
            last_visit if flags & 1 else None,
            depth,
            _text(raw[_RECORD.size:]),
            target,
        )

    @staticmethod
    def _lease_cash(raw: bytes | None) -> float:
        if raw is None or len(raw) != _LEASE.size:
            return 0.0
        return _LEASE.unpack(raw)[1]

    def _link_args(self, link: Link) -> list[Any]:
        return [link.url, link.host, int(link.depth), encode_request_data(link.request)]

    # -- reading --------------------------------------------------------------

    def totals(self) -> Totals:
        raw = self._retrying("totals", lambda: self.server.hgetall(self.keys["tot"]))
        values = {_text(k): v for k, v in raw.items()}

        def num(name: str) -> float:
            try:
                return float(values.get(name, 0.0))
            except ValueError:
                return 0.0

        return Totals(
            injected=num("injected"),
            lambda_cash=num("lambda_cash"),
            lambda_history=num("lambda_history"),
            in_flight=num("in_flight"),
            history_sum=num("history_sum"),
            lambda_visits=int(num("lambda_visits")),
            visits=int(num("visits")),
            known=int(num("known")),
            pending=int(num("pending")),
            leased=int(num("leased")),
        )

    def _dividend(self) -> float:
        raw = self._retrying("dividend", lambda: self.server.hget(self.keys["tot"], "dividend"))
        return float(raw) if raw else 0.0

    def get(self, url: str) -> AccountView | None:
        def read():
            pipe = self.server.pipeline(transaction=True)
            pipe.hget(self.keys["acct"], url)
            pipe.hget(self.keys["lease"], url)
            pipe.hget(self.keys["alias"], url)
            pipe.hget(self.keys["tot"], "dividend")
            return pipe.execute()

        raw, lease, target, dividend = self._retrying("get", read)
        if raw is None:
            return None
        view = self._view(url, raw, float(dividend or 0.0), self._lease_cash(lease), None)
        if view is not None and view.state == ALIAS:
            view = view._replace(target=_text(target))
        return view

    def knows(self, url: str) -> bool:
        return bool(self._retrying("knows", lambda: self.server.hexists(self.keys["acct"], url)))

    def count_known(self, urls: Collection[str]) -> int:
        urls = list(urls)
        if not urls:
            return 0
        found = self._retrying("count_known", lambda: self.server.hmget(self.keys["acct"], urls))
        return sum(raw is not None for raw in found)

    def iter_accounts(self, batch: int = 1000) -> Iterator[AccountView]:
        """Every account (HSCAN). Consistent when no worker is writing."""
        dividend = self._dividend()
        leases = self._retrying("leases", lambda: self.server.hgetall(self.keys["lease"]))
        leased = {_text(k): self._lease_cash(v) for k, v in leases.items()}
        cursor = 0
        while True:
            cursor, page = self._retrying(
                "scan", lambda c=cursor: self.server.hscan(self.keys["acct"], c, count=batch)
            )
            items = [(_text(k), v) for k, v in page.items()]
            aliases = [url for url, raw in items if raw[:1] == bytes([ALIAS])]
            targets = {}
            if aliases:
                found = self._retrying(
                    "aliases", lambda: self.server.hmget(self.keys["alias"], aliases)
                )
                targets = {u: _text(t) for u, t in zip(aliases, found)}
            for url, raw in items:
                view = self._view(url, raw, dividend, leased.get(url, 0.0), targets.get(url))
                if view is not None:
                    yield view
            if cursor == 0:
                return

    def peek(self) -> tuple[str, float] | None:
        url, cash = self._run("peek", head=2)
        if not url:
            return None
        return _text(url), float(cash)

    def recount(self) -> tuple[float, float, float, float]:
        """``(account_cash, lambda_cash, in_flight, injected)`` recounted in
        one script: a consistent snapshot even while workers write, unlike
        :meth:`iter_accounts` (the shape of :meth:`AopicEngine.ledger`).

        O(n) inside Redis, which serves nobody else meanwhile (about 1 s per
        10^6 accounts): for checks at the end of a crawl and in tests.
        """
        cash, lambda_cash, in_flight, injected, _ = self._run("recount", head=5)
        return float(cash), float(lambda_cash), float(in_flight), float(injected)

    def pending_count(self) -> int:
        """Pending URLs of the shared frontier: :attr:`last_pending` when
        this process changed nothing since the last :meth:`pop` (no round
        trip), else read from Redis (one ``HGET``). Other workers' changes
        since then are not seen: :meth:`activity` is the exact figure."""
        if self._pending_fresh:
            return self.last_pending
        raw = self._retrying("pending", lambda: self.server.hget(self.keys["tot"], "pending"))
        try:
            self.last_pending = int(float(raw or 0))
        except ValueError:
            self.last_pending = 0
        self._pending_fresh = True
        return self.last_pending

    def activity(self, seeds_key: str | None = None) -> tuple[int, int, int]:
        """``(pending URLs, open leases, entries waiting in seeds_key)``,
        read in one script: a consistent snapshot of how much work the whole
        crawl has, whichever worker holds it. ``(0, 0, 0)`` is final unless
        someone adds seeds: a lease is closed in the same script that queues
        the links its page yielded."""
        keys = [self.keys["tot"], self.keys["lease"]]
        if seeds_key:
            keys += [seeds_key, seed_claims_key(seeds_key)]
        pending, leases, seeds = self._retrying(
            "activity", lambda: self._script(_ACTIVITY_LUA)(keys=keys)
        )
        self.last_pending = int(pending)
        self._pending_fresh = True
        return int(pending), int(leases), int(seeds)

    def take_seeds(self, seeds_key: str, count: int) -> list[bytes]:
        """Remove and return up to ``count`` entries of ``seeds_key`` (a
        list: from the head; a set: any; a sorted set: highest score first),
        atomically: two workers never get the same entry. Entries are raw
        bytes, to be checked by the caller, who then calls
        :meth:`seeds_scheduled`: until then (at most
        :data:`SEED_CLAIM_SECONDS`) :meth:`activity` counts the batch as
        seeds waiting, so no other worker sees the crawl idle meanwhile."""
        if count <= 0:
            return []
        token = uuid.uuid4().hex
        keys = [seeds_key, seed_claims_key(seeds_key)]
        args = [int(count), token, SEED_CLAIM_SECONDS * 1000]
        reply = self._retrying("seeds", lambda: self._script(_TAKE_SEEDS_LUA)(keys=keys, args=args))
        kind, entries = _text(reply[0]), reply[1:]
        if kind not in ("list", "set", "zset", "none"):
            logger.warning("aopic: seeds key %s is a Redis %s, not a list, set or sorted set; ignored",
                           seeds_key, kind)
        if entries:
            self._seed_claims.append(token)
        return entries

    def seeds_scheduled(self, seeds_key: str) -> None:
        """The batches this worker took from ``seeds_key`` are in the
        frontier (or were skipped): drop their claims."""
        claims, self._seed_claims = self._seed_claims, []
        if claims:
            self._retrying("seeds", lambda: self.server.zrem(seed_claims_key(seeds_key), *claims))

    def _script(self, source: str):
        """A helper script (EVALSHA, loaded again after a Redis restart)."""
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self.server.register_script(source)
        return script

    def request_of(self, url: str) -> Any:
        """The stored request data of ``url`` (decoded safely), if any."""
        raw = self._retrying("request", lambda: self.server.hget(self.keys["req"], url))
        return decode_request_data(url, raw)

    # -- cash in --------------------------------------------------------------

    def inject(self, link: Link, cash: float) -> bool:
        return bool(self._run("inject", *self._link_args(link), _fmt(cash)))

    def inject_many(self, seeds: Iterable[tuple[Link, float]], chunk: int = 1000) -> int:
        """:meth:`inject` for many seeds, pipelined (``chunk`` per round
        trip); returns how many were new. Safe to retry: a known URL brings
        no cash."""
        new = 0
        batch: list[tuple[Link, float]] = []
        self._pending_fresh = False

        def flush(items):
            def send():
                self._run("ping")  # loads the script if needed
                pipe = self.server.pipeline(transaction=False)
                for link, cash in items:
                    pipe.evalsha(
                        _SHA, 1, self._tot_key, self._prefix_arg,
                        "inject", self._all_flag, *self._link_args(link), _fmt(cash),
                    )
                return pipe.execute()

            return sum(reply[0] for reply in self._retrying("inject_many", send))

        for item in seeds:
            batch.append(item)
            if len(batch) == chunk:
                new += flush(batch)
                batch = []
        if batch:
            new += flush(batch)
        return new

    def register(self, link: Link) -> int | None:
        state = self._run("register", *self._link_args(link))
        return None if state == -1 else int(state)

    def repend(self, link: Link) -> bool:
        return bool(self._run("repend", *self._link_args(link)))

    # -- selection ------------------------------------------------------------

    def pop(
        self,
        ready: Callable[[str], bool] | None = None,
        min_share: float = 0.0,
        *,
        busy: Collection[str] = (),
        visit_lambda: bool = False,
        now: float | None = None,
    ) -> Lease | None:
        """Lease the richest pending URL of a host that is ready here and has
        fewer than ``host_concurrency`` open leases across all workers, and
        whose cash is at least ``min_share`` times the richest pending URL's
        (see :meth:`FrontierStore.pop`).

        ``busy``: hosts known not to be ready here (the local downloader's
        full slots); they are skipped inside the script, so the common case
        is one round trip. ``ready`` is still asked about the result: a host
        it refuses is requeued and excluded, and the next host is tried.
        ``visit_lambda=True`` first visits lambda when it is due (as
        :meth:`AopicEngine.visit_lambda_if_due`), in the same round trip;
        the amount paid is left in :attr:`last_lambda_payout` and the number
        of pending URLs after the pop in :attr:`last_pending` (no extra trip
        for the scheduler's ``has_pending_requests``). Each call also
        requeues up to ``reclaim_batch`` expired leases.
        """
        excluded = list(dict.fromkeys(busy))
        self.last_lambda_payout = 0.0
        self.last_reclaimed = 0
        now_arg = "" if now is None else _fmt(now)
        pay_lambda = "1" if visit_lambda else "0"
        while True:
            reply = self._run(
                "pop",
                self.host_concurrency,
                _fmt(self.lease_timeout),
                self.reclaim_batch,
                now_arg,
                pay_lambda,
                _fmt(min_share),
                self._pop_token(),
                *excluded,
                head=4,
            )
            lease, paid, pending, reclaimed = self._lease(reply)
            self.last_lambda_payout += paid
            self.last_pending = pending
            self.last_reclaimed += reclaimed
            self._pending_fresh = True
            if reclaimed:
                logger.info("aopic: %d expired leases requeued (their workers died or hung)", reclaimed)
            if lease is None:
                return None
            if lease.host in excluded:  # would loop forever: the script ignored the list
                raise RuntimeError(f"aopic: Redis script leased excluded host {lease.host!r}")
            if ready is None or ready(lease.host):
                return lease
            # Not ready here after all: give it back untouched and skip the host.
            self._run("unlease", lease.url, lease.lease_id)
            excluded.append(lease.host)
            pay_lambda = "0"

    def _pop_token(self) -> str:
        """``worker:seq``, new for every pop call (the retries of one call
        resend the same bytes, hence the same token)."""
        pid = os.getpid()
        if self._token_pid != pid:  # a forked copy is another worker
            self._token_pid = pid
            self._worker_id = uuid.uuid4().hex
        self._pop_seq += 1
        return f"{self._worker_id}:{self._pop_seq}"

    def take(self, url: str) -> Lease | None:
        return self._lease(self._run("take", url, _fmt(self.lease_timeout), "", head=4))[0]

    def visit_lambda(self) -> float:
        return float(self._run("visit_lambda"))

    def reclaim_expired(self, now: float | None = None) -> int:
        """Requeue every lease past its deadline (``now``: Redis server time
        by default); returns how many. Their cash goes back to their accounts."""
        total = 0
        now_arg = "" if now is None else _fmt(now)
        while True:
            n = int(self._run("reclaim", now_arg, 256))
            total += n
            if n < 256:
                return total

    # -- settling -------------------------------------------------------------

    def settle_visit(
        self,
        url: str,
        lease_id: int,
        history: float,
        visited_at: float,
        credits: Iterable[Credit],
    ) -> bool:
        args: list[Any] = [url, int(lease_id), _fmt(history), _fmt(visited_at)]
        for link, amount in credits:
            args.extend(self._link_args(link))
            args.append(_fmt(amount))
        return bool(self._run("settle_visit", *args))

    def settle_failure(self, url: str, lease_id: int, *, refuse: bool = False) -> bool:
        return bool(self._run("settle_failure", url, int(lease_id), "1" if refuse else "0"))

    def settle_transfer(self, url: str, lease_id: int, target: Link) -> bool:
        return bool(self._run("settle_transfer", url, int(lease_id), *self._link_args(target)))

    def settle_requeue(self, url: str, lease_id: int) -> bool:
        return bool(self._run("settle_requeue", url, int(lease_id)))

    def open_leases(self) -> list[tuple[str, int]]:
        raw = self._retrying("leases", lambda: self.server.hgetall(self.keys["lease"]))
        leases = []
        for url, record in raw.items():
            if len(record) == _LEASE.size:
                leases.append((_text(url), int(_LEASE.unpack(record)[0])))
        return leases

    # -- other ------------------------------------------------------------------

    def refuse(self, url: str, host: str, depth: int) -> None:
        self._run("refuse", url, host, int(depth))

    def clear(self) -> int:
        """Delete every key of this frontier; returns how many were deleted."""
        deleted = self._retrying("clear", lambda: delete_frontier(self.server, self.key_prefix))
        self._check_lambda_targets()
        self.epoch = self._open_epoch()  # a new, empty frontier
        return deleted

    def close(self) -> None:
        if self._conn is not None and self._conn_pid == os.getpid():
            self._conn.disconnect()
        self._conn = None
        if self._owns_server:
            self.server.close()


def delete_frontier(server: redis.Redis, key_prefix: str) -> int:
    """Delete every key ``key_prefix:*`` (SCAN + UNLINK, in batches);
    returns how many."""
    pattern = _glob_escape(key_prefix) + ":*"
    deleted = 0
    batch: list[bytes] = []
    for key in server.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) == 1000:
            deleted += server.unlink(*batch)
            batch = []
    if batch:
        deleted += server.unlink(*batch)
    return deleted


def _glob_escape(text: str) -> str:
    """``text`` with Redis glob specials escaped (for SCAN MATCH)."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)
