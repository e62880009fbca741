-- The agent loop at scale, at mount: search instead of every tool
-- (opts.search). Against a Lua server of 300 tools
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
