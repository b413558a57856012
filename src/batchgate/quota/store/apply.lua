-- QuotaStore.apply on Redis, atomic and on the server's clock (see ledger.py: the same steps).
-- KEYS[1]: the quota's hash. ARGV: has_take, pause seconds, drain, ttl ms, dimension count,
-- take key, take hold, entry-delta count, restamp count; then per dimension: name, rate,
-- capacity, top, hold, window (<= 0: no log), amount to take, settlement delta; then per entry
-- delta: key, dimension index (1-based), delta; then per restamp: key, hold, then one amount per
-- dimension (in the dimensions' order).
-- Hash fields: <dim>:l level, <dim>:u updated, <dim>:r rate, <dim>:c capacity, <dim>:t top,
-- <dim>:h until when the rate stands against higher ones, <dim>:w window allowance, <dim>:g the
-- window log (cmsgpack: key, until, amount, ... — msgpack keeps doubles exact); paused.
local key = KEYS[1]
local has_take = ARGV[1] == '1'
local pause = tonumber(ARGV[2])
local drain = ARGV[3] == '1'
local ttl = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local take_key = ARGV[6]
local take_hold = tonumber(ARGV[7])
local n_entries = tonumber(ARGV[8])
local n_restamps = tonumber(ARGV[9])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local function fmt(x) return string.format('%.17g', x) end
local EPS = 1e-9

local dims = {}
for i = 0, n - 1 do
  local base = 10 + i * 8
  local name = ARGV[base]
  local d = {name = name, rate = tonumber(ARGV[base + 1]), cap = tonumber(ARGV[base + 2]),
             top = tonumber(ARGV[base + 3]), hold = tonumber(ARGV[base + 4]),
             window = tonumber(ARGV[base + 5]), take = tonumber(ARGV[base + 6]),
             delta = tonumber(ARGV[base + 7])}
  local got = redis.call('HMGET', key, name .. ':l', name .. ':u', name .. ':r', name .. ':t',
                         name .. ':h', name .. ':w', name .. ':g')
  local level, updated, rate, top = tonumber(got[1]), tonumber(got[2]), tonumber(got[3]), tonumber(got[4])
  local held = tonumber(got[5]) or -1
  local window = tonumber(got[6]) or -1
  if level == nil then
    level, updated, rate, top, held, window = d.cap, now, d.rate, d.top, -1, d.window
  end
  if updated > now + 1 then updated = now end  -- the server's clock went back: count from now
  if now > updated and level < top then
    level = math.min(top, level + (now - updated) * rate)
  end
  if d.rate <= rate or now >= held then
    rate, held, window = d.rate, now + d.hold, d.window
  end
  d.rate, d.held, d.window = rate, held, window
  level = math.min(level, d.top)
  -- the window log: key -> {until, amount}, without the entries whose time is up
  local log = {}
  if got[7] then
    local flat = cmsgpack.unpack(got[7])
    for j = 1, #flat, 3 do
      if flat[j + 1] > now then log[flat[j]] = {flat[j + 1], flat[j + 2]} end
    end
  end
  d.log = log
  d.level = level
  dims[#dims + 1] = d
end

-- restamps, then per-entry deltas (ledger._settle_log)
local at = 10 + n * 8
local entry_args = at
at = at + n_entries * 3
for _ = 1, n_restamps do
  local rkey, rhold = ARGV[at], tonumber(ARGV[at + 1])
  for i, d in ipairs(dims) do
    local amount = tonumber(ARGV[at + 1 + i])
    if d.window > 0 then
      local e = d.log[rkey]
      if e then
        e[1] = math.max(e[1], now + rhold)
      elseif amount > 0 then
        d.log[rkey] = {now + rhold, amount}
      end
    end
  end
  at = at + 2 + n
end
for j = 0, n_entries - 1 do
  local b = entry_args + j * 3
  local d = dims[tonumber(ARGV[b + 1])]
  local e = d and d.log[ARGV[b]]
  if e then e[2] = math.max(0, e[2] + tonumber(ARGV[b + 2])) end
end

for _, d in ipairs(dims) do
  if d.delta > 0 then
    d.level = d.level - d.delta
  elseif d.delta < 0 then
    d.level = math.max(d.level, math.min(d.cap, d.level - d.delta))
  end
  if drain then d.level = math.min(0, d.level) end
end

local paused = tonumber(redis.call('HGET', key, 'paused') or '-1') or -1
if pause > 0 and now + pause > paused then
  paused = now + pause
  redis.call('HSET', key, 'paused', fmt(paused))
end

-- seconds until `amount` fits in `d`'s window log (ledger.DimState.window_wait)
local function window_wait(d, amount)
  if d.window <= 0 or amount <= 0 then return 0 end
  local sum, entries = 0, {}
  for _, e in pairs(d.log) do
    sum = sum + e[2]
    entries[#entries + 1] = e
  end
  local excess = sum + math.min(amount, d.window) - d.window
  if excess <= EPS * math.max(1, d.window) then return 0 end
  table.sort(entries, function(a, b) return a[1] < b[1] end)
  local freed = 0
  for _, e in ipairs(entries) do
    freed = freed + e[2]
    if freed >= excess - EPS * math.max(1, d.window) then return math.max(0, e[1] - now) end
  end
  return 0
end

local wait = 0
if has_take then
  wait = math.max(0, paused - now)
  for _, d in ipairs(dims) do
    local deficit = math.min(d.take, d.cap) - d.level
    if deficit > EPS * math.max(1, d.cap) then
      if d.rate > 0 then wait = math.max(wait, deficit / d.rate) else wait = 1 / 0 end
    end
    wait = math.max(wait, window_wait(d, d.take))
  end
  if wait <= 0 then
    for _, d in ipairs(dims) do
      d.level = d.level - d.take
      if d.window > 0 and d.take > 0 then d.log[take_key] = {now + take_hold, d.take} end
    end
  end
end

for _, d in ipairs(dims) do
  local flat = {}
  for k, e in pairs(d.log) do
    flat[#flat + 1] = k
    flat[#flat + 1] = e[1]
    flat[#flat + 1] = e[2]
  end
  redis.call('HSET', key, d.name .. ':l', fmt(d.level), d.name .. ':u', fmt(now),
             d.name .. ':r', fmt(d.rate), d.name .. ':c', fmt(d.cap), d.name .. ':t', fmt(d.top),
             d.name .. ':h', fmt(d.held), d.name .. ':w', fmt(d.window),
             d.name .. ':g', cmsgpack.pack(flat))
end
redis.call('PEXPIRE', key, ttl)
return fmt(wait)
