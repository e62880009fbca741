-- What only Windows does: commands found and run as cmd.exe would, the
-- server's process tree held in a Job Object, one pump thread per server,
-- client:fd() as a socket, HTTP streams polled with WSAPoll. Runs in the
-- Windows pass (scripts/windows-pass.sh, the Windows lua.exe and
-- luajit.exe under Wine); elsewhere it has nothing to test.
local H = require('helpers')
if not H.WINDOWS then return end

local mcp = H.native()
local SPEC = H.ROOT .. '\\spec\\windows'
local COUNTER = H.ROOT .. '\\lua\\servers\\counter.lua'
local TREE = { H.LUA, SPEC .. '\\tree.lua' }

local function size(path)
  local f = io.open(path, 'rb')
  if not f then return 0 end
  local n = f:seek('end')
  f:close()
  return n
end

local function pause(seconds)
  local t = mcp.clock()
  while mcp.clock() - t < seconds do end
end

-- Whether the heartbeat at `file` stopped: no growth over half a second.
local function stopped_beating(file)
  pause(0.2)
  local before = size(file)
  pause(0.5)
  return size(file) == before
end

-- wmic's table of processes. Wine now and then fails to start a process
-- (io.popen's "Invalid argument"): that is tried again, a few times.
local function process_table()
  local why
  for _ = 1, 5 do
    local p
    p, why = io.popen('wmic process get Name,ParentProcessId,ProcessId,ThreadCount 2>&1')
    if p then
      local text = p:read('*a'):gsub('%z', '')
      p:close()
      if text:find('wmic.exe', 1, true) then return text end
      why = text
    end
    pause(0.2)
  end
  error('wmic: ' .. tostring(why))
end

-- The threads of this process, as WMI counts them: wmic's row names its
-- parent (the cmd.exe of io.popen), whose row names this process.
local function threads()
  local text = process_table()
  local rows, wmic = {}, nil
  for name, parent, pid, count in text:gmatch('(%S+)%s+(%d+)%s+(%d+)%s+(%d+)') do
    rows[pid] = { parent = parent, count = tonumber(count) }
    if name == 'wmic.exe' then wmic = rows[pid] end
  end
  local shell = assert(wmic and rows[wmic.parent], text)
  return assert(rows[shell.parent], text).count
end

local function heartbeat_file()
  local file = os.tmpname()
  os.remove(file)
  return file
end

describe('on Windows', function()
  it('a server started from an argv (lua.exe found on PATH) keeps its state between calls', function()
    local client = mcp.new({ command = { H.LUA, COUNTER } })
    assert.equal('2', (client:call('increment', { by = 2 })))
    assert.equal('5', (client:call('increment', { by = 3 })))
    client:close()
  end)

  it('a string command runs through cmd.exe, as the reference\'s os.execute does', function()
    local client = mcp.new({ command = H.LUA .. ' "' .. COUNTER .. '"' })
    assert.equal(3, #client:discover())
    assert.equal('1', (client:call('increment')))
    client:close()
  end)

  it('an npm-style .cmd wrapper is found through PATHEXT and run with its arguments', function()
    local client = mcp.new({
      command = { 'counter' },
      env = { PATH = SPEC .. ';' .. os.getenv('PATH'), MCP_LUA_EXE = H.LUA },
    })
    assert.equal('4', (client:call('increment', { by = 4 })))
    client:close()
  end)

  it('a .cmd wrapper gets cmd.exe\'s special characters as plain text, and a line break is refused', function()
    local env = { PATH = SPEC .. ';' .. os.getenv('PATH'), MCP_LUA_EXE = H.LUA }
    -- Quoted for cmd.exe: "a&calc" starts no calculator, "%PATH%" is not expanded.
    local client = mcp.new({ command = { 'counter', 'a&calc', '%PATH%', 'x^y' }, env = env })
    assert.equal('1', (client:call('increment')))
    client:close()
    client = mcp.new({ command = { 'counter', 'a\nb' }, env = env })
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    assert.equal('MCP transport failed (127): MCP server produced no output (counter a\nb): batch file arguments are invalid', err)
  end)

  it('a program found nowhere says where it was looked for', function()
    local ok, err = pcall(function() return mcp.new({ command = { 'no-such-server' } }):discover() end)
    assert.is_false(ok)
    assert.equal('MCP transport failed (127): MCP server produced no output (no-such-server): no-such-server was not found on PATH (with PATHEXT\'s extensions; the working directory is not searched)', err)
  end)

  it('a program named without a directory is not taken from the working directory, as cmd.exe would take it', function()
    -- spec\windows holds counter.cmd: a project's own copy of a command.
    local client = mcp.new({ command = { 'counter' }, cwd = SPEC, env = { MCP_LUA_EXE = H.LUA } })
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    assert.equal('MCP transport failed (127): MCP server produced no output (counter): counter was not found on PATH (with PATHEXT\'s extensions; the working directory is not searched)', err)
  end)

  it('close gives the server EOF, so one that ends on EOF is gone well within the 2 s grace', function()
    local client = mcp.new({ command = { H.LUA, COUNTER } })
    client:discover()
    local started = mcp.clock()
    client:close()
    local took = mcp.clock() - started
    assert.is_true(took < 1.5, 'close took ' .. took .. ' s: the server saw no EOF and waited out the grace')
  end)

  it('close ends the whole tree: a grandchild started through cmd.exe stops with it', function()
    local file = heartbeat_file()
    local client = mcp.new({ command = TREE })
    assert.equal('beating', (client:call('heartbeat', { file = file })))
    pause(0.5)
    assert.is_false(stopped_beating(file), 'the grandchild runs while the client does')
    client:close()
    assert.is_true(stopped_beating(file), 'the grandchild outlived close')
    os.remove(file)
  end)

  it('the garbage collector ends a dropped client\'s tree', function()
    local file = heartbeat_file()
    local client = mcp.new({ command = TREE })
    client:call('heartbeat', { file = file })
    pause(0.5)
    client = nil
    collectgarbage()
    collectgarbage()
    local deadline = mcp.clock() + 5
    repeat until stopped_beating(file) or mcp.clock() > deadline
    assert.is_true(stopped_beating(file), 'the grandchild outlived the collected client')
    os.remove(file)
  end)

  it('a server that dies is noticed at once, and its stderr quoted', function()
    local client = mcp.new({ command = TREE })
    client:discover()
    local started = mcp.clock()
    local ok, err = pcall(client.call, client, 'die')
    assert.is_false(ok)
    assert.is_true(mcp.clock() - started < 5)
    assert.equal('MCP transport failed (3): MCP server exited (' .. table.concat(TREE, ' ') .. '): tree: giving up', err)
    client:close()
  end)

  it('a slow reply times out, the server is kept, and close is bounded', function()
    local client = mcp.new({ command = TREE, timeout = 1 })
    client:discover()
    local ok, err = pcall(client.call, client, 'slow', { seconds = 3 })
    assert.is_false(ok)
    assert.equal('MCP tools/call slow timed out after 1 s', err)
    local started = mcp.clock()
    client:close()
    assert.is_true(mcp.clock() - started < 4, 'close took ' .. (mcp.clock() - started) .. ' s')
  end)

  it('cwd takes a Windows path with a drive letter and backslashes', function()
    local client = mcp.new({ command = TREE, cwd = SPEC })
    assert.equal(SPEC, (client:call('cwd')))
    client:close()
  end)

  it('cwd, command and env in the code page Windows Lua gets them in (not UTF-8) are taken', function()
    -- "café" as os.getenv and io.popen give it here: \233 in Windows-1252.
    local stamp = tostring(os.time())
    local dir = os.getenv('TEMP') .. '\\caf\233-' .. stamp
    os.execute('mkdir "' .. dir .. '"')
    local client = mcp.new({ command = { H.LUA, SPEC .. '\\tree.lua', 'caf\233' }, cwd = dir, env = { NOTE = 'caf\233' } })
    -- The server runs there (how it spells the é back is its own JSON
    -- encoder's business).
    local cwd = client:call('cwd')
    assert.equal(os.getenv('TEMP') .. '\\caf', cwd:sub(1, #os.getenv('TEMP') + 4))
    assert.equal('-' .. stamp, cwd:sub(-#stamp - 1))
    client:close()
    os.execute('rmdir "' .. dir .. '"')
  end)

  it('async calls to two servers settle, and client:fd() is a socket an event loop can watch', function()
    local a, b = mcp.new({ command = { H.LUA, COUNTER } }), mcp.new({ command = TREE })
    local fd = a:fd()
    assert.equal('number', type(fd))
    assert.is_true(fd > 0)
    local handles = { a:call_async('increment', { by = 7 }), b:call_async('echo', { message = 'hi' }) }
    assert.is_true(mcp.wait_all(handles, 20))
    assert.equal('7', (handles[1]:wait()))
    assert.equal('Echo: hi', (handles[2]:wait()))
    a:close()
    b:close()
  end)

  it('a config file with drive letters and backslashes starts its servers', function()
    local path = os.tmpname()
    local f = assert(io.open(path, 'w'))
    f:write(mcp.json_encode({ mcpServers = {
      counter = { command = H.LUA, args = { '${workspaceFolder}\\lua\\servers\\counter.lua' } },
      tree = { command = H.LUA, args = { SPEC .. '\\tree.lua' }, cwd = SPEC },
    } }))
    f:close()
    local clients = mcp.connect(mcp.load_config(path, { workspace = H.ROOT }))
    assert.equal('6', (clients.counter:call('increment', { by = 6 })))
    assert.equal(SPEC, (clients.tree:call('cwd')))
    for _, client in pairs(clients) do client:close() end
    os.remove(path)
  end)

  it('a session recorded on Windows replays, and its file admits this user alone', function()
    local path = os.tmpname()
    os.remove(path)
    local live = mcp.new({ command = { H.LUA, COUNTER }, record = path })
    assert.equal('3', (live:call('increment', { by = 3 })))
    live:close()
    local replayed = mcp.replay(path)
    assert.equal('3', (replayed:call('increment', { by = 3 })))
    replayed:close()
    os.remove(path)
  end)

  it('bin/lua-mcp runs with the Windows Lua', function()
    local p = io.popen(H.LUA .. ' ' .. H.ROOT .. '\\bin\\lua-mcp --mcp "' .. H.LUA .. ' ' .. COUNTER
      .. '" call increment by=2 2>&1')
    local out = p:read('*a')
    p:close()
    assert.equal('2\n', out)
  end)

  it('the era cache is kept under %LOCALAPPDATA%\\lua-mcp', function()
    local cache = os.getenv('LOCALAPPDATA') .. '\\lua-mcp\\eras.json'
    local client = mcp.new({ command = { H.LUA, COUNTER } })
    client:discover()
    client:close()
    local f = io.open(cache, 'rb')
    assert.is_truthy(f, cache .. ' was not written')
    local text = f:read('*a')
    f:close()
    assert.is_truthy(text:find('"legacy"', 1, true), text)
  end)

  it("idle HTTP clients hold no thread each: the server's streams are polled, and close returns every thread", function()
    local base = assert(os.getenv('MCP_HTTP_FAULTS'), 'scripts/windows-pass.sh starts the HTTP server')
    -- Clients earlier specs left to the collector end now, not while
    -- threads are counted.
    collectgarbage()
    collectgarbage()
    pause(0.3)
    local before = threads()
    local clients, seen = {}, {}
    for i = 1, 10 do
      local function note(m) seen[i] = m.params.data end
      clients[i] = mcp.new({ url = base .. '/plain', on_notification = note })
      clients[i]:discover()
    end
    -- Each stream brings a ping (answered aside) and a notification,
    -- handed to Lua during a call.
    for i, client in ipairs(clients) do
      for _ = 1, 40 do
        assert.equal('Echo: ' .. i, (client:call('echo', { message = tostring(i) })))
        if seen[i] then break end
        pause(0.05)
      end
      assert.equal('hello from the server stream', seen[i])
    end
    pause(0.5)
    assert.equal(before + 1, threads(), 'the poll thread, and none per client')
    for _, client in ipairs(clients) do client:close() end
    assert.equal(before, threads())
  end)

  it('server-everything on the Windows node: discover and echo #peer', function()
    local client = mcp.new({ command = { 'node', H.EVERYTHING, 'stdio' }, timeout = 60 })
    local names = {}
    for _, tool in ipairs(client:discover()) do names[tool.name] = true end
    assert.is_true(names.echo)
    assert.equal('Echo: hello from Windows', (client:call('echo', { message = 'hello from Windows' })))
    client:close()
  end)
end)
