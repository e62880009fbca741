-- trace.lua - the JSON codec the reference module (lua/mcp.lua) requires.
--
-- It is written to the contract mcp.lua relies on, and the native module's
-- Rust codec (src/codec/) follows the same contract byte for byte. The
-- differential specs hold the two to it, so change both or neither.
--
-- ENCODING
--   * Object keys are sorted by byte order, so the same table always gives
--     the same text: fixtures can be compared as strings.
--   * A table is an array when its keys are exactly 1..n with n > 0. The
--     empty table is therefore `{}`, which is what MCP wants for `params`
--     and `capabilities`.
--   * Integers, and floats that are integral with |x| < 1e15, print as %d;
--     every other number as %.14g (Lua's own precision for tostring).
--     Lua 5.1 and LuaJIT have no integers: there an integral number in
--     [-2^63, 2^63) counts as one (as the native module's mlua reads it),
--     so 2^53 is sent as 9007199254740992.
--   * Strings escape `"` and `\`, use \b \f \n \r \t, and \u00XX for every
--     other control byte including DEL. Bytes >= 0x80 pass through.
--   * trace.ordered(t, order) pins the listed keys first, in that order.
--
-- DECODING never raises: it returns the value, or nil and a message. JSON
-- null becomes nil, so an object loses the key and an array closes up.
-- Numbers go through tonumber, so "10" is an integer and "1e3" a float.
-- Each \uXXXX escape is encoded to UTF-8 on its own; a surrogate pair
-- therefore becomes two 3-byte sequences (CESU-8), which the native codec
-- does not copy: it joins the pair into one real character.
local trace = {}

-- 5.3+ tells integers from floats; 5.1 and LuaJIT cannot, see above.
local is_integer = math.type and function(n) return math.type(n) == 'integer' end
  or function(n) return n == math.floor(n) and n >= -2 ^ 63 and n < 2 ^ 63 end

-- One code point as UTF-8 (utf8.char where there is one).
local utf8_char = utf8 and utf8.char or function(cp)
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64) end
  return string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
end

local escapes = {
  ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
  ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t',
}

local function encode_string(s)
  return '"' .. s:gsub('[%c"\\\127]', function(c)
    return escapes[c] or string.format('\\u%04x', c:byte())
  end) .. '"'
end

local function encode_number(n)
  if is_integer(n) then return string.format('%d', n) end
  if n == math.floor(n) and math.abs(n) < 1e15 then
    return string.format('%d', n)
  end
  return string.format('%.14g', n)
end

local function key_text(k)
  local tk = type(k)
  if tk == 'string' then return k end
  if tk == 'number' then return encode_number(k) end
  error('trace.encode: cannot use a ' .. tk .. ' as an object key', 0)
end

local function is_array(t)
  local n, max = 0, 0
  for k in pairs(t) do
    if type(k) ~= 'number' or not is_integer(k) or k < 1 then return false end
    n = n + 1
    if k > max then max = k end
  end
  return n > 0 and n == max
end

local encode_value

local function encode_table(t, out)
  if is_array(t) then
    out[#out + 1] = '['
    for i = 1, #t do
      if i > 1 then out[#out + 1] = ',' end
      encode_value(t[i], out)
    end
    out[#out + 1] = ']'
    return
  end
  local keys, texts, seen = {}, {}, {}
  for k in pairs(t) do
    texts[k] = key_text(k)
    keys[#keys + 1] = k
  end
  table.sort(keys, function(a, b) return texts[a] < texts[b] end)
  local mt = getmetatable(t)
  local order = type(mt) == 'table' and mt.__jsonorder or nil
  local ordered = {}
  if order then
    for _, k in ipairs(order) do
      if t[k] ~= nil and not seen[k] then
        seen[k] = true
        ordered[#ordered + 1] = k
      end
    end
  end
  for _, k in ipairs(keys) do
    if not seen[k] then ordered[#ordered + 1] = k end
  end
  out[#out + 1] = '{'
  for i, k in ipairs(ordered) do
    if i > 1 then out[#out + 1] = ',' end
    out[#out + 1] = encode_string(texts[k])
    out[#out + 1] = ':'
    encode_value(t[k], out)
  end
  out[#out + 1] = '}'
end

function encode_value(v, out)
  local tv = type(v)
  if tv == 'nil' then out[#out + 1] = 'null'
  elseif tv == 'boolean' then out[#out + 1] = tostring(v)
  elseif tv == 'number' then out[#out + 1] = encode_number(v)
  elseif tv == 'string' then out[#out + 1] = encode_string(v)
  elseif tv == 'table' then encode_table(v, out)
  else error('trace.encode: cannot encode a ' .. tv, 0) end
end

function trace.encode(v)
  local out = {}
  encode_value(v, out)
  return table.concat(out)
end

function trace.ordered(t, order)
  return setmetatable(t, { __jsonorder = order })
end

-- Decoding: a small recursive-descent reader over the string. Errors are
-- raised internally as tables and turned into `nil, message` at the edge.
local function fail(pos, what)
  error({ pos = pos, what = what })
end

local function skip(s, i)
  return s:find('[^ \t\r\n]', i) or #s + 1
end

local read_value

local function read_string(s, i)
  -- i points at the opening quote
  local parts, j = {}, i + 1
  while true do
    local k = s:find('["\\]', j)
    if not k then fail(i, 'unterminated string') end
    parts[#parts + 1] = s:sub(j, k - 1)
    if s:sub(k, k) == '"' then return table.concat(parts), k + 1 end
    local e = s:sub(k + 1, k + 1)
    local simple = ({ ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b',
      f = '\f', n = '\n', r = '\r', t = '\t' })[e]
    if simple then
      parts[#parts + 1] = simple
      j = k + 2
    elseif e == 'u' then
      local hex = s:sub(k + 2, k + 5)
      if not hex:match('^%x%x%x%x$') then fail(k, 'bad \\u escape') end
      parts[#parts + 1] = utf8_char(tonumber(hex, 16))
      j = k + 6
    else
      fail(k, 'bad escape')
    end
  end
end

local function read_number(s, i)
  local text = s:match('^-?%d+%.?%d*[eE]?[-+]?%d*', i)
  if not text or not text:match('^-?%d+%.?%d*$') and
      not text:match('^-?%d+%.?%d*[eE][-+]?%d+$') then
    fail(i, 'bad number')
  end
  local n = tonumber(text)
  if not n then fail(i, 'bad number') end
  return n, i + #text
end

function read_value(s, i)
  i = skip(s, i)
  local c = s:sub(i, i)
  if c == '{' then
    local t = {}
    i = skip(s, i + 1)
    if s:sub(i, i) == '}' then return t, i + 1 end
    while true do
      if s:sub(i, i) ~= '"' then fail(i, 'expected a key') end
      local k, v
      k, i = read_string(s, i)
      i = skip(s, i)
      if s:sub(i, i) ~= ':' then fail(i, "expected ':'") end
      v, i = read_value(s, i + 1)
      t[k] = v
      i = skip(s, i)
      local d = s:sub(i, i)
      if d == '}' then return t, i + 1 end
      if d ~= ',' then fail(i, "expected ',' or '}'") end
      i = skip(s, i + 1)
    end
  elseif c == '[' then
    local t = {}
    i = skip(s, i + 1)
    if s:sub(i, i) == ']' then return t, i + 1 end
    while true do
      local v
      v, i = read_value(s, i)
      if v ~= nil then t[#t + 1] = v end
      i = skip(s, i)
      local d = s:sub(i, i)
      if d == ']' then return t, i + 1 end
      if d ~= ',' then fail(i, "expected ',' or ']'") end
      i = i + 1
    end
  elseif c == '"' then
    return read_string(s, i)
  elseif c == '-' or c:match('%d') then
    return read_number(s, i)
  elseif s:sub(i, i + 3) == 'true' then return true, i + 4
  elseif s:sub(i, i + 4) == 'false' then return false, i + 5
  elseif s:sub(i, i + 3) == 'null' then return nil, i + 4
  end
  fail(i, 'unexpected ' .. (c == '' and 'end of text' or string.format('%q', c)))
end

function trace.decode(s)
  if type(s) ~= 'string' then return nil, 'trace.decode: expected a string' end
  local ok, v, i = pcall(read_value, s, 1)
  if not ok then
    if type(v) == 'table' then
      return nil, string.format('trace.decode: %s at byte %d', v.what, v.pos)
    end
    return nil, 'trace.decode: ' .. tostring(v)
  end
  i = skip(s, i)
  if i <= #s then
    return nil, string.format('trace.decode: trailing text at byte %d', i)
  end
  return v
end

return trace
