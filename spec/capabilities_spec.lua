-- What a client declares: opts.capabilities merged over what opts.handlers
-- imply, opts.extensions as capabilities.extensions, client:roots_changed,
-- and the refusals word for word. (The TypeScript SDK v2 peer reading them,
-- and a URL-mode elicitation it sends once they allow it, are in
-- spec/eras_peers_spec.lua.)
local H = require('helpers')

local mcp = H.native()

local function declared(opts)
  opts.command = H.faulty('asker')
  local client = mcp.new(opts)
  local caps = mcp.json_decode((client:call('caps')))
  client:close()
  return caps
end

describe('declared capabilities', function()
  it('opts.capabilities are merged over what the handlers imply, per capability', function()
    local caps = declared({
      handlers = {
        ['elicitation/create'] = function() return { action = 'decline' } end,
        ['roots/list'] = function() return { roots = {} } end,
      },
      capabilities = { elicitation = { form = {}, url = {} }, sampling = { tools = {} }, roots = { listChanged = true } },
    })
    assert.same({ elicitation = { form = {}, url = {} }, sampling = { tools = {} }, roots = { listChanged = true } }, caps)
  end)

  it('opts.extensions go in capabilities.extensions, beside any given there', function()
    local caps = declared({
      capabilities = { extensions = { ['io.example/a'] = { on = true } } },
      extensions = { ['io.modelcontextprotocol/ui'] = { mimeTypes = { 'text/html;profile=mcp-app' } } },
    })
    assert.same({ extensions = {
      ['io.example/a'] = { on = true },
      ['io.modelcontextprotocol/ui'] = { mimeTypes = { 'text/html;profile=mcp-app' } },
    } }, caps)
  end)

  it('with neither, what the handlers imply and nothing else', function()
    assert.same({ sampling = {} }, declared({ handlers = { ['sampling/createMessage'] = function() end } }))
    assert.same({}, declared({ capabilities = {}, extensions = {} }))
  end)

  it('refuses what is not a table of named entries', function()
    for _, case in ipairs({
      { { capabilities = 'all' }, 'mcp.new: opts.capabilities must be a table of named entries' },
      { { capabilities = { 1, 2 } }, 'mcp.new: opts.capabilities must be a table of named entries' },
      { { extensions = true }, 'mcp.new: opts.extensions must be a table of named entries' },
    }) do
      case[1].command = H.faulty('asker')
      local ok, err = pcall(mcp.new, case[1])
      assert.is_false(ok)
      assert.equal(case[2], err)
    end
  end)

  it('client:roots_changed tells the server its roots changed', function()
    local log = H.tmpname()
    local client = mcp.new({ command = H.faulty('asker'), env = { METHOD_LOG = log },
      capabilities = { roots = { listChanged = true } },
      handlers = { ['roots/list'] = function() return { roots = {} } end } })
    client:call('echo', { message = 'x' })
    client:roots_changed()
    client:call('echo', { message = 'y' })
    client:close()
    local methods = {}
    for line in io.lines(log) do methods[#methods + 1] = line end
    os.remove(log)
    -- the notification went between the two calls
    local at
    for i, method in ipairs(methods) do if method == 'notifications/roots/list_changed' then at = i end end
    assert.is_truthy(at, table.concat(methods, ' '))
    assert.equal('tools/call', methods[at - 1])
    assert.equal('tools/call', methods[at + 1])
  end)
end)
