-- Every case runs through the reference module (lua/mcp.lua, or
-- $MCP_REFERENCE) and the native one, each with the same scripted fixture
-- transport, and must give the same bytes to the transport, the same
-- returns, the same errors, the same client fields after every step and
-- the same registry entries.
local H = require('helpers')
local trace = require('trace')

local function text_result(...)
  local content = {}
  for i, s in ipairs({ ... }) do content[i] = { type = 'text', text = s } end
  return { content = content }
end

local function call_returning(result, err)
  return { call = function() return result, err end }
end

local cases = {}
local function case(name, server, run, builtins)
  cases[#cases + 1] = { name = name, server = server, run = run, builtins = builtins }
end

-- discover and call ---------------------------------------------------

case('discover lists tools and records the handshake', {}, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

case('discover then call', {}, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
  c.step('call', function() return c.client:call('echo', { message = 'hello' }) end)
end)

case('call before discover re-handshakes every time', {}, function(c)
  c.new()
  c.step('call 1', function() return c.client:call('echo', { message = 'a' }) end)
  c.step('call 2', function() return c.client:call('echo', { message = 'b' }) end)
end)

case('several text blocks are joined with newlines', call_returning(text_result('one', 'two', 'three')), function(c)
  c.new()
  c.step('call', function() return c.client:call('x') end)
end)

-- The native module reads up to 16 text blocks straight off the Lua
-- stack and hands anything else to the general rules: both sides of
-- that line, and what it bails out on, give what the reference gives.
local seventeen = {}
for i = 1, 17 do seventeen[i] = 'line ' .. i end
case('seventeen text blocks are joined as three are', call_returning(text_result(table.unpack(seventeen))), function(c)
  c.new()
  c.step('call', function() return c.client:call('x') end)
end)

case('one empty text block gives (no content)', call_returning(text_result('')), function(c)
  c.new()
  c.step('call', function() return c.client:call('x') end)
end)

case('empty text blocks still join with newlines', call_returning(text_result('', '')), function(c)
  c.new()
  c.step('call', function() return c.client:call('x') end)
end)

case('a block that is not a table among text blocks is skipped', call_returning({ content = {
  'stray', { type = 'text', text = 'kept' } } }), function(c)
  c.new()
  c.step('call', function() return c.client:call('x') end)
end)

case('image content is named, not dropped', call_returning({ content = {
  { type = 'text', text = 'here:' }, { type = 'image', data = 'iVBORw0KGgo=', mimeType = 'image/png' } } }), function(c)
  c.new()
  c.step('call', function() return c.client:call('get-tiny-image') end)
end)

case('audio, resource links and embedded resources', call_returning({ content = {
  { type = 'audio', data = 'AAAA', mimeType = 'audio/wav' },
  { type = 'resource_link', uri = 'file:///x', name = 'x' },
  { type = 'resource', resource = { uri = 'file:///y', text = 'y' } },
  { type = 'text', text = 'done' } } }), function(c)
  c.new()
  c.step('call', function() return c.client:call('mixed') end)
end)

case('empty content gives (no content)', call_returning({ content = {} }), function(c)
  c.new()
  c.step('call', function() return c.client:call('quiet') end)
end)

case('missing content gives (no content)', call_returning({ structuredContent = { a = 1 } }), function(c)
  c.new()
  c.step('call', function() return c.client:call('quiet') end)
end)

case('structured content beside text', call_returning({
  content = { { type = 'text', text = '{"temperature":22.5}' } },
  structuredContent = { temperature = 22.5, conditions = 'sunny' } }), function(c)
  c.new()
  c.step('call', function() return c.client:call('get-structured-content', { location = 'Paris' }) end)
end)

case('isError true returns the text and true', call_returning({
  content = { { type = 'text', text = 'expected string, received undefined at message' } }, isError = true }), function(c)
  c.new()
  c.step('call', function() return c.client:call('echo', {}) end)
end)

case('isError that is not true is false', call_returning({ content = { { type = 'text', text = 'x' } }, isError = 'yes' }), function(c)
  c.new()
  c.step('call', function() return c.client:call('echo') end)
end)

case('a text block with a number as text', call_returning({ content = { { type = 'text', text = 42 }, { type = 'text', text = 2.5 } } }), function(c)
  c.new()
  c.step('call', function() return c.client:call('n') end)
end)

case('a block without a type is skipped', call_returning({ content = { { text = 'lost' }, { type = 'text', text = 'kept' } } }), function(c)
  c.new()
  c.step('call', function() return c.client:call('n') end)
end)

-- JSON-RPC errors and missing replies -----------------------------------

case('a JSON-RPC error on tools/call', call_returning(nil, { code = -32602, message = 'Unknown tool: nope' }), function(c)
  c.new()
  c.step('call', function() return c.client:call('nope') end)
end)

case('a JSON-RPC error without a message', call_returning(nil, { code = -32000 }), function(c)
  c.new()
  c.step('call', function() return c.client:call('nope') end)
end)

case('a JSON-RPC error with a string code', call_returning(nil, { code = 'E42', message = 'odd' }), function(c)
  c.new()
  c.step('call', function() return c.client:call('nope') end)
end)

case('a JSON-RPC error on initialize fails discover', {
  init = function() return nil end, drop = {},
  raw = function(r)
    if r.result == nil and r.id == 1 then
      r.error = { code = -32600, message = 'unsupported protocol version' }
    end
    return trace.encode(r)
  end }, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

case('a JSON-RPC error on tools/list', { raw = function(r)
  if r.result and r.result.tools then r.result = nil; r.error = { code = -32601, message = 'Method not found' } end
  return trace.encode(r)
end }, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

case('no reply to tools/call', { drop = { ['tools/call'] = true } }, function(c)
  c.new()
  c.step('call', function() return c.client:call('echo', { message = 'x' }) end)
end)

case('no reply to tools/list', { drop = { ['tools/list'] = true } }, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

case('no reply to initialize', { drop = { initialize = true } }, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

case('a reply under a string id does not answer a numeric id', { raw = function(r)
  if r.id == 2 then r.id = '2' end
  return trace.encode(r)
end }, function(c)
  c.new()
  c.step('call', function() return c.client:call('echo', { message = 'x' }) end)
end)

case('a batch array reply is not read as a reply', { raw = function(r) return '[' .. trace.encode(r) .. ']' end }, function(c)
  c.new()
  c.step('call', function() return c.client:call('echo', { message = 'x' }) end)
end)

case('a duplicate reply: the later one wins', { raw = function(r)
  if r.id == 2 then
    local first = { jsonrpc = '2.0', id = 2, result = text_result('first') }
    return trace.encode(first) .. '\n' .. trace.encode(r)
  end
  return trace.encode(r)
end }, function(c)
  c.new()
  c.step('call', function() return c.client:call('echo', { message = 'second' }) end)
end)

-- transport failures -------------------------------------------------------

case('transport failure with a code', { fail = function() return false, 'connection refused', 7 end }, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

case('transport failure with nothing said', { fail = function() return false end }, function(c)
  c.new()
  c.step('call', function() return c.client:call('echo', { message = 'x' }) end)
end)

case('transport failure text is cut at 400 bytes', { fail = function() return false, string.rep('e', 1000), 1 end }, function(c)
  c.new()
  c.step('call', function() return c.client:call('echo', {}) end)
end)

case('a transport that raises: the error passes through unchanged', {
  fail = function() error('fixture exploded', 0) end }, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

case('a transport that raises a table', { fail = function() error({ code = 'E' }) end }, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

case('a transport returning a number as its reply', { fail = function() return true, 12345, 200 end }, function(c)
  c.new()
  c.step('call', function() return c.client:call('echo') end)
end)

-- framing ----------------------------------------------------------------

case('out-of-order replies are matched by id', { reverse = true }, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
  c.step('call', function() return c.client:call('echo', { message = 'late' }) end)
end)

case('notifications before the initialize result', { before = {
  '{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}',
  '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}' } }, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

case('notifications between replies', { between = {
  '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}' } }, function(c)
  c.new()
  c.step('call', function() return c.client:call('echo', { message = 'x' }) end)
end)

case('SSE framing', { frame = 'sse' }, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
  c.step('call', function() return c.client:call('echo', { message = 'sse' }) end)
end)

case('SSE data lines without a space', { raw = function(r) return 'data:' .. trace.encode(r) end }, function(c)
  c.new()
  c.step('call', function() return c.client:call('echo', { message = 'x' }) end)
end)

case('banner and garbage lines are skipped', { before = {
  'Starting default (STDIO) server...', '{not json', '   ', 'null', '"a string"', '42' } }, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

case('CRLF line endings', { eol = '\r\n' }, function(c)
  c.new()
  c.step('call', function() return c.client:call('echo', { message = 'crlf' }) end)
end)

-- arguments on the wire --------------------------------------------------

case('nested tables in arguments', {}, function(c)
  c.new()
  c.step('call', function() return c.client:call('store', { user = { name = 'ada', tags = { 'a', 'b' }, meta = { z = 1, a = { deep = true } } } }) end)
end)

case('empty tables and nil arguments', {}, function(c)
  c.new()
  c.step('empty', function() return c.client:call('store', {}) end)
  c.step('nil', function() return c.client:call('store') end)
  c.step('false', function() return c.client:call('store', false) end)
  c.step('nested empty', function() return c.client:call('store', { list = {}, obj = {} }) end)
end)

case('arrays, sparse tables and mixed keys', {}, function(c)
  c.new()
  c.step('array', function() return c.client:call('store', { list = { 1, 2, 3 } }) end)
  c.step('sparse', function() return c.client:call('store', { list = { [1] = 'a', [3] = 'c' } }) end)
  c.step('mixed', function() return c.client:call('store', { list = { 'a', x = 1 } }) end)
  c.step('top-level array', function() return c.client:call('store', { 'x', 'y' }) end)
end)

-- Without an integer subtype (5.1, LuaJIT) the largest is 2^53, where
-- 2^63 would be a float past every integer the two modules agree on.
case('integers', {}, function(c)
  c.new()
  c.step('call', function() return c.client:call('store', {
    zero = 0, neg = -17, max = math.maxinteger or 2 ^ 53, min = H.MININT }) end)
end)

-- Floats whose %.14g is also their shortest form: the same bytes. (The
-- others go out with every digit, a deliberate difference pinned in
-- improvements_spec.)
case('integral and fractional floats', {}, function(c)
  c.new()
  c.step('call', function() return c.client:call('store', {
    three = 3.0, neg_zero = -0.0, big = 1e14, tenth = 0.1, huge = 1e300, negfrac = -2.5, quarter = 0.25 }) end)
end)

case('large numbers', {}, function(c)
  c.new()
  c.step('call', function() return c.client:call('store', { below = 99999999999999, negative = -123456789012 }) end)
end)

case('string escapes', {}, function(c)
  c.new()
  c.step('call', function() return c.client:call('echo', {
    message = 'quote " backslash \\ slash / nl \n cr \r tab \t bs \b ff \f nul \0 bell \7 esc \27 del \127 us \31' }) end)
end)

case('non-ASCII text both ways', { call = function(p)
  return text_result('Écho: ' .. p.arguments.message .. ' — ok ✓ 日本語 😀')
end }, function(c)
  c.new()
  c.step('call', function() return c.client:call('echo', { message = 'héllo wörld ✓ 😀' }) end)
end)

case('ordered tables keep their order', {}, function(c)
  c.new()
  c.step('call', function()
    return c.client:call('store', trace.ordered({ zeta = 1, alpha = 2, mid = { b = 1, a = 2 } }, { 'zeta', 'mid' }))
  end)
end)

case('numeric keys in an object', {}, function(c)
  c.new()
  c.step('call', function() return c.client:call('store', { [10] = 'ten', [2.5] = 'x', name = 'n' }) end)
end)

case('booleans and a number as a tool name', {}, function(c)
  c.new()
  c.step('call', function() return c.client:call(7, { yes = true, no = false }) end)
end)

-- Proxy tables: the reference encoder walks `pairs`, which honours
-- `__pairs`, and reads each value as t[k] (honouring `__index`), and an
-- array's length as #t (honouring `__len`).
local function proxy(contents, with_len)
  return setmetatable({}, {
    __pairs = function() return next, contents, nil end,
    __index = contents,
    __len = with_len and function() return #contents end or nil,
  })
end

case('arguments given as a proxy table are sent by their contents', {}, function(c)
  c.new()
  c.step('call', function()
    return c.client:call('dump', proxy({ message = 'through a proxy', nested = proxy({ n = 1 }) }))
  end)
end)

case('a proxy array is read through __len and __index', {}, function(c)
  c.new()
  c.step('call', function() return c.client:call('dump', { list = proxy({ 'a', 'b', 'c' }, true) }) end)
end)

case('a proxy array without __len is an empty array, as #t says', {}, function(c)
  c.new()
  c.step('call', function() return c.client:call('dump', { list = proxy({ 'a', 'b' }) }) end)
end)

case('an error raised by __pairs reaches the caller unchanged', {}, function(c)
  c.new()
  c.step('call', function()
    return c.client:call('dump', setmetatable({}, { __pairs = function() error({ code = 'proxy-broke' }) end }))
  end)
end)

-- client fields and options ----------------------------------------------

case('protocol_version from opts', {}, function(c)
  c.new({ protocol_version = '2025-03-26' })
  c.step('discover', function() return c.client:discover() end)
end)

case('a changed mcp.CLIENT_INFO is sent', {}, function(c)
  c.mcp.CLIENT_INFO = { name = 'my-agent', version = '9.9', extra = { 1, 2 } }
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

case('a changed mcp.PROTOCOL_VERSION is used by new', {}, function(c)
  c.mcp.PROTOCOL_VERSION = '2024-11-05'
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

case('a next_id set by the caller is continued', {}, function(c)
  c.new()
  c.client.next_id = 100
  c.step('call', function() return c.client:call('echo', { message = 'x' }) end)
end)

case('mcp.new errors and fields', {}, function(c)
  c.step('no opts', function() return c.mcp.new() end)
  c.step('empty opts', function() return c.mcp.new({}) end)
  c.step('false command', function() return c.mcp.new({ command = false }) end)
  c.step('fields', function()
    local client = c.mcp.new({ command = 'srv --flag', prefix = 'fs_', protocol_version = 'x' })
    return H.fields(client), type(client), getmetatable(client) ~= nil
  end)
end)

case('result values decode the same way', { init = function()
  return { protocolVersion = '2025-06-18', serverInfo = { name = 'n', version = '1', missing = nil, list = { 1, 2.5, 'x', true } } }
end, list = function()
  return { tools = { { name = 'a', description = 'caf\195\169', annotations = { readOnlyHint = true, weight = 1.5, count = 3 } } } }
end, raw = function(r)
  -- nulls inside objects and arrays, and escaped characters
  return (trace.encode(r):gsub('"weight":1.5', '"weight":1.5,"gone":null,"arr":[1,null,2],"esc":"\\u00e9\\n\\"\\/"'))
end }, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

case('a result without tools gives an empty list', { list = function() return { nextCursor = 'abc' } end }, function(c)
  c.new()
  c.step('discover', function() return c.client:discover() end)
end)

-- url together with transport ----------------------------------------------

case('url with a transport: the handshake rides the first batch only', {}, function(c)
  c.new({ url = 'http://127.0.0.1:1/mcp' })
  c.step('discover', function() return c.client:discover() end)
  c.step('call', function() return c.client:call('echo', { message = 'x' }) end)
end)

case('url with a transport: calls before discover keep handshaking', {}, function(c)
  c.new({ url = 'http://127.0.0.1:1/mcp' })
  c.step('call 1', function() return c.client:call('echo', { message = 'x' }) end)
  c.step('call 2', function() return c.client:call('echo', { message = 'y' }) end)
end)

-- mount ------------------------------------------------------------------

local function mount_case(name, server, opts_fn, extra)
  case(name, server, function(c)
    c.new(opts_fn and opts_fn.new)
    c.step('mount', function() return c.mcp.mount(c.registry, c.client, opts_fn and opts_fn.mount) end)
    if extra then extra(c) end
  end, opts_fn and opts_fn.builtins)
end

mount_case('mount with defaults')
mount_case('mount with a prefix from opts', nil, { mount = { prefix = 'ev_' } })
mount_case('mount with a prefix from the client', nil, { new = { prefix = 'cl_' } })
mount_case('mount: the opts prefix beats the client prefix', nil, { new = { prefix = 'cl_' }, mount = { prefix = 'op_' } })
mount_case('mount refuses a collision', nil, { builtins = { 'echo' } })
mount_case('mount quotes odd names in the collision message', { tools = { { name = 'a"b\n\r1' } } }, { builtins = { 'a"b\n\r1' } })
mount_case('mount with trust', nil, { mount = { trust = true } })
mount_case('mount: trust must be exactly true', nil, { mount = { trust = 'yes' } })

mount_case('mount folds whitespace and cuts long descriptions', { tools = {
  { name = 'long', description = string.rep('word ', 40) },
  { name = 'spaces', description = '  many\t\tkinds \n\n of\r\nspace  ' },
  { name = 'exact', description = string.rep('x', 120) },
  { name = 'over', description = string.rep('y', 121) },
  { name = 'none' },
} })

mount_case('mount maps each JSON Schema type', { tools = { { name = 'typed', inputSchema = {
  type = 'object',
  properties = {
    s = { type = 'string' }, n = { type = 'number' }, i = { type = 'integer' }, b = { type = 'boolean' },
    a = { type = 'array', items = { type = 'string' } }, o = { type = 'object' }, u = { description = 'untyped' },
    multi = { type = { 'string', 'null' } }, z = { type = 'null' },
  },
  required = { 'i', 's', 'missing' },
} } } })

mount_case('mount without a schema or without properties', { tools = {
  { name = 'bare' },
  { name = 'noprops', inputSchema = { type = 'object' } },
  { name = 'oddprops', inputSchema = { type = 'object', properties = 'x' } },
} })

mount_case('mount: run returns the text and raises the tool error', { call = function(p)
  if p.arguments.message == 'bad' then return { content = { { type = 'text', text = 'bad input' } }, isError = true } end
  return text_result('Echo: ' .. tostring(p.arguments.message))
end }, { mount = { prefix = 'x_' } }, function(c)
  c.step('run ok', function() return c.registry:get('x_echo').run({ message = 'hi' }) end)
  c.step('run error', function() return c.registry:get('x_echo').run({ message = 'bad' }) end)
  c.step('run nil args', function() return c.registry:get('x_add').run() end)
end)

case('mount uses client.tools when set and rediscovers when cleared', {}, function(c)
  c.new()
  c.client.tools = { { name = 'preset', description = 'set by hand' } }
  c.step('mount preset', function() return c.mcp.mount(c.registry, c.client, { prefix = 'p_' }) end)
  c.client.tools = nil
  c.step('mount rediscovers', function() return c.mcp.mount(c.registry, c.client, { prefix = 'q_' }) end)
end)

case('mount: a failing discover raises its error', { drop = { ['tools/list'] = true } }, function(c)
  c.new()
  c.step('mount', function() return c.mcp.mount(c.registry, c.client) end)
end)

case('mount: the registry raising passes through', {}, function(c)
  c.new()
  c.registry.add = function() error('registry is read-only', 0) end
  c.step('mount', function() return c.mcp.mount(c.registry, c.client) end)
end)

-- the reference's low-level methods ---------------------------------------

case('id counts up from next_id, which a caller may set', {}, function(c)
  c.new()
  c.step('id', function() return c.client:id() end)
  c.step('id', function() return c.client:id() end)
  c.client.next_id = 41
  c.step('id after next_id = 41', function() return c.client:id() end)
end)

-- The native module reads and writes an own number field on the raw
-- stack, keeping its kind: a float stays a float, an integer an integer.
case('id counts on from a fractional next_id, and from one set again', {}, function(c)
  c.new()
  c.client.next_id = 1.5
  c.step('id after next_id = 1.5', function() return c.client:id() end)
  c.step('id', function() return c.client:id() end)
  c.client.next_id = 2.0
  c.step('id after next_id = 2.0', function() return c.client:id() end)
  c.client.next_id = -3
  c.step('id after next_id = -3', function() return c.client:id() end)
end)

case('initialize_msg is the initialize request with a fresh id', {}, function(c)
  c.new({ protocol_version = '2025-03-26' })
  c.step('initialize_msg', function() return c.client:initialize_msg() end)
  c.mcp.CLIENT_INFO = { name = 'other', version = '2' }
  c.step('initialize_msg again', function() return c.client:initialize_msg() end)
end)

case('handshake is initialize and initialized, each time over stdio', {}, function(c)
  c.new()
  c.step('handshake', function() return c.client:handshake() end)
  c.step('handshake again', function() return c.client:handshake() end)
end)

case('exchange sends one batch and returns replies by id and the notifications', {
  between = { '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}' },
}, function(c)
  c.new()
  c.step('exchange', function()
    local messages = c.client:handshake()
    messages[#messages + 1] = { jsonrpc = '2.0', id = c.client:id(), method = 'tools/list', params = {} }
    messages[#messages + 1] = { jsonrpc = '2.0', id = c.client:id(), method = 'resources/list', params = {} }
    return c.client:exchange(messages)
  end)
end)

case('exchange: a failing transport raises as discover does', { fail = function() return false, 'refused', 7 end }, function(c)
  c.new()
  c.step('exchange', function()
    return c.client:exchange({ { jsonrpc = '2.0', id = c.client:id(), method = 'ping' } })
  end)
end)

case('exchange over a url batches through the fixture too; handshake stops once the session is ready', {}, function(c)
  c.new({ url = 'http://example.invalid/mcp' })
  c.step('handshake', function() return c.client:handshake() end)
  c.step('discover', function() return c.client:discover() end)
  c.step('handshake when ready', function() return c.client:handshake() end)
  c.step('exchange', function()
    return c.client:exchange({ { jsonrpc = '2.0', id = c.client:id(), method = 'tools/list' } })
  end)
end)

-------------------------------------------------------------------------

describe('native and reference modules agree', function()
  it('has at least 40 cases', function()
    assert.is_true(#cases >= 40, #cases .. ' cases')
  end)

  for _, cs in ipairs(cases) do
    it(cs.name, function()
      local want = H.record(H.reference, cs)
      local got = H.record(H.native, cs)
      assert.same(want, got)
      -- Errors are plain strings in both, never userdata.
      for _, step in ipairs(got.steps) do
        if not step.ok then assert.is_not.equal('userdata', step.error_type) end
      end
    end)
  end
end)

return cases
