-- The agent loop at scale, at mount: search instead of every tool
-- (opts.search) and caps on what a tool hands the model (opts.max_output).
-- Against a Lua server of 300 tools
-- (spec/servers/many_tools.lua), server-everything and the counter,
-- mounted into one registry.
local H = require('helpers')

local mcp = H.native()
local MANY = { H.LUA, H.ROOT .. '/spec/servers/many_tools.lua' }
local COUNTER = { H.LUA, H.ROOT .. '/lua/servers/counter.lua' }

local function decoded_run(registry, name, args)
  return mcp.json_decode(registry:get(name).run(args))
end

local function names(found)
  local out = {}
  for _, tool in ipairs(found.tools) do out[#out + 1] = tool.name end
  return out
end

describe('mount with search = true', function()
  local many, counter
  before_each(function()
    many = mcp.new({ command = MANY })
    counter = mcp.new({ command = COUNTER })
  end)
  after_each(function()
    many:close()
    counter:close()
  end)

  it('two entries stand for every tool of every client mounted so, each under its mounted name', function()
    local registry = H.registry()
    local from_many = mcp.mount(registry, many, { search = true, prefix = 'm_' })
    local from_counter = mcp.mount(registry, counter, { search = true })
    assert.equal(304, #from_many)
    assert.same({ 'get', 'increment', 'whoami' }, (function() table.sort(from_counter) return from_counter end)())
    assert.same({ 'mcp_search_tools', 'mcp_call_tool' }, registry.order)
    local found = decoded_run(registry, 'mcp_search_tools', { query = 'delete a hotel booking', limit = 3 })
    assert.same({ 'm_delete_hotel_booking', 'm_get_hotel_booking', 'm_list_hotel_booking' }, names(found))
    assert.equal('Which hotel booking', found.tools[1].input_schema.properties.hotel_booking_id.description)
    assert.equal('3 of 307 tools. Run one with mcp_call_tool {name, arguments}.', found.note)
    assert.same({ 'increment' }, names(decoded_run(registry, 'mcp_search_tools', { query = 'increment', limit = 1 })))
    assert.equal('delete_hotel_booking {"hotel_booking_id":"h1"}',
      registry:get('mcp_call_tool').run({ name = 'm_delete_hotel_booking', arguments = '{"hotel_booking_id":"h1"}' }))
    assert.equal('1', registry:get('mcp_call_tool').run({ name = 'increment', arguments = {} }))
  end)

  it('errors are worded for the model: an unknown name with the closest, bad arguments, no query', function()
    local registry = H.registry()
    mcp.mount(registry, many, { search = true })
    local call = registry:get('mcp_call_tool').run
    assert.has_error(function() call({ name = 'delete_hotel_bookings' }) end,
      'no tool named "delete_hotel_bookings"; search first with mcp_search_tools and use a name it lists (closest:'
        .. ' "delete_hotel_booking", "create_hotel_booking", "get_hotel_booking")')
    assert.has_error(function() call({ name = 'get_invoice', arguments = '[1,' }) end,
      'mcp_call_tool: arguments must be a JSON object, as the tool\'s input_schema describes')
    assert.has_error(function() registry:get('mcp_search_tools').run({ query = '  ' }) end,
      'mcp_search_tools needs a query: words for what you want done')
    local none = decoded_run(registry, 'mcp_search_tools', { query = 'zebra' })
    assert.same({ {}, 'No tool of the 304 matched those words; try others (a verb, the thing it acts on).' },
      { none.tools, none.note })
  end)

  it('include, exclude and approve hold per real tool; the call entry asks approval unless every mount decides', function()
    local registry = H.registry()
    local seen = {}
    mcp.mount(registry, many, { search = true, include = { '*_invoice' }, exclude = { 'delete_*' },
      approve = function(tool, args, annotations)
        seen[#seen + 1] = tool.name
        return tool.name ~= 'share_invoice', 'sharing needs a person'
      end })
    assert.is_false(registry:get('mcp_call_tool').requires_approval)
    local found = decoded_run(registry, 'mcp_search_tools', { query = 'invoice', limit = 50 })
    assert.equal(14, #found.tools)
    assert.equal('get_invoice {}', registry:get('mcp_call_tool').run({ name = 'get_invoice' }))
    assert.has_error(function() registry:get('mcp_call_tool').run({ name = 'share_invoice' }) end,
      'sharing needs a person')
    assert.same({ 'get_invoice', 'share_invoice' }, seen)
    mcp.mount(registry, counter, { search = true })
    assert.is_true(registry:get('mcp_call_tool').requires_approval)
  end)

  it('server-everything behind search: its sum tool found by what it does, called with its schema\'s arguments', function()
    local everything = mcp.new({ command = H.everything_argv() })
    local registry = H.registry()
    mcp.mount(registry, everything, { search = true, prefix = 'ev_', trust = true })
    local found = decoded_run(registry, 'mcp_search_tools', { query = 'sum of two numbers', limit = 1 })
    assert.same({ 'ev_get-sum' }, names(found))
    assert.same({ 'a', 'b' }, found.tools[1].input_schema.required)
    assert.equal('The sum of 2 and 3 is 5.', registry:get('mcp_call_tool').run({ name = 'ev_get-sum', arguments = { a = 2, b = 3 } }))
    everything:close()
  end)

  it('mount_all with search = true: every server behind the one pair, each tool under its server\'s prefix', function()
    local registry = H.registry()
    local mounted, failed = mcp.mount_all(registry, { many = many, counter = counter }, { search = true })
    assert.same({}, failed)
    assert.same({ 'mcp_search_tools', 'mcp_call_tool' }, registry.order)
    assert.same({ 'counter_increment' }, names(decoded_run(registry, 'mcp_search_tools', { query = 'increment', limit = 1 })))
    assert.equal(307, #mounted)
  end)

  it('a name already in the index is a collision, as in the registry', function()
    local registry = H.registry()
    mcp.mount(registry, counter, { search = true })
    local other = mcp.new({ command = COUNTER })
    assert.has_error(function() mcp.mount(registry, other, { search = true }) end)
    other:close()
    assert.has_error(function() mcp.mount(H.registry(), counter, { search = 'yes' }) end,
      'mcp.mount: opts.search must be a boolean')
  end)

  it('a refused mount changes nothing: a chunk still calls the tool mounted first', function()
    local registry = H.registry()
    mcp.mount(registry, counter, { code = true, trust = true })
    counter:call('increment', {})
    local other = mcp.new({ command = COUNTER })
    assert.has_error(function() mcp.mount(registry, other, { code = true, trust = true }) end,
      'mcp.mount: "get" already exists in the registry. Pass a prefix to namespace this server\'s tools.')
    -- The first counter's count, not the refused one's.
    assert.equal('{"printed":"","returned":["1"]}', registry:get('mcp_run_lua').run({ code = 'return tools.get({})' }))
    other:close()
  end)

  it('watch keeps the index to the server\'s list', function()
    local registry = H.registry()
    mcp.mount(registry, many, { search = true, watch = true })
    assert.same({}, names(decoded_run(registry, 'mcp_search_tools', { query = 'teleport' })))
    registry:get('mcp_call_tool').run({ name = 'add_tool', arguments = { name = 'teleport_cargo' } })
    -- The list is listed again (and the index follows) before the next
    -- call after the server said it changed, which may come a call late.
    local found
    for _ = 1, 50 do
      registry:get('mcp_call_tool').run({ name = 'get_invoice' })
      found = names(decoded_run(registry, 'mcp_search_tools', { query = 'teleport' }))
      if #found > 0 then break end
    end
    assert.same({ 'teleport_cargo' }, found)
  end)
end)

describe('mount with max_output', function()
  local many
  before_each(function() many = mcp.new({ command = MANY }) end)
  after_each(function() many:close() end)

  it('a 10 MB text reaches the model as head and tail within the cap, the whole paged through mcp_read_output', function()
    local registry = H.registry()
    mcp.mount(registry, many, { max_output = 4096, include = { 'big_text' } })
    assert.same({ 'mcp_read_output', 'big_text' }, registry.order)
    local text = registry:get('big_text').run({ bytes = 10000000 })
    assert.is_true(#text <= 4096, #text)
    local cut_from, cut_to = text:match('%(bytes (%d+) to (%d+)%); the whole is output out%-1: read on with mcp_read_output')
    assert.truthy(cut_from, text)
    assert.equal('line of text, numbered for paging: 1\n', text:sub(1, 37))
    local page = registry:get('mcp_read_output').run({ id = 'out-1', offset = tonumber(cut_from), length = 1000 })
    local body, next_offset = page:match('^(.*)\n%[bytes %d+ to %d+ of 10000000; next page: offset = (%d+)%]$')
    assert.truthy(body, page)
    assert.equal(tonumber(cut_from) + #body, tonumber(next_offset))
    local last = registry:get('mcp_read_output').run({ id = 'out-1', offset = 9999990 })
    assert.truthy(last:find('of 10000000: the end]', 1, true), last)
    assert.has_error(function() registry:get('mcp_read_output').run({ id = 'out-2' }) end,
      'mcp_read_output: no output "out-2" is kept (ids are out-N, as a cut output names them; an output goes when'
        .. ' its client closes, or when newer ones need its room)')
  end)

  it('structured content past the cap is cut as its JSON text; an image is named with its size, or left out', function()
    local registry = H.registry()
    mcp.mount(registry, many, { max_output = 1024, include = { 'big_structured', 'picture' } })
    local structured = registry:get('big_structured').run({ items = 2000 })
    assert.is_true(#structured <= 1024)
    assert.truthy(structured:find('the whole is output out-1', 1, true))
    local whole = registry:get('mcp_read_output').run({ id = 'out-1', length = 1024 })
    assert.equal('{"items":[{"id":1', whole:sub(1, 17))
    assert.equal('[image content: image/png, 99 bytes]\na picture', registry:get('picture').run({ bytes = 100 }))
    assert.equal('[image content: image/png, 49999 bytes: over the output cap, left out]\na picture',
      registry:get('picture').run({ bytes = 50000 }))
  end)

  it('outputs are private files that go when their client closes; search and caps go together', function()
    local registry = H.registry()
    local other = mcp.new({ command = MANY })
    mcp.mount(registry, other, { max_output = 1024, search = true, prefix = 'o_' })
    local text = registry:get('mcp_call_tool').run({ name = 'o_big_text', arguments = { bytes = 100000 } })
    assert.truthy(text:find('the whole is output out-1', 1, true), text)
    assert.is_true(#text <= 1024)
    if not H.WINDOWS then
      local tmp = os.getenv('TMPDIR')
      if tmp == nil or tmp:sub(1, 1) ~= '/' then tmp = '/tmp' end
      local p = io.popen('find ' .. tmp .. ' -maxdepth 2 -path "*lua-mcp-output-*/out-1" -perm 600'
        .. ' -newer ' .. H.ROOT .. '/spec/many_tools_spec.lua 2>/dev/null')
      local found = p:read('*a')
      p:close()
      assert.truthy(found:find('/out-1', 1, true), 'kept as a 0600 file')
    end
    other:close()
    assert.has_error(function() registry:get('mcp_read_output').run({ id = 'out-1' }) end)
    assert.has_error(function() mcp.mount(H.registry(), many, { max_output = 10 }) end,
      'mcp.mount: opts.max_output must be a whole number of bytes, 512 or more')
  end)
end)

describe('mount with code = true', function()
  local many, counter, registry, run, approved
  before_each(function()
    many = mcp.new({ command = MANY })
    counter = mcp.new({ command = COUNTER })
    registry, approved = H.registry(), {}
    mcp.mount(registry, many, { code = true, prefix = 'm_', include = { 'get_invoice', 'big_structured' } })
    mcp.mount(registry, counter, { code = true, prefix = 'c_',
      approve = function(tool) approved[#approved + 1] = tool.name return tool.name ~= 'whoami', 'not that one' end })
    run = registry:get('mcp_run_lua').run
  end)
  after_each(function()
    many:close()
    counter:close()
  end)

  it('what the host has is not the chunk\'s: its globals, the module, a syntax error', function()
    assert.equal('{"printed":"","returned":[null,null,null]}', run({ code = 'return mcp, registry, _G.counter' }))
    local ok, err = pcall(run, { code = 'return 1 +' })
    assert.is_false(ok)
    assert.truthy(err:find('^mcp_run_lua: chunk:1: '), err)
  end)

  it('a chunk calls tools of two servers as functions and gets data back, prints and returns as JSON', function()
    assert.same({ 'mcp_run_lua', 'm_get_invoice', 'm_big_structured', 'c_get', 'c_increment', 'c_whoami' }, registry.order)
    local reply = mcp.json_decode(run({ code = [[
      local n = tools.c_increment({ by = 2 })
      local items = tools.m_big_structured({ items = 3 }).items
      print('counter is', n)
      return tools.m_get_invoice({ invoice_id = 'i7' }), #items, items[2].label
    ]] }))
    assert.same({ 'counter is\t2\n', { 'get_invoice {"invoice_id":"i7"}', 3, 'item 2' } }, { reply.printed, reply.returned })
    assert.same({ 'increment' }, approved)
    assert.has_error(function() run({ code = 'return tools.c_whoami({})' }) end, 'mcp_run_lua: not that one')
    assert.is_true(registry:get('mcp_run_lua').requires_approval)
  end)

  -- Each escape, and what ends it: the host goes on after every one.
  local function NOT_HERE(name)
    return name .. ' is not in the sandbox (no io, os, debug, package, require, load or collectgarbage)'
  end
  local escapes = {
    { 'return os.getenv("HOME")', 'mcp_run_lua: chunk:1: ' .. NOT_HERE('os') },
    { 'return io.open("/etc/passwd")', 'mcp_run_lua: chunk:1: ' .. NOT_HERE('io') },
    { 'return require("os")', 'mcp_run_lua: chunk:1: ' .. NOT_HERE('require') },
    { 'return load("return 1")()', 'mcp_run_lua: chunk:1: ' .. NOT_HERE('load') },
    { 'return loadstring("return 1")()', 'mcp_run_lua: chunk:1: ' .. NOT_HERE('loadstring') },
    { 'return dofile("/etc/passwd")', 'mcp_run_lua: chunk:1: ' .. NOT_HERE('dofile') },
    { 'return string.dump(print)', 'mcp_run_lua: chunk:1: string.dump is not in the sandbox (chunks are text only)' },
    { 'return debug.getregistry()', 'mcp_run_lua: chunk:1: ' .. NOT_HERE('debug') },
    { 'return package.loaded', 'mcp_run_lua: chunk:1: ' .. NOT_HERE('package') },
    { 'return collectgarbage("count")', 'mcp_run_lua: chunk:1: ' .. NOT_HERE('collectgarbage') },
    { 'getmetatable("").__index = {}', 'mcp_run_lua: chunk:1: attempt to index a boolean value' },
    { 'while true do end', 'mcp_run_lua: the chunk ran past 50000000 instructions (a loop that does not end?)' },
    { 'local co = coroutine.wrap(function() while true do end end) co()',
      'mcp_run_lua: the chunk ran past 50000000 instructions (a loop that does not end?)' },
    { 'local t = {} for i = 1, 1e9 do t[i] = i end', 'mcp_run_lua: the chunk used past its memory bound' },
    { 'return string.rep("x", 1e9)', 'mcp_run_lua: the chunk used past its memory bound' },
    { 'return ("x"):rep(1e6):gsub("x", ("y"):rep(1000))', 'mcp_run_lua: the chunk used past its memory bound' },
    -- The runtime's own stack limit may come first (LuaJIT's).
    { 'local function f() return f() + 1 end return f()',
      { 'mcp_run_lua: the chunk used past its memory bound', 'mcp_run_lua: the chunk recursed too deep (stack overflow)' } },
    { 'error({})', 'mcp_run_lua: the chunk raised a table, not a message' },
    -- LuaJIT reports the bound's error inside the message's making as its own.
    { 'error(setmetatable({}, { __tostring = function() while true do end end }))',
      { 'mcp_run_lua: the chunk ran past 50000000 instructions (a loop that does not end?)',
        'mcp_run_lua: error in error handling' } },
    { 'for i = 1, 60 do tools.c_get({}) end', 'mcp_run_lua: tools.c_get: past 50 tool calls in one run' },
    { 'return tools.c_get', 'mcp_run_lua: the chunk returned what is not data (a function cannot be passed between'
      .. ' the chunk and a tool)' },
    { 'for i = 1, 1e6 do print(("x"):rep(100)) end', 'mcp_run_lua: print: the chunk printed past 65536 bytes' },
    { '\27Lua', 'mcp_run_lua: attempt to load a binary chunk (mode is \'t\')' },
  }
  for _, case in ipairs(escapes) do
    it('an escape ends with what stopped it: ' .. case[1]:sub(1, 60), function()
      local ok, err = pcall(run, { code = case[1] })
      -- What was printed before the end is repeated up to 2000 bytes.
      err = tostring(err):gsub('\n%(printed before it: [x\n]+ %.%.%.%)$', '')
      local expected = type(case[2]) == 'table' and case[2] or { case[2] }
      assert.is_false(ok)
      assert.truthy(err == expected[1] or err == expected[2], err)
      -- The host is unharmed: its own globals, and a tool call after.
      assert.is_table(io)
      assert.is_table(os)
      assert.equal('0', counter:call('get', {}))
    end)
  end
end)
