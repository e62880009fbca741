-- The native stdio transport: one server process per client, kept for the
-- client's life, against server-everything and against our own servers
-- for the faults a real one will not produce on demand.
local H = require('helpers')

local mcp = H.native()

local function pid_of(client, tool)
  return H.int(tonumber((client:call(tool or 'pid'))))
end

local function spawn_counter(command)
  local file = H.tmpname()
  return 'echo spawn >> ' .. file .. '; exec ' .. command, function()
    local s = H.slurp(file) or ''
    os.remove(file)
    return select(2, s:gsub('spawn', ''))
  end
end

describe('stdio against server-everything #peer', function()
  local client
  after_each(function() if client then client:close() end end)

  it('discovers every tool with its schema', function()
    client = mcp.new({ command = H.everything_argv() })
    local tools = client:discover()
    local by_name = {}
    for _, t in ipairs(tools) do by_name[t.name] = t end
    for _, name in ipairs({ 'echo', 'get-sum', 'get-env', 'get-tiny-image', 'get-structured-content',
      'trigger-long-running-operation' }) do
      assert.is_table(by_name[name], name)
    end
    assert.is_true(#tools >= 10)
    assert.equal('string', by_name.echo.inputSchema.properties.message.type)
    assert.same({ 'message' }, by_name.echo.inputSchema.required)
    assert.equal('mcp-servers/everything', client.server_info.name)
    assert.equal('2025-06-18', client.negotiated_version)
    assert.is_true(client.session_ready)
    assert.equal(tools, client.tools)
  end)

  it('calls echo, get-sum, an image tool and a structured tool', function()
    client = mcp.new({ command = H.everything_argv() })
    assert.same({ 'Echo: hello', false }, { H.pair(client:call('echo', { message = 'hello' })) })
    assert.same({ 'The sum of 2 and 3 is 5.', false }, { H.pair(client:call('get-sum', { a = 2, b = 3 })) })
    local text = client:call('get-tiny-image', {})
    assert.is_truthy(text:find('[image content]', 1, true))
    local json = client:call('get-structured-content', { location = 'New York' })
    assert.is_truthy(json:find('"temperature"', 1, true))
  end)

  it('returns a failing tool as text and true, with the server message', function()
    client = mcp.new({ command = H.everything_argv() })
    local text, is_error = client:call('echo', {})
    assert.is_true(is_error)
    assert.is_truthy(text:find('expected string, received undefined', 1, true))
  end)

  it('rides one process for discover and 100 calls', function()
    local command, spawns = spawn_counter('node ' .. H.EVERYTHING .. ' stdio')
    client = mcp.new({ command = command })
    client:discover()
    for i = 1, 100 do
      assert.equal('Echo: ' .. i, (client:call('echo', { message = tostring(i) })))
    end
    client:close()
    assert.equal(1, spawns())
  end)

  it('mounts its tools into a registry and runs them', function()
    client = mcp.new({ command = H.everything_argv(), prefix = 'ev_' })
    local registry = H.registry()
    local names = mcp.mount(registry, client)
    assert.is_truthy(registry:get('ev_echo'))
    assert.equal(#client.tools, #names)
    assert.equal('Echo: mounted', registry:get('ev_echo').run({ message = 'mounted' }))
    -- the server's refusal of a call without its required argument, raised
    assert.has_error(function() registry:get('ev_echo').run({}) end, 'MCP error -32602: Input validation error:'
      .. ' Invalid arguments for tool echo: Invalid input: expected string, received undefined at message')
  end)

  it('passes env to the server', function()
    client = mcp.new({ command = H.everything_argv(), env = { LUA_MCP_PROBE = 'probe-value' } })
    local text = client:call('get-env', {})
    assert.is_truthy(text:find('probe-value', 1, true))
  end)
end)

describe('a stateful server keeps its state', function()
  it('counts up across calls through the native module, and restarts through the reference', function()
    local native = mcp.new({ command = H.COUNTER })
    assert.equal('1', (native:call('increment')))
    assert.equal('2', (native:call('increment')))
    assert.equal('12', (native:call('increment', { by = 10 })))
    assert.equal('12', (native:call('get')))
    native:close()

    local reference = H.reference().new({ command = H.COUNTER })
    assert.equal('1', (reference:call('increment')))
    assert.equal('1', (reference:call('increment')))
    assert.equal('10', (reference:call('increment', { by = 10 })))
  end)

  it('spawns once for many calls where the reference spawns every time', function()
    local command, spawns = spawn_counter(H.COUNTER)
    local native = mcp.new({ command = command })
    native:discover()
    for _ = 1, 20 do native:call('increment') end
    native:close()
    assert.equal(1, spawns())

    local command2, spawns2 = spawn_counter(H.COUNTER)
    local reference = H.reference().new({ command = command2 })
    reference:discover()
    for _ = 1, 3 do reference:call('increment') end
    assert.equal(4, spawns2())
  end)
end)

describe('stdio faults', function()
  it('a server that crashes mid-call fails that call at once, and the next call starts a new server', function()
    local log = H.tmpname()
    local client = mcp.new({ command = H.faulty('crash'), env = { CALL_LOG = log }, timeout = 30 })
    local first = pid_of(client)
    local ok, err = pcall(client.call, client, 'echo', { message = 'boom' })
    assert.is_false(ok)
    assert.equal('string', type(err))
    assert.equal('MCP transport failed (3): MCP server exited (' .. H.LUA .. ' ' .. H.ROOT
      .. '/spec/servers/faulty.lua crash): fatal: segmentation fault in handler', err)
    local second = pid_of(client)
    assert.are_not.equal(first, second)
    assert.is_true(H.gone_within(first, 5))
    client:close()
    -- the failed call was sent once and never again
    assert.equal('pid\necho\npid\n', H.slurp(log))
    os.remove(log)
  end)

  it('a command that does not exist fails as the reference does', function()
    local line = 'no-such-mcp-server-xyz --stdio'
    local native = mcp.new({ command = line })
    local reference = H.reference().new({ command = line })
    local _, want = pcall(reference.discover, reference)
    local _, got = pcall(native.discover, native)
    local message = 'MCP server produced no output (no-such-mcp-server-xyz --stdio): '
      .. 'sh: 1: no-such-mcp-server-xyz: not found'
    assert.equal('MCP transport failed (127): ' .. message, got)
    assert.equal('MCP transport failed (' .. (H.REFERENCE_SEES_STATUS and '127' or 'nil') .. '): ' .. message, want)
  end)

  it('a program that does not exist, as an argv, names the program', function()
    local client = mcp.new({ command = { '/nonexistent/mcp-server', '--stdio' } })
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    assert.equal('MCP transport failed (127): MCP server produced no output (/nonexistent/mcp-server --stdio): '
      .. 'No such file or directory (os error 2)', err)
  end)

  it('a server that exits at start reports its status and stderr', function()
    local client = mcp.new({ command = "echo 'config file missing' >&2; echo 'usage: srv [--port N]'; exit 4" })
    local ok, err = pcall(client.call, client, 'echo', {})
    assert.is_false(ok)
    assert.equal("MCP transport failed (4): MCP server produced no output (echo 'config file missing' >&2; "
      .. "echo 'usage: srv [--port N]'; exit 4): config file missing (stdout: usage: srv [--port N])", err)
  end)

  it('a long stderr is quoted from its end, where the exception is; the reference quotes its first 300 bytes', function()
    local lines = {}
    for i = 1, 100 do lines[i] = 'frame ' .. i end
    lines[#lines + 1] = 'Fatal: out of cheese'
    local said = table.concat(lines, '\n')
    local script = H.tmpname() .. '.sh'
    local f = assert(io.open(script, 'w'))
    f:write("cat >&2 <<'END'\n", said, '\nEND\nexit 3\n')
    f:close()
    local command = 'sh ' .. script
    local native = mcp.new({ command = command })
    local _, got = pcall(native.discover, native)
    native:close()
    local prefix = 'MCP transport failed (3): MCP server produced no output (' .. command .. '): '
    local tail = said:sub(-600)
    assert.equal(prefix .. '...\n' .. tail:sub(tail:find('\n') + 1), got)
    assert.is_truthy(got:find('\nframe 100\nFatal: out of cheese$'))
    local reference = H.reference().new({ command = command })
    local _, want = pcall(reference.discover, reference)
    local status = H.REFERENCE_SEES_STATUS and '3' or 'nil'
    assert.equal(prefix:gsub('%(3%)', '(' .. status .. ')', 1) .. said:sub(1, 300), want)
    os.remove(script)
  end)

  it('banners, binary junk, a BOM and CRLF on stdout are skipped', function()
    local client = mcp.new({ command = H.faulty('garbage') })
    local tools = client:discover()
    assert.is_true(#tools >= 5)
    assert.equal('Echo: through the noise', (client:call('echo', { message = 'through the noise' })))
    client:close()
  end)

  it('a 50 MB reply arrives whole', function()
    local client = mcp.new({ command = H.faulty('plain') })
    local text = client:call('big', { bytes = 50 * 1000 * 1000 })
    assert.equal(50 * 1000 * 1000, #text)
    assert.equal(string.rep('x', 64), text:sub(1, 64))
    client:close()
  end)

  it('a reply past max_message_bytes is refused with a clear error, and the client goes on', function()
    local client = mcp.new({ command = H.faulty('plain'), max_message_bytes = 10000 })
    local pid = pid_of(client)
    local ok, err = pcall(client.call, client, 'big', { bytes = 20000 })
    assert.is_false(ok)
    assert.equal('MCP: a message from the server exceeded 10000 bytes (raise opts.max_message_bytes to allow it)', err)
    assert.equal('Echo: after', (client:call('echo', { message = 'after' })))
    assert.equal(pid, pid_of(client))
    client:close()
  end)

  it('replies to other ids are not taken for ours', function()
    local client = mcp.new({ command = H.faulty('reorder') })
    for i = 1, 5 do
      assert.equal('Echo: ' .. i, (client:call('echo', { message = tostring(i) })))
    end
    client:close()
  end)

  it('notifications reach on_notification, and an error inside it breaks nothing', function()
    local seen = {}
    local client = mcp.new({ command = H.faulty('chatty'), era = 'legacy', on_notification = function(msg)
      seen[#seen + 1] = msg.method .. (msg.params and msg.params.data and (' ' .. msg.params.data) or '')
      if #seen == 1 then error('callback bug') end
    end })
    assert.equal('Echo: x', (client:call('echo', { message = 'x' })))
    assert.same({
      'notifications/message before initialize', 'notifications/progress',
      'notifications/message before tools/call', 'notifications/progress',
    }, seen)
    client:close()
  end)

  it("answers the server's ping and refuses its unknown requests, without mixing up ids", function()
    local client = mcp.new({ command = H.faulty('pinger') })
    assert.equal('Echo: x', (client:call('echo', { message = 'x' })))
    local answers = client:call('answers')
    local ping_answer, roots_answer = answers:match('([^\n]+)\n([^\n]+)')
    assert.equal('{"id":2,"jsonrpc":"2.0","result":{}}', ping_answer)
    assert.equal('{"error":{"code":-32601,"message":"Method not found: roots/list"},"id":"srv-2","jsonrpc":"2.0"}', roots_answer)
    client:close()
  end)

  it('opts.handlers answer server requests from Lua, and declare their capabilities', function()
    local seen
    local client = mcp.new({ command = H.faulty('asker'), handlers = {
      ['elicitation/create'] = function(params)
        seen = params.message
        return { action = 'accept', content = { name = params.requestedSchema.properties.name.default } }
      end,
      ['sampling/createMessage'] = function() return nil, 'no model here' end,
      ['x/explode'] = function() error('handler bug', 0) end,
    } })
    assert.equal('{"elicitation":{},"sampling":{}}', (client:call('caps')))
    assert.equal('{"id":"ask-1","jsonrpc":"2.0","result":{"action":"accept","content":{"name":"Ada"}}}',
      (client:call('ask', { method = 'elicitation/create' })))
    assert.equal('Your name?', seen)
    assert.equal('{"error":{"code":-32603,"message":"no model here"},"id":"ask-1","jsonrpc":"2.0"}',
      (client:call('ask', { method = 'sampling/createMessage' })))
    assert.equal('{"error":{"code":-32603,"message":"handler bug"},"id":"ask-1","jsonrpc":"2.0"}',
      (client:call('ask', { method = 'x/explode' })))
    -- no handler: the reader thread answers, as without opts.handlers
    assert.equal('{"error":{"code":-32601,"message":"Method not found: roots/list"},"id":"ask-1","jsonrpc":"2.0"}',
      (client:call('ask', { method = 'roots/list' })))
    client:close()
  end)

  it('without handlers nothing extra is declared', function()
    local client = mcp.new({ command = H.faulty('asker') })
    assert.equal('{}', (client:call('caps')))
    client:close()
    local ok, err = pcall(mcp.new, { command = 'x', handlers = { ping = 'pong' } })
    assert.is_false(ok)
    assert.equal('mcp.new: opts.handlers must map method names to functions', err)
  end)

  it('a server flooding stderr never stalls', function()
    local client = mcp.new({ command = H.faulty('flood') })
    for i = 1, 3 do
      assert.equal('Echo: ' .. i, (client:call('echo', { message = tostring(i) })))
    end
    client:close()
  end)

  it('a request past its timeout is cancelled, its late reply dropped, and the client goes on #slow', function()
    -- 1 s: the same limit covers spawning and the handshake, which a
    -- loaded machine can stretch past a few tenths of a second.
    local client = mcp.new({ command = H.faulty('plain'), timeout = 1 })
    local pid = pid_of(client)
    assert.has_error(function() client:call('sleep', { ms = 2500 }) end, 'MCP tools/call sleep timed out after 1 s')
    -- Let the late reply to the sleep arrive: it must not answer the next call.
    os.execute('sleep 1.6')
    assert.equal('Echo: later', (client:call('echo', { message = 'later' })))
    assert.equal(pid, pid_of(client))
    -- ids: initialize 1, pid 2, sleep 3
    assert.equal('3', (client:call('cancelled')))
    client:close()
  end)

  it('a server that hangs: each request times out, the same server is kept, and close stops it #slow', function()
    local pid_file = H.tmpname()
    local client = mcp.new({ command = H.faulty('mute'), timeout = 1, env = { PID_FILE = pid_file } })
    for _ = 1, 2 do
      assert.has_error(function() client:call('echo', { message = 'anyone?' }) end,
        'MCP tools/call echo timed out after 1 s')
    end
    local pid = H.int(tonumber(H.slurp(pid_file)))
    assert.has_error(function() client:discover() end, 'MCP tools/list timed out after 1 s')
    -- one server for all three requests, still running
    assert.equal(pid, H.int(tonumber(H.slurp(pid_file))))
    assert.is_true(H.alive(pid))
    client:close()
    assert.is_false(H.alive(pid))
    os.remove(pid_file)
  end)

  it('a server that never answers initialize times out, and no cancel is sent for initialize', function()
    local log = H.tmpname()
    local client = mcp.new({ command = H.faulty('deaf'), connect_timeout = 0.5, env = { METHOD_LOG = log } })
    assert.has_error(function() client:discover() end, 'MCP initialize timed out after 0.5 s (opts.connect_timeout)')
    client:close()
    -- the server heard the era probe, then initialize, and nothing after
    -- them: neither is cancelled
    assert.equal('server/discover\ninitialize\n', H.slurp(log))
    os.remove(log)
  end)

  it('a server choosing a protocol version we do not speak is refused', function()
    local client = mcp.new({ command = H.faulty('plain'), protocol_version = '1999-01-01' })
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    assert.equal('MCP initialize failed: the server chose protocol version 1999-01-01, which this client '
      .. 'does not speak (2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)', err)
    client:close()
  end)

  it('writing to a server that died does not kill the Lua host (SIGPIPE)', function()
    local out, status = H.run_lua([[
      local mcp = require('mcp')
      local c = mcp.new({ command = 'read line; echo \'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}}\'; exec 0<&-; sleep 0.3' })
      local ok, err = pcall(c.call, c, 'echo', { message = string.rep('x', 4 * 1024 * 1024) })
      print(ok, err)
      ok, err = pcall(c.call, c, 'echo', { message = string.rep('y', 4 * 1024 * 1024) })
      print(ok, err ~= nil)
      print('host alive')
    ]])
    assert.equal(0, status)
    assert.is_truthy(out:find('host alive', 1, true), out)
  end)

  it('tools/list pages are followed through nextCursor', function()
    local client = mcp.new({ command = H.faulty('paged') })
    local names = {}
    for i, t in ipairs(client:discover()) do names[i] = t.name end
    assert.same({ 'page1-a', 'page1-b', 'page2-a', 'page2-b', 'page3-a', 'page3-b' }, names)
    client:close()
  end)

  it('a server that repeats its cursor is not followed round again', function()
    local client = mcp.new({ command = H.faulty('stuck') })
    local tools = client:discover()
    assert.same({ 'again', 'again' }, { tools[1].name, tools[2].name })
    assert.equal(2, #tools)
    client:close()
  end)

  it('cwd sets the working directory', function()
    local client = mcp.new({ command = H.faulty('plain'), cwd = '/tmp' })
    assert.equal('/tmp', (client:call('cwd')))
    client:close()
  end)

  it('bad options are refused by mcp.new with a clear error', function()
    local cases = {
      { { command = 'x', timeout = -1 }, 'mcp.new: opts.timeout must be a number of seconds from 0.001 to 1e7' },
      { { command = 'x', timeout = 'soon' }, 'mcp.new: opts.timeout must be a number of seconds from 0.001 to 1e7' },
      { { command = 'x', env = { A = {} } }, 'mcp.new: opts.env must map names to strings; the value for A is a table' },
      { { command = 'x', cwd = 5 }, 'mcp.new: opts.cwd must be a string' },
      { { command = 'x', max_message_bytes = 0 },
        'mcp.new: opts.max_message_bytes must be a whole number of bytes from 1 to 2^40' },
      { { command = 'x', on_notification = 'print' }, 'mcp.new: opts.on_notification must be a function' },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(mcp.new, c[1])
      assert.is_false(ok)
      assert.equal(c[2], err)
    end
    local client = mcp.new({ command = { 'ok', 5 } })
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    assert.equal('mcp: command must be a string or an array of strings', err)
  end)
end)

describe('stdio lifecycle', function()
  it('close stops the server and is safe twice; the next call starts a new one', function()
    local client = mcp.new({ command = H.COUNTER })
    local pid = pid_of(client, 'whoami')
    client:close()
    assert.is_false(H.alive(pid))
    client:close()
    assert.equal('1', (client:call('increment')))
    client:close()
  end)

  it('stops a wrapper and its grandchild together (process group)', function()
    -- sh stays as the parent of lua5.4 here: no exec.
    local client = mcp.new({ command = H.faulty_line('plain') .. '; true' })
    local pid = pid_of(client)
    client:close()
    assert.is_false(H.alive(pid))
  end)

  it('a server that ignores stdin EOF and SIGTERM is still stopped #slow', function()
    local client = mcp.new({ command = "trap '' TERM; exec " .. H.faulty_line('stubborn') })
    local pid = pid_of(client)
    client:close()
    assert.is_false(H.alive(pid))
  end)

  it('garbage collection of the client stops its server', function()
    local client = mcp.new({ command = H.COUNTER })
    local pid = pid_of(client, 'whoami')
    client = nil
    collectgarbage()
    collectgarbage()
    assert.is_true(H.gone_within(pid, 6))
  end)

  it('closing the Lua state stops every server it started #slow', function()
    local out, status = H.run_lua(string.format([[
      local mcp = require('mcp')
      local a = mcp.new({ command = %q })
      local b = mcp.new({ command = %q })
      print(a:call('whoami'))
      print(b:call('pid'))
    ]], H.LUA .. ' lua/servers/counter.lua', "trap '' TERM; exec " .. H.LUA .. ' spec/servers/faulty.lua stubborn'))
    assert.equal(0, status)
    for pid in out:gmatch('(%d+)\tfalse') do
      assert.is_false(H.alive(tonumber(pid)), 'server ' .. pid .. ' outlived its Lua state')
    end
    assert.equal(2, select(2, out:gsub('%d+\tfalse', '')))
  end)

  it('a host out of descriptors is told which limit it reached and what to do', function()
    -- 40 descriptors: a few clients, then the limit. The clients are kept,
    -- so that each one's descriptors stay taken.
    local out, status = H.command(string.format([[ulimit -n 40; cd %s && %s -e "
      package.cpath = './?.so;' .. package.cpath
      local mcp = require('mcp')
      local kept = {}
      for i = 1, 40 do
        local c = mcp.new({ command = { '%s', 'lua/servers/counter.lua' } })
        kept[i] = c
        local ok, err = pcall(c.call, c, 'get', {})
        if not ok then print(i > 1, err) break end
      end
      for _, c in ipairs(kept) do c:close() end"]], H.ROOT, H.LUA, H.LUA))
    assert.equal(0, status, out)
    assert.is_truthy(out:find('^true\t'), out)
    assert.is_truthy(out:find('this process has reached its limit of open descriptors (40 now, ', 1, true)
      or out:find('cannot make a descriptor to watch: this process has reached its limit of open descriptors (40 now, ', 1, true), out)
    assert.is_truthy(out:find('raise it (ulimit -n before starting, or setrlimit RLIMIT_NOFILE) or close clients no longer used', 1, true), out)
  end)
end)
