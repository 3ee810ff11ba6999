"""Server-side Lua scripts of the Redis stream manager (one atomic call per write).

Keys of one stream share a hash tag, so they live in one slot: ``KEYS[1]`` is the meta
hash (``status``, ``head``, ``run_id``, ``epoch``, ``end_status``, ``error``),
``KEYS[2]`` the Redis Stream of chunks, one entry per chunk with the explicit ID
``<sequence>-0`` and the JSON payload in field ``c``, and ``KEYS[3]`` the stream's floor:
the head of its last write, kept without a TTL, so a stream re-created after its keys
expired starts after every sequence a client may still hold (sequences are never reused).
Every write checks the run-id fence, allocates sequences from ``head``, refreshes the TTL
of the meta hash and the chunks and publishes the stream
id on the manager's notify channel, all in one script. A write carries a batch id, so the
client may resend it after a lost reply without storing it twice. A refused write returns an error
reply starting with ``HELIXFENCE``; scripts return the meta fields in :data:`INFO_FIELDS` order
(the append script after its batch's last sequence).
"""

from __future__ import annotations

INFO_FIELDS = ("status", "head", "run_id", "epoch", "end_status", "error")

FENCE_PREFIX = "HELIXFENCE"

_COMMON = """
local function info()
  return redis.call('HMGET', KEYS[1], 'status', 'head', 'run_id', 'epoch', 'end_status', 'error')
end
local function touch(ttl)
  redis.call('EXPIRE', KEYS[1], ttl)
  if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('EXPIRE', KEYS[2], ttl) end
end
local function fenced(run_id, need_active)
  local m = redis.call('HMGET', KEYS[1], 'run_id', 'status', 'head')
  if not m[1] or m[1] ~= run_id then
    return nil, 'stream_claimed_by_other_run'
  end
  if need_active and m[2] ~= 'active' then
    return nil, 'stream_not_active'
  end
  return tonumber(m[3]) or 0
end
-- A batch resent after a lost reply (same batch id) is not stored twice: its head is returned.
local function replayed(batch)
  local last = redis.call('HMGET', KEYS[1], 'batch', 'batch_head')
  if last[1] == batch then return tonumber(last[2]) end
  return nil
end
local function remember(batch, head)
  redis.call('HSET', KEYS[1], 'batch', batch, 'batch_head', string.format('%d', head))
end
local function add(head, payload)
  redis.call('XADD', KEYS[2], string.format('%d-0', head), 'c', payload)
end
-- The batch's last sequence, then the meta fields in INFO_FIELDS order.
local function appended(head)
  local m = info()
  return {head, m[1], m[2], m[3], m[4], m[5], m[6]}
end
local function set_head(head)
  local value = string.format('%d', head)
  redis.call('HSET', KEYS[1], 'head', value)
  redis.call('SET', KEYS[3], value)
end
"""

# ARGV: run_id, ttl, channel, notice (origin + stream_id), batch_id, payload...
#       -> [the batch's last sequence, *info after the batch].
APPEND = (
    _COMMON
    + """
local head, why = fenced(ARGV[1], true)
if not head then return redis.error_reply('HELIXFENCE ' .. why) end
local done = replayed(ARGV[5])
if done then return appended(done) end
for i = 6, #ARGV do
  head = head + 1
  add(head, ARGV[i])
end
set_head(head)
remember(ARGV[5], head)
touch(ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return appended(head)
"""
)

# ARGV: run_id, epoch, ttl, channel, notice (origin + stream_id), opening ('1': the run's first claim,
#       which never re-activates a stream closed for its run: HELIXFENCE run_ended)  -> info.
CLAIM = (
    _COMMON
    + """
local m = redis.call('HMGET', KEYS[1], 'run_id', 'epoch', 'status')
local epoch = tonumber(ARGV[2])
if m[1] then
  local current = tonumber(m[2]) or 0
  local same = m[1] == ARGV[1] and current == epoch
  if not same and epoch <= current then
    return redis.error_reply('HELIXFENCE stale_claim')
  end
  if same and ARGV[6] == '1' and m[3] ~= 'active' then
    return redis.error_reply('HELIXFENCE run_ended')
  end
end
redis.call('HSETNX', KEYS[1], 'head', redis.call('GET', KEYS[3]) or '0')
redis.call('HSET', KEYS[1], 'run_id', ARGV[1], 'epoch', ARGV[2], 'status', 'active', 'end_status', '', 'error', '')
touch(ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return info()
"""
)

# ARGV: run_id, ttl, channel, notice (origin + stream_id), status, end_status, error_json,
#       error_chunk_json|'', batch_id  -> info.
SET_STATUS = (
    _COMMON
    + """
local head, why = fenced(ARGV[1], false)
if not head then return redis.error_reply('HELIXFENCE ' .. why) end
if ARGV[8] ~= '' and not replayed(ARGV[9]) then
  head = head + 1
  add(head, ARGV[8])
  set_head(head)
  remember(ARGV[9], head)
end
redis.call('HSET', KEYS[1], 'status', ARGV[5], 'end_status', ARGV[6], 'error', ARGV[7])
touch(ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return info()
"""
)
