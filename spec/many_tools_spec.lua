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

  it('watch keeps the index to the server\'s list', function()
    local registry = H.registry()
    mcp.mount(registry, many, { search = true, watch = true })
    assert.same({}, names(decoded_run(registry, 'mcp_search_tools', { query = 'teleport' })))
    registry:get('mcp_call_tool').run({ name = 'add_tool', arguments = { name = 'teleport_cargo' } })
    -- The list is listed again (and the index follows) before the next call.
    registry:get('mcp_call_tool').run({ name = 'get_invoice' })
    assert.same({ 'teleport_cargo' }, names(decoded_run(registry, 'mcp_search_tools', { query = 'teleport' })))
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
