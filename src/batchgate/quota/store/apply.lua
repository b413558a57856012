-- QuotaStore.apply on Redis, atomic and on the server's clock (see ledger.py: the same steps).
-- KEYS[1]: the quota's hash. ARGV: has_take, pause seconds, drain, ttl ms, dimension count, then
-- per dimension: name, rate, capacity, top, hold, amount to take, settlement delta.
-- Hash fields: <dim>:l level, <dim>:u updated, <dim>:r rate, <dim>:c capacity, <dim>:t top,
-- <dim>:h until when the rate stands against higher ones; paused.
local key = KEYS[1]
local has_take = ARGV[1] == '1'
local pause = tonumber(ARGV[2])
local drain = ARGV[3] == '1'
local ttl = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local function fmt(x) return string.format('%.17g', x) end

local dims = {}
for i = 0, n - 1 do
  local base = 6 + i * 7
  local name = ARGV[base]
  local d = {name = name, rate = tonumber(ARGV[base + 1]), cap = tonumber(ARGV[base + 2]),
             top = tonumber(ARGV[base + 3]), hold = tonumber(ARGV[base + 4]),
             take = tonumber(ARGV[base + 5]), delta = tonumber(ARGV[base + 6])}
  local got = redis.call('HMGET', key, name .. ':l', name .. ':u', name .. ':r', name .. ':t', name .. ':h')
  local level, updated, rate, top = tonumber(got[1]), tonumber(got[2]), tonumber(got[3]), tonumber(got[4])
  local held = tonumber(got[5]) or -1
  if level == nil then
    level, updated, rate, top, held = d.cap, now, d.rate, d.top, -1
  end
  if updated > now + 1 then updated = now end  -- the server's clock went back: count from now
  if now > updated and level < top then
    level = math.min(top, level + (now - updated) * rate)
  end
  if d.rate <= rate or now >= held then
    rate, held = d.rate, now + d.hold
  end
  d.rate, d.held = rate, held
  level = math.min(level, d.top)
  if d.delta > 0 then
    level = level - d.delta
  elseif d.delta < 0 then
    level = math.max(level, math.min(d.cap, level - d.delta))
  end
  if drain then level = math.min(0, level) end
  d.level = level
  dims[#dims + 1] = d
end

local paused = tonumber(redis.call('HGET', key, 'paused') or '-1') or -1
if pause > 0 and now + pause > paused then
  paused = now + pause
  redis.call('HSET', key, 'paused', fmt(paused))
end

local wait = 0
if has_take then
  wait = math.max(0, paused - now)
  for _, d in ipairs(dims) do
    local deficit = math.min(d.take, d.cap) - d.level
    if deficit > 1e-9 * math.max(1, d.cap) then
      if d.rate > 0 then wait = math.max(wait, deficit / d.rate) else wait = 1 / 0 end
    end
  end
  if wait <= 0 then
    for _, d in ipairs(dims) do d.level = d.level - d.take end
  end
end

for _, d in ipairs(dims) do
  redis.call('HSET', key, d.name .. ':l', fmt(d.level), d.name .. ':u', fmt(now),
             d.name .. ':r', fmt(d.rate), d.name .. ':c', fmt(d.cap), d.name .. ':t', fmt(d.top),
             d.name .. ':h', fmt(d.held))
end
redis.call('PEXPIRE', key, ttl)
return fmt(wait)
