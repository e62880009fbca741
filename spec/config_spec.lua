-- Config files in the two shapes hosts write (mcpServers; VS Code's
-- servers + inputs), read from real files, connected and mounted: a stdio
-- counter and server-everything over HTTP in one config.
local H = require('helpers')

local mcp = H.native()

local function write(text)
  local path = H.tmpname() .. '.json'
  local f = assert(io.open(path, 'w'))
  f:write(text)
  f:close()
  return path
end

local function names_of(list)
  local out = {}
  for _, n in ipairs(list) do out[#out + 1] = n end
  table.sort(out)
  return out
end

describe('config files', function()
  local url, stop
  setup(function() url, stop = H.everything_http() end)
  teardown(function() stop() end)

  it('an mcpServers file with a stdio counter and server-everything over HTTP mounts both, prefixed by name #peer', function()
    local port = url:match(':(%d+)/')
    local path = write(string.format([[{
      "mcpServers": {
        "counter": { "command": %q, "args": [%q], "autoApprove": ["get"] },
        "everything": { "type": "streamable-http", "url": "http://127.0.0.1:${EVERYTHING_PORT}/mcp",
                        "headers": { "X-Trace": "${TRACE:-none}" }, "alwaysAllow": ["echo"], "timeout": 20 },
        "old": { "command": "does-not-matter", "disabled": true }
      }
    }]], H.LUA, H.ROOT .. '/lua/servers/counter.lua'))
    local specs = mcp.load_config(path, { env = { EVERYTHING_PORT = port } })
    os.remove(path)
    assert.same({ H.LUA, H.ROOT .. '/lua/servers/counter.lua' }, specs.counter.command)
    assert.equal('http://127.0.0.1:' .. port .. '/mcp', specs.everything.url)
    assert.same({ ['X-Trace'] = 'none' }, specs.everything.headers)
    assert.equal(20, specs.everything.timeout)
    assert.is_true(specs.old.disabled)
    local clients = mcp.connect(specs)
    assert.is_nil(clients.old)
    local registry = H.registry()
    local mounted, failed = mcp.mount_all(registry, clients)
    assert.same({}, failed)
    assert.is_truthy(registry:get('counter_increment'))
    assert.is_truthy(registry:get('everything_echo'))
    assert.is_false(registry:get('counter_get').requires_approval)
    assert.is_true(registry:get('counter_increment').requires_approval)
    assert.is_false(registry:get('everything_echo').requires_approval)
    assert.is_true(registry:get('everything_get-sum').requires_approval)
    assert.equal('Echo: hi', registry:get('everything_echo').run({ message = 'hi' }))
    assert.equal('1', registry:get('counter_increment').run({}))
    assert.equal(#registry.order, #mounted)
    for _, c in pairs(clients) do c:close() end
  end)

  it("a VS Code file: inputs come from opts.input, ${workspaceFolder} and an envFile are read, comments and trailing commas pass", function()
    local dir = H.tmpname()
    os.execute('mkdir -p ' .. dir)
    local env_file = assert(io.open(dir .. '/.env', 'w'))
    env_file:write('# for the counter\nFROM_FILE="from file"\nexport ALSO=also\n')
    env_file:close()
    local path = write(string.format([[{
      // servers for this workspace
      "inputs": [ { "type": "promptString", "id": "token", "description": "API token", "password": true } ],
      "servers": {
        "counter": {
          "type": "stdio",
          "command": %q,
          "args": ["${workspaceFolder}/lua/servers/counter.lua"],
          "envFile": "%s/.env",
          "env": { "TOKEN": "${input:token}", "ALSO": "overridden", }, /* env wins over envFile */
        },
      },
    }]], H.LUA, dir))
    local asked = {}
    local specs = mcp.load_config(path, { workspace = H.ROOT, input = function(id, spec)
      asked[#asked + 1] = id .. ':' .. spec.description
      return 'secret-' .. id
    end })
    assert.same({ 'token:API token' }, asked)
    assert.same({ H.LUA, H.ROOT .. '/lua/servers/counter.lua' }, specs.counter.command)
    assert.same({ TOKEN = 'secret-token', FROM_FILE = 'from file', ALSO = 'overridden' }, specs.counter.env)
    local registry = H.registry()
    local mounted, failed = mcp.mount_all(registry, mcp.connect(specs), { prefix = function(name) return name .. '.' end })
    assert.same({}, failed)
    assert.same({ 'counter.get', 'counter.increment', 'counter.whoami' }, names_of(mounted))
    local ok, err = pcall(mcp.load_config, path, { workspace = H.ROOT })
    assert.is_false(ok)
    assert.equal('mcp.load_config: server counter.env.TOKEN uses ${input:token}; '
      .. 'pass opts.input = function(id, spec) return value end to supply it', err)
    os.remove(path)
    os.execute('rm -rf ' .. dir)
  end)

  it('a server that does not start is reported by name, and the others are mounted', function()
    local specs = mcp.load_config({ mcpServers = {
      broken = { command = H.ROOT .. '/no-such-server' },
      counter = { command = H.LUA, args = { H.ROOT .. '/lua/servers/counter.lua' } },
    } })
    -- nothing starts until used: connecting to a missing program is fine
    local clients = mcp.connect(specs)
    local registry = H.registry()
    local mounted, failed = mcp.mount_all(registry, clients)
    assert.same({ 'counter_get', 'counter_increment', 'counter_whoami' }, names_of(mounted))
    assert.is_truthy(failed.broken:find('^MCP transport failed %(127%)'), failed.broken)
    clients.counter:close()
  end)

  it('a login given to connect goes to the HTTP servers only (a stdio server would refuse it)', function()
    local specs = mcp.load_config({ mcpServers = {
      counter = { command = H.LUA, args = { H.ROOT .. '/lua/servers/counter.lua' } },
      remote = { url = 'http://127.0.0.1:9/mcp' },
    } })
    local clients = mcp.connect(specs, { auth = { store = H.tmpname() } })
    assert.equal('1', clients.counter:call('increment', {}))
    local ok, err = pcall(clients.remote.discover, clients.remote)
    assert.is_false(ok)
    assert.is_truthy(err:find('^MCP transport failed %(7%)'), err)
    clients.counter:close()
  end)

  it('variables: defaults, env:, userHome; an undefined one names the server and the field', function()
    local specs = mcp.load_config({ mcpServers = { s = {
      command = '${userHome}/bin/${NAME:-server}', args = { '${env:ARG}', '${env:MISSING:-fallback}' },
    } } }, { env = { ARG = 'given' } })
    assert.same({ os.getenv('HOME') .. '/bin/server', 'given', 'fallback' }, specs.s.command)
    local ok, err = pcall(mcp.load_config, { mcpServers = { s = { url = 'http://${HOST}/mcp' } } }, { env = {} })
    assert.is_false(ok)
    assert.equal('mcp.load_config: server s.url: ${HOST} is not set and has no default', err)
    ok, err = pcall(mcp.load_config, { mcpServers = { s = { command = '${workspaceFolder}/x' } } })
    assert.equal('mcp.load_config: server s.command uses ${workspaceFolder}; pass opts.workspace', err)
    -- `:-` covers an empty variable too, as in the shells
    specs = mcp.load_config({ mcpServers = { s = { command = '${EMPTY:-x}' } } }, { env = { EMPTY = '' } })
    assert.same({ 'x' }, specs.s.command)
    -- a disabled server is not expanded: nothing is looked up or asked for it
    specs = mcp.load_config({ mcpServers = { off = { command = '${UNSET}', args = { '${input:never}' }, disabled = true } } },
      { env = {}, input = function() error('asked for a disabled server') end })
    assert.same({ name = 'off', disabled = true, auto_approve = {} }, specs.off)
    -- Windsurf's serverUrl
    specs = mcp.load_config({ mcpServers = { w = { serverUrl = 'https://example.com/mcp' } } })
    assert.equal('https://example.com/mcp', specs.w.url)
  end)

  it("a relative cwd and envFile are both read from the config file's directory, not the caller's", function()
    local dir = H.tmpname()
    os.execute('mkdir -p ' .. dir .. '/work')
    local env_file = assert(io.open(dir .. '/work/vars.env', 'w'))
    env_file:write('WHERE=beside the config\n')
    env_file:close()
    local path = dir .. '/mcp.json'
    local f = assert(io.open(path, 'w'))
    f:write(string.format('{"mcpServers": {"s": {"command": %q, "args": [%q, "plain"], "cwd": "work", "envFile": "work/vars.env"}}}',
      H.LUA, H.ROOT .. '/spec/servers/faulty.lua'))
    f:close()
    -- opts.workspace names ${workspaceFolder}; it is not where relative paths start
    local specs = mcp.load_config(path, { workspace = H.ROOT })
    assert.equal(dir .. '/work', specs.s.cwd)
    assert.same({ WHERE = 'beside the config' }, specs.s.env)
    local client = mcp.connect(specs).s
    assert.equal(dir .. '/work', (client:call('cwd')))
    client:close()
    os.execute('rm -rf ' .. dir)
  end)

  -- Left to the spawn, a missing cwd blames the command: "MCP transport
  -- failed (127): MCP server produced no output (CMD): No such file or
  -- directory (os error 2)".
  it('a cwd that is not there fails in load_config, naming the file, the server and the directory', function()
    local dir = H.tmpname()
    os.execute('mkdir -p ' .. dir)
    local file = assert(io.open(dir .. '/file', 'w'))
    file:close()
    local function config_with_cwd(cwd)
      local path = dir .. '/mcp.json'
      local f = assert(io.open(path, 'w'))
      f:write(string.format('{"mcpServers": {"ok": {"command": "true"}, "s": {"command": "true", "cwd": %q}}}', cwd))
      f:close()
      return path
    end
    local path = config_with_cwd('work')
    assert.has.error(function() mcp.load_config(path) end, 'mcp.load_config: server s.cwd in ' .. path
      .. ': there is no directory ' .. dir .. '/work (cwd "work", read from the config file\'s directory)')
    config_with_cwd('/no/such/dir')
    assert.has.error(function() mcp.load_config(path) end,
      'mcp.load_config: server s.cwd in ' .. path .. ': there is no directory /no/such/dir')
    -- a file is not a directory either
    config_with_cwd('file')
    assert.has.error(function() mcp.load_config(path) end, 'mcp.load_config: server s.cwd in ' .. path
      .. ': there is no directory ' .. dir .. '/file (cwd "file", read from the config file\'s directory)')
    -- a table has no file: opts.workspace is where a relative cwd starts
    assert.has.error(function()
      mcp.load_config({ mcpServers = { s = { command = 'true', cwd = 'work' } } }, { workspace = dir })
    end, 'mcp.load_config: server s.cwd: there is no directory ' .. dir .. '/work (cwd "work", read from opts.workspace)')
    os.execute('rm -rf ' .. dir)
  end)

  it("a project's file over the user's: its servers replace theirs by name, disable them, and each says its file", function()
    local user = write([[{"mcpServers": {
      "counter": {"command": "lua5.4", "args": ["user.lua"]},
      "notes": {"command": "lua5.4", "args": ["notes.lua"]},
      "kept": {"command": "lua5.4", "args": ["kept.lua"]} }}]])
    local project = write([[{"mcpServers": {
      "counter": {"command": "lua5.4", "args": ["project.lua"]},
      "notes": {"disabled": true} }}]])
    local specs = mcp.load_config({ user, H.tmpname() .. '-not-there.json', project })
    assert.same({ 'lua5.4', 'project.lua' }, specs.counter.command)
    assert.equal(project, specs.counter.config_file)
    assert.is_true(specs.notes.disabled)
    assert.equal(project, specs.notes.config_file)
    assert.same({ 'lua5.4', 'kept.lua' }, specs.kept.command)
    assert.equal(user, specs.kept.config_file)
    local clients = mcp.connect(specs)
    assert.is_nil(clients.notes)
    for _, client in pairs(clients) do client:close() end
    os.remove(user)
    os.remove(project)
    local ok, err = pcall(mcp.load_config, { user, 42 })
    assert.is_false(ok)
    assert.equal('mcp.load_config: the configs must be paths or tables, got number at 2', err)
  end)

  it('type "sse" asks for the 2024-11-05 HTTP+SSE transport; a command with type "sse" is refused', function()
    local specs = mcp.load_config({ mcpServers = { legacy = { type = 'sse', url = 'http://127.0.0.1:1/sse' },
                                                   modern = { type = 'http', url = 'http://127.0.0.1:1/mcp' } } })
    assert.same({ 'sse', nil }, { specs.legacy.transport_kind, specs.modern.transport_kind })
    local ok, err = pcall(mcp.load_config, { mcpServers = { s = { command = 'x', type = 'sse' } } })
    assert.same({ false, 'mcp.load_config: server s: type sse does not go with a command (use stdio)' }, { ok, err })
  end)

  it('mistakes are refused with what to do', function()
    local cases = {
      { { mcpServers = { s = { args = { 'x' } } } }, 'mcp.load_config: server s has neither a command nor a url' },
      { { mcpServers = { s = { command = 'x', type = 'http' } } },
        'mcp.load_config: server s: type http does not go with a command (use stdio)' },
      { { mcpServers = { s = { command = 'x', args = { 1 } } } }, 'mcp.load_config: server s.args[1] must be a string' },
      { { other = {} }, 'mcp.load_config: the config has no servers (an object under mcpServers, or under servers as VS Code writes it)' },
      { 42, 'mcp.load_config: the config must be a path or a table, got number' },
    }
    for _, case in ipairs(cases) do
      local ok, err = pcall(mcp.load_config, case[1])
      assert.is_false(ok)
      assert.equal(case[2], err)
    end
    local path = write('{"mcpServers": {')
    local ok, err = pcall(mcp.load_config, path)
    assert.is_false(ok)
    assert.equal('mcp.load_config: ' .. path .. ' is not JSON: mcp.json_decode: expected a key at byte 17', err)
    os.remove(path)
  end)
end)
