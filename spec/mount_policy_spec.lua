-- mcp.mount's tool policy: approve before each run, include and exclude
-- by name or `*` pattern, and what the server said of a tool (title,
-- annotations, icons, output schema) carried onto its registry entry.
-- Without them a mount is the reference's (spec/differential_spec.lua).
local H = require('helpers')

local mcp = H.native()

local TOOLS = {
  { name = 'read_file', title = 'Read a file', description = 'Reads',
    inputSchema = { type = 'object', properties = { path = { type = 'string' } } },
    annotations = { readOnlyHint = true },
    icons = { { src = 'https://example.com/read.png', mimeType = 'image/png' } },
    outputSchema = { type = 'object', properties = { text = { type = 'string' } } } },
  { name = 'write_file', description = 'Writes',
    inputSchema = { type = 'object', properties = { path = { type = 'string' } } },
    annotations = { destructiveHint = true } },
  { name = 'echo', description = 'Echoes back the input',
    inputSchema = { type = 'object', properties = { message = { type = 'string' } } } },
}

local function fixture_client()
  local transport = H.server({ tools = TOOLS })
  return mcp.new({ transport = transport })
end

local function names(list)
  local out = {}
  for i, n in ipairs(list) do out[i] = n end
  table.sort(out)
  return out
end

