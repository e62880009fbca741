-- The module as Lua sees it: how it loads, and what it adds to the
-- reference's surface.
local H = require('helpers')

describe('the native module', function()
  it('loads with require through package.cpath', function()
    local out, status = H.run_lua([[
      local mcp = require('mcp')
      print(mcp.PROTOCOL_VERSION, mcp.CLIENT_INFO.name, mcp.CLIENT_INFO.version, type(mcp.new), type(mcp.mount))
    ]])
    assert.equal(0, status)
    assert.equal('2025-06-18\tlua-agent\t0.1\tfunction\tfunction\n', out)
  end)

  it('says which module loaded: mcp.native and mcp._VERSION, which the reference lacks', function()
    local native, reference = H.native(), H.reference()
    assert.is_true(native.native)
    assert.is_truthy(native._VERSION:find('^lua%-mcp %d+%.%d+%.%d+$'), native._VERSION)
    assert.is_nil(reference.native)
    assert.is_nil(reference._VERSION)
  end)

  it('a module installed over one a running process has loaded leaves that process running', function()
    local dir = H.tmpname()
    os.execute('mkdir -p ' .. dir)
    local install = 'sh ' .. H.ROOT .. '/scripts/install-module.sh ' .. H.ROOT .. '/mcp.so ' .. dir .. '/mcp.so'
    assert.equal(0, select(2, H.command(install)))
    local ready = dir .. '/ready'
    local out_path = dir .. '/out'
    os.execute(string.format([[%s -e '
      package.cpath = "%s/?.so"
      local mcp = require("mcp")
      io.open("%s", "w"):close()
      local t = mcp.clock()
      while mcp.clock() - t < 1 do end
      print(mcp.json_encode({ still = "here" }), mcp.clock() > t)
    ' > %s 2>&1 &]], H.LUA, dir, ready, out_path))
    for _ = 1, 100 do
      if H.slurp(ready) then break end
      os.execute('sleep 0.05')
    end
    assert.equal(0, select(2, H.command(install)))
    os.execute('sleep 1.5')
    assert.equal('{"still":"here"}\ttrue\n', H.slurp(out_path))
    os.execute('rm -rf ' .. dir)
  end)

  it('make build and the LuaRocks build install the module by rename', function()
    for _, lua in ipairs({ '5.4', '5.1' }) do
      local plan = H.command('make -s -n -C ' .. H.ROOT .. ' build LUA=' .. lua)
      assert.is_truthy(plan:find('sh scripts/install%-module%.sh target/[^ ]*libmcp%.so mcp%.so'), plan)
      assert.is_nil(plan:find('cp [^\n]*mcp%.so'), plan)
    end
    local rock = H.slurp(H.ROOT .. '/scripts/rock-build.sh')
    assert.is_truthy(rock:find('install-module.sh "${CARGO_TARGET_DIR:-target}/$profile/libmcp.so" target/rock/mcp.so', 1, true))
  end)

  it('mcp.clock counts seconds on a monotonic clock', function()
    local mcp = H.native()
    local a = mcp.clock()
    os.execute('sleep 0.2')
    local b = mcp.clock()
    assert.is_number(a)
    assert.is_true(b - a >= 0.19 and b - a < 5, tostring(b - a))
  end)

  it('two loaded copies keep their clients apart', function()
    local one, two = H.native(), H.native()
    local c1 = one.new({ command = H.COUNTER })
    local c2 = two.new({ command = H.COUNTER })
    assert.equal('1', (c1:call('increment')))
    assert.equal('1', (c2:call('increment')))
    assert.equal('2', (c1:call('increment')))
    c1:close()
    c2:close()
  end)

  it('a registry without get or add is named in the error', function()
    local mcp = H.native()
    local client = mcp.new({ transport = H.server({}) })
    local ok, err = pcall(mcp.mount, { add = function() end }, client)
    assert.is_false(ok)
    assert.equal("mcp.mount: the registry (it needs get(name) and add(tool)) has no method 'get'", err)
    ok, err = pcall(mcp.mount, { get = function() end }, client)
    assert.is_false(ok)
    assert.equal("mcp.mount: the registry (it needs get(name) and add(tool)) has no method 'add'", err)
  end)

  it('a client table not made by mcp.new is refused with a clear error', function()
    local mcp = H.native()
    local fake = setmetatable({ command = 'x', next_id = 0 }, getmetatable(mcp.new({ command = 'x' })))
    local ok, err = pcall(fake.call, fake, 'echo', {})
    assert.is_false(ok)
    assert.equal('MCP: this client was not made by mcp.new', err)
  end)
end)

describe('the demo (make demo)', function()
  it('shows the count climbing natively and restarting through the pure module', function()
    local p = io.popen(H.LUA .. ' ' .. H.ROOT .. '/lua/examples/demo.lua 2>&1')
    local out = p:read('*a')
    p:close()
    assert.is_truthy(out:find('discovered and mounted 3 tools (server counter 1.0)', 1, true), out)
    local native = {}
    for n in out:gmatch('mcp_increment%([^)]*%) %-> (%d+)') do native[#native + 1] = n end
    assert.same({ '1', '2', '3', '13' }, native)
    local pure = {}
    for n in out:gmatch('  increment%(%) %-> (%d+)') do pure[#pure + 1] = n end
    assert.same({ '1', '1', '1' }, pure)
  end)
end)

describe('JSON types Lua cannot tell apart', function()
  local mcp = H.native()

  it('mcp.array, mcp.object and mcp.null say what an empty table or a nil cannot', function()
    assert.equal('{"empty":[],"list":[1,2],"map":{"1":"a","2":"b"},"none":null,"plain":{}}', mcp.json_encode({
      empty = mcp.array(), list = mcp.array({ 1, 2 }), map = mcp.object({ 'a', 'b' }), none = mcp.null, plain = {} }))
    -- dkjson's field works on a metatable of one's own.
    assert.equal('[]', mcp.json_encode(setmetatable({}, { __jsontype = 'array', __index = {} })))
    assert.has_error(function() mcp.array(setmetatable({}, {})) end,
      'mcp.array: the table has a metatable already; set __jsontype = "array" in it instead')
    assert.has_error(function() mcp.object('x') end, 'mcp.object: expected a table, got string')
  end)

  it('json_types keeps null and empty arrays on the way in, so they go back out as they came', function()
    local text = '{"a":null,"b":[],"c":[null,1],"d":{},"e":[[]]}'
    assert.equal('{"b":{},"c":[1],"d":{},"e":[{}]}', mcp.json_encode(mcp.json_decode(text)))
    local typed = mcp.json_decode(text, { json_types = true })
    assert.equal(mcp.null, typed.a)
    assert.equal(mcp.null, typed.c[1])
    assert.equal(text, mcp.json_encode(typed))
    assert.has_error(function() mcp.json_decode('[]', { json_types = 1 }) end,
      'mcp.json_decode: opts.json_types must be a boolean, got number')
  end)

  it('a client made with json_types returns results with their nulls and empty arrays', function()
    local function server(text)
      local lines = {}
      for line in text:gmatch('[^\n]+') do
        local id = line:match('"id":(%d+)')
        if line:find('"initialize"') then
          lines[#lines + 1] = '{"jsonrpc":"2.0","id":' .. id .. ',"result":{"protocolVersion":"2025-06-18",'
            .. '"capabilities":{},"serverInfo":{"name":"s","version":"1"}}}'
        elseif id then
          lines[#lines + 1] = '{"jsonrpc":"2.0","id":' .. id .. ',"result":{"content":[],'
            .. '"structuredContent":{"items":[],"next":null}}}'
        end
      end
      return true, table.concat(lines, '\n') .. '\n', 200
    end
    local typed = mcp.new({ transport = server, json_types = true })
    local _, _, result = typed:call('list', {})
    assert.equal('{"content":[],"structuredContent":{"items":[],"next":null}}', mcp.json_encode(result))
    local plain = mcp.new({ transport = server })
    _, _, result = plain:call('list', {})
    assert.equal('{"content":{},"structuredContent":{"items":{}}}', mcp.json_encode(result))
    assert.has_error(function() mcp.new({ command = 'x', json_types = 'yes' }) end,
      'mcp.new: opts.json_types must be a boolean, got string')
  end)
end)
