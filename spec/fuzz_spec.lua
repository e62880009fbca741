-- Differential fuzzing: thousands of random arguments and random server
-- replies go through the reference module and the native one, each behind a
-- fixture transport, and both must send the same bytes and give the same
-- returns and errors. Where the native module differs on purpose (README,
-- "deliberately different") the difference is predicted or tolerated by a
-- named rule, and counted; anything else is a mismatch.
--
-- Every case seeds math.random with BASE + its index, so a failure names
-- the seed and shows the input (as Lua source, or the raw reply bytes).
-- Failures are grouped by the known native bug that explains them, each
-- of which has its own small case at the end of this file; "NEW" is
-- anything else. MCP_FUZZ_VERBOSE=1 prints the counts.
local H = require('helpers')
local trace = require('trace')

local VERBOSE = os.getenv('MCP_FUZZ_VERBOSE') == '1'
local REF, NAT = H.reference(), H.native()

local ARG_CASES, ARG_BASE = 3000, 100000
local REPLY_CASES, REPLY_BASE = 3000, 200000

local function pick(list) return list[math.random(#list)] end
local function chance(p) return math.random() < p end

-----------------------------------------------------------------------
-- Running one call through one module
-----------------------------------------------------------------------

-- What a call shows: the pcall results, the bytes given to the transport
-- and the client's fields afterwards.
local function outcome(mcp, respond, args)
  local sent = {}
  local client = mcp.new({ transport = function(text)
    sent[#sent + 1] = text
    return respond(text)
  end })
  local out = H.without_whole_result(mcp, table.pack(pcall(client.call, client, 'echo', args)))
  return { ok = out[1], values = { H.unpack(out, 2, out.n) }, n = out.n, sent = sent, fields = H.fields(client) }
end

local function same(a, b)
  if type(a) ~= 'table' or type(b) ~= 'table' then
    return a == b or (a ~= a and b ~= b)
  end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

-- Bytes as a Lua literal: printable ASCII kept, everything else \xNN, so
-- a failing input can be pasted back into a spec.
local function quote(s)
  return '"' .. s:gsub('[%c"\\\128-\255]', function(c)
    if c == '"' or c == '\\' then return '\\' .. c end
    return string.format('\\x%02x', c:byte())
  end) .. '"'
end

-- A generated value as Lua source (tables that contain themselves, which
-- source cannot write, show as <cycle>).
local function show(v, open)
  open = open or {}
  local tv = type(v)
  if tv == 'string' then return quote(v) end
  if tv == 'number' then
    if math.type and math.type(v) == 'integer' then
      return v == H.MININT and 'H.MININT' or string.format('%d', v)
    end
    if v ~= v then return '0/0' end
    if v == math.huge then return 'math.huge' end
    if v == -math.huge then return '-math.huge' end
    local s = string.format('%.17g', v)
    return s:find('[.e]') and s or s .. '.0'
  end
  if tv == 'function' then return 'print' end -- the only ones generated
  if tv == 'thread' then return 'coroutine.create(print)' end
  if tv == 'userdata' then return 'io.stdout' end
  if tv ~= 'table' then return tostring(v) end
  if open[v] then return '<cycle>' end
  open[v] = true
  local parts = {}
  for k, x in pairs(v) do parts[#parts + 1] = '[' .. show(k, open) .. ']=' .. show(x, open) end
  table.sort(parts)
  local mt = getmetatable(v)
  open[v] = nil
  local text = '{' .. table.concat(parts, ', ') .. '}'
  if mt and mt.__jsonorder then return 'trace.ordered(' .. text .. ', ' .. show(mt.__jsonorder, open) .. ')' end
  return text
end

-- The first place two outcomes differ, in a line: which item, and a
-- window of both texts around the first differing byte.
local function difference(ref, nat)
  local items = { { 'ok', ref.ok, nat.ok } }
  for i = 1, math.max(#ref.sent, #nat.sent) do items[#items + 1] = { 'sent[' .. i .. ']', ref.sent[i], nat.sent[i] } end
  for i = 1, math.max(ref.n, nat.n) - 1 do items[#items + 1] = { 'returns[' .. i .. ']', ref.values[i], nat.values[i] } end
  items[#items + 1] = { 'fields', ref.fields, nat.fields }
  for _, item in ipairs(items) do
    local name, a, b = item[1], item[2], item[3]
    if not same(a, b) then
      if type(a) ~= 'string' or type(b) ~= 'string' then
        return string.format('%s: reference %s, native %s', name, show(a), show(b))
      end
      local at = 1
      while at <= #a and a:byte(at) == b:byte(at) do at = at + 1 end
      local from = math.max(1, at - 40)
      return string.format('%s from byte %d: reference %s, native %s', name, at,
        quote(a:sub(from, at + 40)), quote(b:sub(from, at + 40))), a, b
    end
  end
end

-- Rust's String::from_utf8_lossy: each maximal invalid subsequence
-- becomes one U+FFFD.
local function lossy(s)
  local out, i = {}, 1
  while i <= #s do
    local c, len, lo, hi = s:byte(i), 0, 0x80, 0xBF
    if c < 0x80 then len = 1
    elseif c >= 0xC2 and c <= 0xDF then len = 2
    elseif c >= 0xE0 and c <= 0xEF then len, lo, hi = 3, c == 0xE0 and 0xA0 or 0x80, c == 0xED and 0x9F or 0xBF
    elseif c >= 0xF0 and c <= 0xF4 then len, lo, hi = 4, c == 0xF0 and 0x90 or 0x80, c == 0xF4 and 0x8F or 0xBF end
    local j = i + 1
    while j < i + len do
      local d = s:byte(j)
      if not d or d < lo or d > hi then break end
      lo, hi, j = 0x80, 0xBF, j + 1
    end
    out[#out + 1] = (len > 0 and j == i + len) and s:sub(i, j - 1) or '\239\191\189'
    i = j
  end
  return table.concat(out)
end

-- Names the native bugs (each has its own case at the end of this file)
-- that explain a difference between two texts, so a report leads with
-- what is new. The reference's text is mended as each bug would change
-- it, one bug at a time, until it matches the native text.
local TINY = '%d[%d.]*e%-3[0-2]%d'
local MENDS = {
  { 'not-UTF-8 text made lossy', function(x, y) return lossy(x), y end },
  { 'subnormal float', function(x, y) return (x:gsub(TINY, '<tiny>')), (y:gsub(TINY, '<tiny>')) end },
}

local function sorted_bytes(x)
  local t = { x:byte(1, -1) }
  table.sort(t)
  return string.char(H.unpack(t))
end

-- Whether two texts agree but for tables printed by address (tolerated)
-- or keys written in another order (a bug); nil if they do not.
local function agree(x, y)
  local pattern = '^' .. x:gsub('[%^%$%(%)%%%.%[%]%*%+%-%?]', '%%%0'):gsub('table: 0?x?%x+', '.-') .. '$'
  if y:find(pattern) then return {} end
  if #x == #y and #x < 100000 and sorted_bytes(x) == sorted_bytes(y) then return { 'keys in another order' } end
end

local function known_bug(a, b)
  if type(a) ~= 'string' or type(b) ~= 'string' then return nil end
  local causes = {}
  for _, mend in ipairs(MENDS) do
    if agree(a, b) then break end
    local a2, b2 = mend[2](a, b)
    if a2 ~= a or b2 ~= b then causes[#causes + 1] = mend[1] end
    a, b = a2, b2
  end
  local rest = agree(a, b)
  if not rest then return nil end
  table.move(rest, 1, #rest, #causes + 1, causes)
  return #causes > 0 and table.concat(causes, ' + ') or nil
end

-- Mismatches are collected, not asserted one by one, so a run reports how
-- many cases differ, by cause, and shows the first of each.
local function report(kind, mismatches)
  local by_cause, causes = {}, {}
  for _, m in ipairs(mismatches) do
    local cause = m.cause or 'NEW (no known bug explains it)'
    if not by_cause[cause] then by_cause[cause] = {}; causes[#causes + 1] = cause end
    table.insert(by_cause[cause], m.text)
  end
  table.sort(causes, function(x, y) return x:find('^NEW') ~= nil and y:find('^NEW') == nil end)
  local lines = { string.format('%d of the %s cases differ.', #mismatches, kind) }
  for _, cause in ipairs(causes) do
    lines[#lines + 1] = string.format('\n%s: %d, the first:\n%s', cause, #by_cause[cause], by_cause[cause][1])
  end
  return table.concat(lines, '\n')
end

local function mismatch(where, ref, nat)
  local text, a, b = difference(ref, nat)
  return { cause = known_bug(a, b), text = where .. '\n  ' .. text }
end

-----------------------------------------------------------------------
-- Random Lua values for arguments
-----------------------------------------------------------------------

local INTEGERS = { 0, 1, -1, 2, 7, 42, -17, 1000, H.MAXINT, H.MININT, H.MAXINT - 1,
  H.MININT + 1, H.int(2 ^ 53), H.int(2 ^ 53) + 1, -H.int(2 ^ 53), H.int(2 ^ 31), H.int(2 ^ 32) - 1, 999999999999999,
  1000000000000000 }
local FLOATS = { 0.5, -2.5, 1 / 3, 0.1, 0.1 + 0.2, math.pi, -0.0, 0.0, 3.0, -7.0, 2 ^ 53, 2 ^ 63, -2 ^ 63, 2 ^ 64,
  1e15, 1e15 - 1, 999999999999999.5, 123456789012345.6, 1e14, 1e16, 1e-4, 1e-5, 1e-7, 1e100, 1e300, -1e300,
  1.7976931348623157e308, 2.2250738585072014e-308, 1e-300, 10000000000000.5, 10000000000001.5,
  -- subnormals: %.14g prints their exact value, which has fewer real digits
  5e-324, 1e-320, -2.5e-315 }
-- Pieces strings are made of; the second list is not UTF-8.
local PIECES = { 'a', 'hello', ' ', 'x y', '"', '\\', '/', '\\u0041', '\n', '\r', '\t', '\b', '\f', '\0', '\1',
  '\27', '\31', '\127', 'é', '✓', '日本', '😀', '\239\191\191', '\244\143\191\191', '\194\128', '\223\191', 'data: x', '{"id":2}',
  'null', '1e3', '-0', 'true', ':', ',' }
local BAD_PIECES = { '\255', '\195', '\128', 'caf\233', '\237\160\128', '\192\175', '\244\144\128\128', '\248\136\128\128\128',
  '\226\156', '\254', '\195(' }

-- 5.4 draws a whole 64-bit integer; 5.3 refuses so wide an interval, so
-- there the two halves are drawn apart. (Asked here, before any case
-- seeds the generator: asking draws a number.)
local WHOLE_RANDOM = string.pack and pcall(math.random, H.MININT, H.MAXINT)

local function random_float()
  local r = math.random()
  if r < 0.5 then return pick(FLOATS) end
  if r < 0.8 then return (math.random() - 0.5) * 10.0 ^ math.random(-30, 30) end
  -- Any bit pattern: subnormals and extremes, but never NaN or infinity here.
  if not string.pack then
    -- 5.1 and LuaJIT: no bit patterns, but the same spread of exponents.
    return (math.random() - 0.5) * 10.0 ^ math.random(-320, 308)
  end
  local f
  repeat
    local bits = WHOLE_RANDOM and string.pack('<i8', math.random(H.MININT, H.MAXINT))
      or string.pack('<I4I4', math.random(0, 0xFFFFFFFF), math.random(0, 0xFFFFFFFF))
    f = string.unpack('<d', bits)
  until f == f and f ~= math.huge and f ~= -math.huge
  return f
end

local function random_string(dirty)
  local parts = {}
  for i = 1, math.random(0, 4) do
    local r = math.random()
    if dirty and r < 0.08 then parts[i] = pick(BAD_PIECES)
    elseif r < 0.6 then parts[i] = pick(PIECES)
    else
      -- Any scalar value, surrogates excluded (Lua's utf8.char would
      -- write them, and they are not UTF-8).
      local c = math.random(0, 0x10FFFF)
      if c >= 0xD800 and c <= 0xDFFF then c = c - 0x800 end
      parts[i] = H.utf8_char(c)
    end
  end
  return table.concat(parts)
end

-- An object key's text, as both encoders write it.
local function key_text(k)
  if H.is_integer(k) then return string.format('%d', k) end
  if type(k) == 'number' then
    if k == math.floor(k) and math.abs(k) < 1e15 then return string.format('%d', k) end
    return string.format('%.14g', k)
  end
  return tostring(k)
end

-- Infinite keys are fine: both modules write them "inf" and "-inf".
local function random_key(dirty)
  local r = math.random()
  if r < 0.6 then return random_string(dirty) end
  if r < 0.8 then return pick({ 1, 2, 3, 10, 0, -1, H.MAXINT, H.MININT }) end
  return pick({ 1.5, -0.25, 1e300, 2 ^ 63, 1e-300, math.huge, -math.huge, 1e15 + 0.5 })
end

-- A dirty value may hold what the native module refuses: non-UTF-8 text,
-- NaN, infinities, functions, coroutines, userdata, cycles, bad key types.
-- `budget` bounds the number of nodes so deep values stay small.
local gen_value
local function gen_table(depth, dirty, budget, ancestors)
  local t, keys = {}, {}
  ancestors[#ancestors + 1] = t
  local kind = math.random(6)
  if kind == 1 then
    -- empty
  elseif kind <= 3 then
    -- an array, sometimes with holes
    for i = 1, math.random(1, 6) do t[i] = gen_value(depth + 1, dirty, budget, ancestors) end
    if chance(0.3) then t[math.random(#t)] = nil end
  else
    -- an object, keys distinct by their text: keys 1 and "1" would both
    -- be written "1", and the reference orders such ties arbitrarily
    local texts = {}
    for _ = 1, math.random(1, 6) do
      local k = random_key(dirty)
      if not texts[key_text(k)] then
        texts[key_text(k)] = true
        keys[#keys + 1] = k
        t[k] = gen_value(depth + 1, dirty, budget, ancestors)
      end
    end
    if kind == 6 then
      -- an array part under the keys
      for i = 1, math.random(3) do t[i] = gen_value(depth + 1, dirty, budget, ancestors) end
    end
    if dirty and chance(0.1) then t[pick({ true, false, {} })] = 1 end
  end
  if #keys > 0 and chance(0.25) then
    -- trace.ordered: some of its keys first, and a key it does not have.
    local order = {}
    for _ = 1, math.random(#keys) do order[#order + 1] = pick(keys) end
    if chance(0.3) then order[#order + 1] = 'absent' end
    -- An integer key named by its text or as a float: the reference pins
    -- by value (t[k]), so "5" does not pin key 5 and 5.0 does.
    local k = pick(keys)
    if not dirty and H.is_integer(k) and chance(0.3) then order[#order + 1] = pick({ tostring(k), k + 0.0 }) end
    trace.ordered(t, order)
  end
  if dirty and chance(0.05) then t.loop = pick(ancestors) end
  ancestors[#ancestors] = nil
  return t
end

function gen_value(depth, dirty, budget, ancestors)
  budget.left = budget.left - 1
  if depth < budget.depth and budget.left > 0 and chance(0.45) then
    return gen_table(depth, dirty, budget, ancestors)
  end
  local r = math.random()
  if dirty and r < 0.04 then return pick({ 0 / 0, math.huge, -math.huge, print, coroutine.create(function() end), io.stdout }) end
  if r < 0.1 then return chance(0.5) end
  if r < 0.35 then return pick(INTEGERS) end
  if r < 0.55 then return random_float() end
  return random_string(dirty)
end

local function random_args()
  local dirty = chance(0.3)
  local budget = { left = 40, depth = math.random(1, 8) }
  local r = math.random()
  if r < 0.05 then return nil end
  if r < 0.15 then return gen_value(budget.depth, dirty, budget, {}) end -- a scalar
  return gen_table(0, dirty, budget, {})
end

-----------------------------------------------------------------------
-- What the native encoder refuses, predicted
-----------------------------------------------------------------------

-- trace's rule: an array has exactly the keys 1..n, n > 0.
local function is_array(t)
  local n, max = 0, 0
  for k in pairs(t) do
    if not H.is_integer(k) or k < 1 then return false end
    n, max = n + 1, math.max(max, k)
  end
  return n > 0 and n == max
end

-- nil when the native module accepts v; else what it refuses and the path,
-- as in "MCP: cannot encode WHAT at PATH". It walks as the encoder does:
-- key types first, array items in order, object keys in byte order with
-- the trace.ordered keys first, each value before its key's UTF-8 check.
local refusal
local function table_refusal(t, path, open)
  local keys = {}
  for k in pairs(t) do
    if type(k) ~= 'string' and type(k) ~= 'number' then return 'a ' .. type(k) .. ' key', path end
    keys[#keys + 1] = k
  end
  if is_array(t) then
    for i = 1, #keys do
      local what, where = refusal(t[i], path .. '[' .. i .. ']', open)
      if what then return what, where end
    end
    return nil
  end
  table.sort(keys, function(a, b) return key_text(a) < key_text(b) end)
  local mt = getmetatable(t)
  if mt and mt.__jsonorder then
    local front, taken = {}, {}
    for _, k in ipairs(mt.__jsonorder) do
      if t[k] ~= nil and not taken[k] then taken[k] = true; front[#front + 1] = k end
    end
    for _, k in ipairs(keys) do if not taken[k] then front[#front + 1] = k end end
    keys = front
  end
  for _, k in ipairs(keys) do
    local where = path .. '.' .. key_text(k)
    local what, deeper = refusal(t[k], where, open)
    if what then return what, deeper end
    if not H.is_utf8(key_text(k)) then return 'a key that is not UTF-8', where end
  end
end

function refusal(v, path, open)
  local tv = type(v)
  if tv == 'nil' or tv == 'boolean' then return nil end
  if tv == 'number' then
    if v ~= v then return 'NaN', path end
    if v == math.huge or v == -math.huge then return 'an infinite number', path end
    return nil
  end
  if tv == 'string' then
    if H.is_utf8(v) then return nil end
    return 'a string that is not UTF-8', path
  end
  if tv ~= 'table' then return 'a ' .. tv, path end
  if open[v] then return 'a table that contains itself', path end
  open[v] = true
  local what, where = table_refusal(v, path, open)
  open[v] = nil
  return what, where
end

-----------------------------------------------------------------------
-- Random server replies
-----------------------------------------------------------------------

local INIT = '{"id":1,"jsonrpc":"2.0","result":{"capabilities":{},"protocolVersion":"2025-06-18",'
  .. '"serverInfo":{"name":"fuzz","version":"1"}}}'
local NOTE = '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}'
local GARBAGE = { 'Starting server...', '{', '}', 'null', '[]', '[{"id":2}]', '{"id":2}', '{"id":2,"result":null}',
  'data:', 'data: ', 'event: message', 'id: 7', ': comment', '\r', '\t', '\v', '{"id":2,"error":null}', '42',
  '"text"', '{"id":2,"result":{"content":[{"type":"text","text":"early"}]}}', 'data: {"id":2,"result":{}}' }
-- Raw JSON for the reply's id: our call is id 2, and 2.0 is the same key
-- in Lua; the rest answer nothing.
local IDS = { '2', '2', '2', '2', '2', '2.0', '2e0', '20e-1', '"2"', '1', '3', '-2', '2.5', 'true', 'null', '[2]', '{"a":2}' }
-- Escapes trace.encode never writes, put in after encoding through markers.
local ESCAPES = { '\\u00e9', '\\u0000', '\\u001f', '\\/', '\\u20AC', '\\uFFFF', '\\ud83d\\ude00', '\\ud800', '\\udfff',
  '\\ud83dx', '\\ude00\\ud83d', '\\ud83d\\u0041' }

local function reply_string()
  local s = random_string(chance(0.3))
  if chance(0.15) then s = s .. '~ESC~' end
  return s
end

local function odd_value()
  return pick({ 'str', '', 0, 5, -1, 2.5, 1e300, 5e-324, true, false, {}, { 1, 2 }, { a = 1 }, { 'x' } })
end

local function random_block()
  if chance(0.08) then return odd_value() end
  local block = {}
  local r = math.random()
  if r < 0.5 then block.type = 'text'
  elseif r < 0.75 then block.type = pick({ 'image', 'audio', 'resource', 'resource_link' })
  elseif r < 0.85 then block.type = reply_string()
  elseif r < 0.95 then block.type = odd_value() end
  r = math.random()
  if r < 0.7 then block.text = reply_string() elseif r < 0.9 then block.text = odd_value() end
  if chance(0.2) then block.data, block.mimeType = 'iVBORw0KGgo=', 'image/png' end
  return block
end

local function random_result()
  if chance(0.07) then return odd_value() end
  local result = {}
  local r = math.random()
  if r < 0.8 then
    result.content = {}
    for i = 1, math.random(0, 4) do result.content[i] = random_block() end
  elseif r < 0.9 then
    result.content = odd_value()
  end
  if chance(0.3) then result.isError = pick({ true, true, false, 'true', 1 }) end
  if chance(0.2) then result.structuredContent = { value = reply_string(), n = random_float() } end
  return result
end

local function random_error()
  if chance(0.1) then return odd_value() end
  local err = {}
  local r = math.random()
  if r < 0.6 then err.code = pick({ -32602, -32000, -32601, 0 })
  elseif r < 0.9 then err.code = odd_value() end
  r = math.random()
  if r < 0.7 then err.message = reply_string() elseif r < 0.9 then err.message = odd_value() end
  if chance(0.2) then err.data = { detail = reply_string() } end
  return err
end

local function structured_reply()
  local body = {}
  local r = math.random()
  if r < 0.6 then body.result = random_result()
  elseif r < 0.8 then body.error = random_error()
  elseif r < 0.9 then body.result, body.error = random_result(), random_error() end
  local text = trace.encode(body)
  text = '{"id":' .. pick(IDS) .. ',"jsonrpc":"2.0"' .. (text == '{}' and '}' or ',' .. text:sub(2))
  return (text:gsub('~ESC~', function() return pick(ESCAPES) end))
end

local TOKENS = { '"', '\\', '{', '}', '[', ']', ',', ':', '\n', '\r', ' ', 'u', '0', '9', 'e', '-', '.', 'null',
  '\\u', '\\ud800', 'data: ', '\255', '\195', '\0' }

-- One random edit of the reply text.
local function mutate(text)
  local n = #text
  local at = math.random(0, n)
  local r = math.random(9)
  if r == 1 then -- flip a byte
    if n == 0 then return text end
    at = math.max(at, 1)
    return text:sub(1, at - 1) .. string.char(math.random(0, 255)) .. text:sub(at + 1)
  elseif r == 2 then -- insert a token JSON cares about
    return text:sub(1, at) .. pick(TOKENS) .. text:sub(at + 1)
  elseif r == 3 then -- delete a few bytes
    return text:sub(1, at) .. text:sub(at + math.random(3) + 1)
  elseif r == 4 then -- truncate
    return text:sub(1, at)
  end
  local lines = {}
  for line in text:gmatch('[^\n]*') do lines[#lines + 1] = line end
  local i = math.random(#lines)
  if r == 5 then -- duplicate a line somewhere
    table.insert(lines, math.random(#lines + 1), lines[i])
  elseif r == 6 then -- SSE framing
    for j, line in ipairs(lines) do
      lines[j] = 'event: message\n' .. pick({ 'data: ', 'data:', 'data:  ', 'data:\t' }) .. line
    end
  elseif r == 7 then -- a garbage line
    table.insert(lines, math.random(#lines + 1), pick(GARBAGE))
  elseif r == 8 then -- swap two lines
    local j = math.random(#lines)
    lines[i], lines[j] = lines[j], lines[i]
  else -- CRLF
    return (text:gsub('\n', '\r\n'))
  end
  return table.concat(lines, '\n')
end

local NONE = {}

-- The transport's answer: usually a reply text, sometimes a failure.
local function random_response()
  if chance(0.04) then
    -- NONE stands for nil, which a table constructor cannot hold.
    local function maybe(v) if v ~= NONE then return v end end
    return maybe(pick({ false, NONE })), maybe(pick({ random_string(true), string.rep('e', 399) .. 'é', NONE })),
      maybe(pick({ 7, 1.5, 'E\255', NONE, 404 }))
  end
  local lines = { INIT, structured_reply() }
  if chance(0.2) then table.insert(lines, math.random(3), NOTE) end
  local text = table.concat(lines, '\n') .. '\n'
  if chance(0.5) then
    for _ = 1, math.random(4) do text = mutate(text) end
  end
  return true, text, 200
end

-- A \u escape of a UTF-16 surrogate (maybe): the modules decode these
-- differently on purpose (README), so such a reply's text is not compared.
local function has_surrogate_escape(text)
  return type(text) == 'string' and text:find('\\u[dD][89a-fA-F]%x%x') ~= nil
end

-- The reference raised a Lua runtime error (indexing a number or a
-- boolean, concatenating a table) where the reply had an odd type; the
-- native module answers instead. Includes the README's "neither result nor
-- error" case.
-- Deliberate: native error text is valid UTF-8 (see "error text is made
-- valid UTF-8" below). Where the reference's text is not UTF-8 and the
-- native one is, they must agree once every run of non-ASCII bytes is
-- treated as one unknown character.
-- Lua 5.1's string.format copies a short %s argument with sprintf, which
-- stops at its first NUL byte: the reference's error text loses the rest
-- of a message with a NUL in it, where
-- the native module keeps every byte. No other runtime does this.
local CUTS_AT_NUL = #string.format('%s', 'a\0b') == 1
local function nul_cut(ref, nat)
  if not CUTS_AT_NUL or ref.ok ~= nat.ok or ref.n ~= nat.n or not same(ref.sent, nat.sent) then return false end
  local any = false
  for i = 1, ref.n - 1 do
    local a, b = ref.values[i], nat.values[i]
    if a ~= b then
      if type(a) ~= 'string' or type(b) ~= 'string' or not b:find('\0', 1, true) then return false end
      -- The reference's text is the native one with a piece cut out,
      -- starting at the first NUL (non-ASCII runs compared as lossy_utf8
      -- does, since both can happen in one message).
      a, b = a:gsub('[\128-\255]+', '?'), b:gsub('[\128-\255]+', '?')
      local nul = b:find('\0', 1, true)
      local rest = a:sub(nul)
      if a:sub(1, nul - 1) ~= b:sub(1, nul - 1) or b:sub(-#rest - 1 + 1) ~= rest and #rest > 0 then return false end
      any = true
    end
  end
  return any
end

local function lossy_utf8(ref, nat)
  if ref.ok ~= nat.ok or ref.n ~= nat.n or not same(ref.sent, nat.sent) then return false end
  local any = false
  for i = 1, ref.n - 1 do
    local a, b = ref.values[i], nat.values[i]
    if a ~= b then
      if type(a) ~= 'string' or type(b) ~= 'string' or H.is_utf8(a) or not H.is_utf8(b) then return false end
      -- (A table's address in the reference text is JSON in the native
      -- one, as table_address tolerates; then only validity is checked.)
      if not a:find('table: 0?x?%x') and a:gsub('[\128-\255]+', '?') ~= b:gsub('[\128-\255]+', '?') then
        return false
      end
      any = true
    end
  end
  return any
end

-- Deliberate: a float goes out in the shortest text that reads back as
-- the same double (README), where the reference writes %.14g. Outcomes
-- that differ only in numbers (outside strings), each the reference's
-- %.14g of the native one, differ there alone (the server echoes the
-- line, so the texts returned carry the numbers too).
local function g14(token)
  local n = tonumber(token)
  if not n then return token end
  if n == math.floor(n) and math.abs(n) < 1e15 then return string.format('%d', n) end
  return string.format('%.14g', n)
end
-- The text in pieces: each number outside a string is a piece of its own.
local function pieces(v)
  local out, i, n = {}, 1, #v
  local plain = {}
  local function flush()
    if #plain > 0 then out[#out + 1] = { text = table.concat(plain) } plain = {} end
  end
  while i <= n do
    local c = v:sub(i, i)
    local s, e = v:find('^%-?%d[%d%.eE%+%-]*', i)
    if c == '"' then
      local j = i + 1
      while j <= n and v:sub(j, j) ~= '"' do j = j + (v:sub(j, j) == '\\' and 2 or 1) end
      plain[#plain + 1] = v:sub(i, j)
      i = j + 1
    elseif s then
      flush()
      out[#out + 1] = { number = v:sub(s, e) }
      i = e + 1
    else
      plain[#plain + 1] = c
      i = i + 1
    end
  end
  flush()
  return out
end
local function floats_differ_alone(a, b)
  if type(a) ~= 'string' or type(b) ~= 'string' then return same(a, b) end
  if a == b then return true end
  local x, y = pieces(a), pieces(b)
  if #x ~= #y then return false end
  for i = 1, #x do
    if x[i].text ~= y[i].text then return false end
    if x[i].number and x[i].number ~= y[i].number and x[i].number ~= g14(y[i].number) then return false end
  end
  return true
end
local function float_text(ref, nat)
  if ref.ok ~= nat.ok or ref.n ~= nat.n or #ref.sent ~= #nat.sent or not same(ref.fields, nat.fields) then
    return false
  end
  for i = 1, #ref.sent do
    if not floats_differ_alone(ref.sent[i], nat.sent[i]) then return false end
  end
  for i = 1, ref.n - 1 do
    if not floats_differ_alone(ref.values[i], nat.values[i]) then return false end
  end
  return true
end

-- Lua's words for the reference's crashes, on every runtime: 5.3+ says
-- "attempt to index a nil value (local 'res')", 5.1 and LuaJIT "attempt
-- to index local 'res' (a nil value)"; 5.1 also refuses ipairs on a
-- number and %s of a table, which 5.4 accepts.
local CRASHES = {
  'attempt to index a %a+ value', "attempt to index %a+ '[^']*' %(a %a+ value%)",
  "invalid value %(.-%) in table for 'concat'", "invalid value %(%a+%) at index %d+ in table for 'concat'",
  "bad argument #%d to '%a+' %(%a+ expected, got %a+%)",
}
local function is_crash(err)
  for _, pattern in ipairs(CRASHES) do
    if err:find(pattern) then return true end
  end
  return false
end

local function reference_crashed(ref, nat)
  local err = ref.values[1]
  if ref.ok or type(err) ~= 'string' then return false end
  if not is_crash(err) then
    return false
  end
  if err:find("attempt to index a nil value %(local 'res'%)") or err:find("attempt to index local 'res' %(a nil value%)") then
    return same({ 'MCP tools/call echo failed: the reply has no result' }, nat.values)
  end
  return nat.ok or (type(nat.values[1]) == 'string' and nat.values[1]:find('^MCP ') ~= nil)
end

-- The reference printed a table with tostring ("table: 0x55..."); the
-- native module prints its JSON text there. The rest must be the same.
local function table_address(ref, nat)
  if ref.ok ~= nat.ok or ref.n ~= nat.n or not same(ref.sent, nat.sent) then return false end
  for i = 1, ref.n - 1 do
    local a, b = ref.values[i], nat.values[i]
    if a ~= b then
      local rest = type(a) == 'string' and type(b) == 'string' and a:find('table: 0?x?%x') and agree(a, b)
      if not rest or #rest > 0 then return false end
    end
  end
  return true
end

-----------------------------------------------------------------------

describe('fuzzing native against reference', function()
  it(ARG_CASES .. ' random argument values', function()
    local compared, predicted, floats, mismatches = 0, 0, 0, {}
    for i = 1, ARG_CASES do
      local seed = ARG_BASE + i
      math.randomseed(seed)
      local args = random_args()
      local where = string.format('argument case %d (math.randomseed(%d)): %s', i, seed, show(args):sub(1, 800))
      -- The server echoes our tools/call line back as the tool's text.
      local function respond(text)
        return true, INIT .. '\n{"id":2,"jsonrpc":"2.0","result":{"content":[{"type":"text","text":'
          .. trace.encode(text:match('([^\n]*)\n$') or '') .. '}]}}\n', 200
      end
      local nat = outcome(NAT, respond, args)
      local what, path = refusal(args, 'arguments', {})
      if what then
        -- Deliberate: refused with its path (exact unless a key on the path
        -- is not UTF-8, which the message shows with U+FFFD).
        predicted = predicted + 1
        local want = 'MCP: cannot encode ' .. what .. ' at ' .. path
        local prefix = 'MCP: cannot encode ' .. what .. ' at arguments'
        local got = nat.values[1]
        local good = not nat.ok and #nat.sent == 0 and type(got) == 'string'
          and (got == want or not H.is_utf8(path) and got:sub(1, #prefix) == prefix)
        if not good then
          mismatches[#mismatches + 1] = { text = where .. '\n  want native error ' .. quote(want)
            .. '\n  native ok=' .. tostring(nat.ok) .. ' ' .. show(got) .. ', sent ' .. #nat.sent .. ' text(s)' }
        end
      else
        compared = compared + 1
        local ref = outcome(REF, respond, args)
        if float_text(ref, nat) and not same(ref, nat) then
          floats = floats + 1
        elseif not same(ref, nat) then
          mismatches[#mismatches + 1] = mismatch(where, ref, nat)
        end
      end
    end
    if VERBOSE then
      print(string.format('arguments: %d compared (%d with floats in their shortest form), %d predicted refusals, %d differ',
        compared, floats, predicted, #mismatches))
    end
    assert.equal(ARG_CASES, compared + predicted)
    assert.equal(0, #mismatches, report('argument', mismatches))
    -- Both routes must be well used, or the generator has drifted.
    assert.is_true(compared > ARG_CASES / 2 and predicted > ARG_CASES / 10, compared .. ' / ' .. predicted)
  end)

  it(REPLY_CASES .. ' random server replies', function()
    local count = { same = 0, surrogate = 0, reference_crashed = 0, table_address = 0, lossy_utf8 = 0, nul_cut = 0 }
    local mismatches = {}
    for i = 1, REPLY_CASES do
      local seed = REPLY_BASE + i
      math.randomseed(seed)
      local response = table.pack(random_response())
      local function respond() return H.unpack(response, 1, 3) end
      local ref, nat = outcome(REF, respond), outcome(NAT, respond)
      local rule
      if same(ref, nat) then rule = 'same'
      elseif reference_crashed(ref, nat) then rule = 'reference_crashed'
      elseif has_surrogate_escape(response[2]) and ref.ok == nat.ok and same(ref.sent, nat.sent)
        and (nat.ok or type(nat.values[1]) == 'string') then rule = 'surrogate'
      elseif table_address(ref, nat) then rule = 'table_address'
      elseif lossy_utf8(ref, nat) then rule = 'lossy_utf8'
      elseif nul_cut(ref, nat) then rule = 'nul_cut'
      end
      if rule then
        count[rule] = count[rule] + 1
      else
        local where = string.format('reply case %d (math.randomseed(%d)): the transport returns %s, %s, %s',
          i, seed, show(response[1]), show(response[2]), show(response[3]))
        mismatches[#mismatches + 1] = mismatch(where, ref, nat)
      end
    end
    if VERBOSE then
      print(string.format('replies: %d same, %d reference crashed, %d surrogate escapes, %d table addresses, '
        .. '%d made valid UTF-8, %d differ', count.same, count.reference_crashed, count.surrogate, count.table_address,
        count.lossy_utf8, #mismatches))
    end
    assert.equal(REPLY_CASES, count.same + count.surrogate + count.reference_crashed + count.table_address
      + count.lossy_utf8 + count.nul_cut + #mismatches)
    assert.equal(0, #mismatches, report('reply', mismatches))
    assert.is_true(count.same > REPLY_CASES / 2, tostring(count.same))
  end)
end)

-----------------------------------------------------------------------
-- What the fuzzing found, each as its smallest case
-----------------------------------------------------------------------

local function replying(line)
  return function() return true, INIT .. '\n' .. line .. '\n', 200 end
end

local function both(respond, args)
  return outcome(REF, respond, args), outcome(NAT, respond, args)
end

-- Parity the fuzzing once found broken, each as its smallest case. The
-- reference's answer is the one asserted, since it is the contract.
describe('parity the fuzzing pinned', function()
  it('a subnormal float in arguments goes out in its shortest form, where the reference writes %.14g', function()
    local ref, nat = both(replying('{"id":2,"result":{}}'), { x = 5e-324 })
    assert.equal('{"id":2,"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"x":4.9406564584125e-324},"name":"echo"}}',
      ref.sent[1]:match('([^\n]*)\n$'))
    assert.equal('{"id":2,"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"x":5e-324},"name":"echo"}}',
      nat.sent[1]:match('([^\n]*)\n$'))
  end)

  it('a subnormal float in a reply is printed as tostring prints it', function()
    local ref, nat = both(replying('{"id":2,"result":{"content":[{"type":"text","text":1e-320}]}}'))
    assert.same({ '9.9998886718268e-321', false }, ref.values)
    assert.same(ref.values, nat.values)
  end)

  it('trace.ordered pins the keys it names by value, as t[k] finds them', function()
    -- "5" does not name key 5, and 5.0 does (t[5.0] is t[5]).
    for _, case in ipairs({
      { trace.ordered({ [5] = 1, ['4'] = 2 }, { '5' }), '{"4":2,"5":1}' },
      { trace.ordered({ ['5'] = 1, ['4'] = 2 }, { 5 }), '{"4":2,"5":1}' },
      { trace.ordered({ [5] = 1, ['4'] = 2 }, { 5.0 }), '{"5":1,"4":2}' },
    }) do
      local ref, nat = both(replying('{"id":2,"result":{}}'), case[1])
      assert.equal(case[2], ref.sent[1]:match('"arguments":(%b{})'))
      assert.equal(case[2], nat.sent[1]:match('"arguments":(%b{})'))
    end
  end)
end)

-- Deliberate (README): the text of an error the native module raises is
-- always valid UTF-8, since agents hand it to models and JSON encoders that
-- refuse anything else. Bytes that are not UTF-8 in a server's message, a
-- content type or a transport failure become U+FFFD; tool text itself
-- still comes through byte for byte.
describe('error text is made valid UTF-8', function()
  it('an error message that is not UTF-8', function()
    local ref, nat = both(replying('{"id":2,"error":{"code":1,"message":"caf\233"}}'))
    assert.same({ 'MCP tools/call echo failed: caf\233 (code 1)' }, ref.values)
    assert.same({ 'MCP tools/call echo failed: caf\239\191\189 (code 1)' }, nat.values)
  end)

  it('a content type that is not UTF-8', function()
    local ref, nat = both(replying('{"id":2,"result":{"content":[{"type":"\233"}]}}'))
    assert.same({ '[\233 content]', false }, ref.values)
    assert.same({ '[\239\191\189 content]', false }, nat.values)
  end)

  it('a transport failure that is not UTF-8, and the 400-byte cut inside a character', function()
    local ref, nat = both(function() return false, 'caf\233', 'E\255' end)
    assert.same({ 'MCP transport failed (E\255): caf\233' }, ref.values)
    assert.same({ 'MCP transport failed (E\239\191\189): caf\239\191\189' }, nat.values)
    ref, nat = both(function() return false, string.rep('x', 399) .. 'é', 1 end)
    assert.equal('\195', ref.values[1]:sub(-1))
    assert.equal('x\239\191\189', nat.values[1]:sub(-4))
  end)

  it('tool text that is not UTF-8 still comes through byte for byte', function()
    local ref, nat = both(replying('{"id":2,"result":{"content":[{"type":"text","text":"caf\233"}]}}'))
    assert.same({ 'caf\233', false }, ref.values)
    assert.same(ref.values, nat.values)
  end)
end)

-- Where the reference raises a Lua error on a reply of an odd shape, or
-- prints a table's address, the native module answers; the fuzzing
-- tolerates these (reference_crashed, table_address), and these cases pin
-- what each module does. The README's list of deliberate differences
-- names only the reply with neither result nor error.
describe('undocumented differences the fuzzing tolerates', function()
  for _, case in ipairs({
    { 'a result that is a number', '{"id":2,"result":5}', 'attempt to index a number value', { '(no content)', false } },
    { 'a result that is true', '{"id":2,"result":true}', 'attempt to index a boolean value', { '(no content)', false } },
    { 'a result that is false', '{"id":2,"result":false}', 'attempt to index a boolean value',
      { 'MCP tools/call echo failed: the reply has no result' } },
    { 'an error that is a number', '{"id":2,"error":5}', 'attempt to index a number value',
      { 'MCP tools/call echo failed: nil (code nil)' } },
    { 'content that is a number', '{"id":2,"result":{"content":5}}', 'attempt to index a number value', { '(no content)', false } },
    { 'a content block that is a number', '{"id":2,"result":{"content":[5]}}', 'attempt to index a number value',
      { '(no content)', false } },
    { 'a content block that is false', '{"id":2,"result":{"content":[false]}}', 'attempt to index a boolean value',
      { '(no content)', false } },
    { 'a text that is a table', '{"id":2,"result":{"content":[{"type":"text","text":[1]}]}}',
      "invalid value %(table%) at index 1 in table for 'concat'", { '[1]', false } },
    { 'a text that is true', '{"id":2,"result":{"content":[{"type":"text","text":true}]}}',
      "invalid value %(boolean%) at index 1 in table for 'concat'", { 'true', false } },
    { 'a table as an error message', '{"id":2,"error":{"message":{"a":1}}}', '^MCP tools/call echo failed: table: 0?x?%x+ %(code nil%)$',
      { 'MCP tools/call echo failed: {"a":1} (code nil)' } },
    { 'a table as a content type', '{"id":2,"result":{"content":[{"type":{}}]}}', '^%[table: 0?x?%x+ content%]$', { '[{} content]', false } },
  }) do
    it(case[1], function()
      local ref, nat = both(replying(case[2]))
      local said = tostring(ref.values[1])
      -- Where 5.1 crashes and 5.4 does not, any crash of the reference.
      assert.is_truthy(said:find(case[3]) or not ref.ok and is_crash(said), said)
      assert.same(case[4], nat.values)
    end)
  end

  it('a reply nested deeper than 512 levels is refused, naming the cause', function()
    -- The native decoder refuses such a line to keep the stack safe; the
    -- reference decodes it. The fuzzing never nests this deep.
    local deep = string.rep('[', 600) .. string.rep(']', 600)
    local ref, nat = both(replying('{"id":2,"result":{"deep":' .. deep .. ',"content":[{"type":"text","text":"deep"}]}}'))
    assert.same({ 'deep', false }, ref.values)
    assert.same({ 'MCP tools/call echo failed: the reply is nested deeper than 512 levels, which this client does not read' },
      nat.values)
  end)
end)

-----------------------------------------------------------------------
-- A reply's result and a notification's params: two decoders, one answer
-----------------------------------------------------------------------

-- The native module decodes a reply's `result` straight into Lua tables
-- from its text, and everything else (a notification's params) into a
-- tree first and tables from that. The same value text, put in both
-- places at the same depth, must come out as the same Lua value, down to
-- the number subtype; and where one is refused (bad JSON, too deep), so
-- is the other. The values are this file's reply corpus: results, errors
-- and odd values, with the escapes trace.encode never writes, half of
-- them mutated.
local DECODE_CASES, DECODE_BASE = 3000, 300000

-- Equal, with integers and floats told apart (1 and 1.0 are == in Lua).
local function identical(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) == 'number' then
    return a == b and (not math.type or math.type(a) == math.type(b))
  end
  if type(a) ~= 'table' then return a == b end
  for k, v in pairs(a) do if not identical(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

local function random_value_text()
  local r = math.random()
  local value = r < 0.5 and random_result() or r < 0.8 and random_error() or odd_value()
  local text = trace.encode(value):gsub('~ESC~', function() return pick(ESCAPES) end)
  if chance(0.5) then
    for _ = 1, math.random(3) do text = mutate(text) end
  end
  -- One line: a line break would make the rest another message.
  return (text:gsub('[\r\n]', ' '))
end

-- Lua values the module made from `value_text` as the params of a
-- notification and as the result of a reply, both wrapped in {"v": ...}.
local function both_decoders(value_text)
  local note
  local client = NAT.new({
    on_notification = function(msg) note = msg end,
    transport = function()
      return true, INIT .. '\n{"jsonrpc":"2.0","method":"notifications/x","params":{"v":' .. value_text .. '}}\n'
        .. '{"id":2,"jsonrpc":"2.0","result":{"v":' .. value_text .. '}}\n', 200
    end,
  })
  local ok, _, _, result = pcall(client.call, client, 'echo')
  return note and note.params, ok and result or nil
end

describe('a result decoded straight into Lua', function()
  it('is what the tree decoder makes of the same text, for ' .. DECODE_CASES .. ' values of the reply corpus', function()
    local delivered, refused, mismatches = 0, 0, {}
    for i = 1, DECODE_CASES do
      local seed = DECODE_BASE + i
      math.randomseed(seed)
      local text = random_value_text()
      local via_tree, direct = both_decoders(text)
      if via_tree == nil and direct == nil then
        refused = refused + 1
      elseif identical(via_tree, direct) then
        delivered = delivered + 1
      else
        mismatches[#mismatches + 1] = string.format('case %d (math.randomseed(%d)): %s\n  tree:   %s\n  direct: %s',
          i, seed, quote(text), show(via_tree), show(direct))
      end
    end
    assert.equal(0, #mismatches, table.concat(mismatches, '\n', 1, math.min(#mismatches, 5)))
    -- Both outcomes must be well used, or the corpus has drifted.
    assert.is_true(delivered > DECODE_CASES / 2 and refused > DECODE_CASES / 20, delivered .. ' / ' .. refused)
  end)

  it('at the depth limit and past it, as the tree decoder', function()
    -- The message and its {"v": ...} are 2 levels: 510 more are the most
    -- a message may hold (512).
    for _, levels in ipairs({ 509, 510, 511, 600 }) do
      local text = string.rep('[', levels) .. '1' .. string.rep(']', levels)
      local via_tree, direct = both_decoders(text)
      assert.equal(levels <= 510, via_tree ~= nil)
      assert.is_true(identical(via_tree, direct), tostring(levels))
    end
  end)

  it('with more members than a C function may have on the Lua stack', function()
    -- Lua 5.1 and LuaJIT give a C function at most 8000 stack slots.
    local items, pairs_ = {}, {}
    for i = 1, 20000 do
      items[i] = (i % 3 == 0) and 'null' or tostring(i)
      pairs_[i] = string.format('"k%d":%s', i % 15000, (i % 7 == 0) and 'null' or '[' .. i .. ',{"x":1.5}]')
    end
    local text = '{"a":[' .. table.concat(items, ',') .. '],"o":{' .. table.concat(pairs_, ',') .. '}}'
    local via_tree, direct = both_decoders(text)
    assert.equal(13334, #direct.v.a)
    assert.is_true(identical(via_tree, direct))
  end)
end)