describe('mcp.mount policy', function()
  it('approve is asked before each run with the tool, its arguments, its annotations and the client', function()
    local registry, asked = H.registry(), {}
    local client = fixture_client()
    mcp.mount(registry, client, { prefix = 'fs_', approve = function(tool, args, annotations, c)
      asked[#asked + 1] = { tool.name, args.path or args.message, annotations and annotations.destructiveHint, c == client }
      if annotations and annotations.destructiveHint then return false, 'writing is not allowed here' end
      return true
    end })
    assert.equal('Echo: hi', registry:get('fs_echo').run({ message = 'hi' }))
    local ok, err = pcall(registry:get('fs_write_file').run, { path = '/etc/passwd' })
    assert.is_false(ok)
    assert.equal('writing is not allowed here', err)
    assert.same({ { 'echo', 'hi', nil, true }, { 'write_file', '/etc/passwd', true, true } }, asked)
    -- the host decides each run: the agent loop need not ask again
    assert.is_false(registry:get('fs_echo').requires_approval)
  end)

  it('a refusal without a reason names the tool', function()
    local registry = H.registry()
    mcp.mount(registry, fixture_client(), { approve = function() return false end })
    local ok, err = pcall(registry:get('echo').run, { message = 'hi' })
    assert.is_false(ok)
    assert.equal('refused: the host did not approve echo', err)
    -- anything but true refuses
    local other = H.registry()
    mcp.mount(other, fixture_client(), { approve = function() return 'yes' end })
    ok, err = pcall(other:get('echo').run, { message = 'hi' })
    assert.is_false(ok)
    assert.equal('refused: the host did not approve echo', err)
  end)

  it('include and exclude take names and * patterns, matched against the server\'s names', function()
    local only = H.registry()
    assert.same({ 'x_read_file', 'x_write_file' }, names(mcp.mount(only, fixture_client(), { prefix = 'x_', include = { '*_file' } })))
    local without = H.registry()
    assert.same({ 'echo', 'read_file' }, names(mcp.mount(without, fixture_client(), { exclude = { 'write_*' } })))
    local both = H.registry()
    assert.same({ 'read_file' }, names(mcp.mount(both, fixture_client(), { include = { '*_file', 'echo' }, exclude = { 'write_file', 'echo' } })))
  end)

  it('a pattern of many stars matches in linear time: twelve against a 60-byte name, two thousand against any', function()
    -- In a process of its own: the exponential matcher never returned.
    local out, status = H.run_lua([[
      local mcp = require('mcp')
      local c = mcp.new({ transport = function() error('not called') end })
      c.tools = { { name = ('a'):rep(60), inputSchema = {} }, { name = ('ab'):rep(30), inputSchema = {} } }
      local registry = { tools = {} }
      function registry:get(n) return self.tools[n] end
      function registry:add(t) self.tools[t.name] = t end
      local t0 = os.clock()
      local mounted = mcp.mount(registry, c, { exclude = { ('*a'):rep(12) .. '*b', ('a*'):rep(2000) .. 'c' } })
      print(#mounted, mounted[1], os.clock() - t0)
    ]])
    assert.equal(0, status, out)
    local count, name, seconds = out:match('^(%d+)\t(%S+)\t(%S+)')
    assert.equal('1', count, out)
    assert.equal(('a'):rep(60), name)
    assert.is_true(tonumber(seconds) < 5, out)
  end)

  it('approve judges a tool by what the client last heard of it, when it runs', function()
    local asked = {}
    local function approve(tool, _, annotations)
      asked[#asked + 1] = annotations and annotations.destructiveHint and 'destructive' or 'read-only'
      if annotations and annotations.destructiveHint then return false, tool.name .. ' is destructive now' end
      return true
    end
    -- Without watch: the server re-lists `grow` as destructive once it ran.
    local client = mcp.new({ command = H.faulty('catalog') })
    local registry = H.registry()
    mcp.mount(registry, client, { approve = approve })
    assert.equal('grown', registry:get('grow').run({}))
    -- the list_changed behind the reply has been read once the ping is answered
    client:ping()
    local ok, err = pcall(registry:get('grow').run, {})
    assert.is_false(ok)
    assert.equal('grow is destructive now', err)
    assert.same({ 'read-only', 'destructive' }, asked)
    client:close()
    -- With watch: the host's own discover after the change remounts.
    local watched = mcp.new({ command = H.faulty('catalog') })
    local again = H.registry()
    function again:remove(name) self.tools[name] = nil end
    mcp.mount(again, watched, { approve = approve, watch = true })
    assert.equal('grown', (watched:call('grow', {})))
    watched:ping()
    watched:discover()
    assert.same({ destructiveHint = true }, again:get('grow').annotations)
    assert.is_truthy(again:get('extra'))
    watched:close()
  end)

  it('carries the title, annotations, icons and output schema the server sent, and nothing it did not', function()
    local registry = H.registry()
    mcp.mount(registry, fixture_client(), { trust = true })
    local read = registry:get('read_file')
    assert.equal('Read a file', read.title)
    assert.same({ readOnlyHint = true }, read.annotations)
    assert.same({ { src = 'https://example.com/read.png', mimeType = 'image/png' } }, read.icons)
    assert.same({ type = 'object', properties = { text = { type = 'string' } } }, read.output_schema)
    assert.is_false(read.requires_approval)
    local echo = registry:get('echo')
    assert.is_nil(echo.title)
    assert.is_nil(echo.annotations)
    assert.is_nil(echo.output_schema)
    assert.is_nil(echo.icons)
    -- without approve, trust decides as in the reference
    local untrusted = H.registry()
    mcp.mount(untrusted, fixture_client())
    assert.is_true(untrusted:get('echo').requires_approval)
  end)

  it('refuses options of the wrong kind', function()
    for _, case in ipairs({
      { { approve = true }, 'mcp.mount: opts.approve must be a function' },
      { { include = 'echo' }, 'mcp.mount: opts.include must be a list of tool names or patterns' },
      { { exclude = { 1 } }, 'mcp.mount: opts.exclude must be a list of tool names or patterns' },
    }) do
      local ok, err = pcall(mcp.mount, H.registry(), fixture_client(), case[1])
      assert.is_false(ok)
      assert.equal(case[2], err)
    end
  end)

  it('mount_all passes the policy to every server', function()
    local registry = H.registry()
    local mounted, failed = mcp.mount_all(registry, { a = fixture_client(), b = fixture_client() },
      { include = { 'echo' }, approve = function() return false, 'no' end })
    assert.same({}, failed)
    assert.same({ 'a_echo', 'b_echo' }, names(mounted))
    local ok, err = pcall(registry:get('a_echo').run, { message = 'x' })
    assert.is_false(ok)
    assert.equal('no', err)
  end)
end)
