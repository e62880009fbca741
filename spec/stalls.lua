-- How long an event loop stands still while MCP work happens beside it.
-- A 1 ms timer ticks; the longest gap between two ticks is the stall. Each
-- case starts its work with async calls only, every client's descriptor
-- is watched and dispatched from the loop, and the case ends when its
-- last callback ran. Shared by spec/event_loop_spec.lua (luv),
-- spec/nvim_spec.lua (Neovim) and bench/stalls.lua (the figures).
--
-- The loop is given as `loop`: { uv = luv or vim.loop, spin = function(done,
-- seconds) ... end } (luv: uv.run('once') until done; Neovim: vim.wait).
-- `env` names what the cases start: { lua, root, prefix (put before every
-- server command: a taskset for the split measurements), http_base (a
-- running spec/servers/http_faults.js, whose paths are the HTTP servers
-- and the one behind OAuth), scratch (a directory for the config file) }.
local M = {}

-- The servers' commands, as argv lists.
local function faulty(env, mode)
  local argv = {}
  for word in (env.prefix or ''):gmatch('%S+') do argv[#argv + 1] = word end
  argv[#argv + 1] = env.lua
  argv[#argv + 1] = env.root .. '/spec/servers/faulty.lua'
  argv[#argv + 1] = mode
  return argv
end

-- Runs `start(watch, finish)` inside the loop and measures. `start` makes
-- its clients (each given to `watch`, which follows its descriptor) and
-- its calls; `finish(result)` ends the case. Returns the longest gap in
-- ms, the result, and the clients (closed).
function M.measure(loop, start, seconds)
  local uv = loop.uv
  local last, longest, ticks = nil, 0, 0
  local timer = uv.new_timer()
  timer:start(1, 1, function()
    local now = uv.hrtime()
    if last then longest = math.max(longest, (now - last) / 1e6) end
    last, ticks = now, ticks + 1
  end)
  local polls, clients, owned, result, finished = {}, {}, {}, nil, false
  local function watch(client)
    clients[#clients + 1] = client
    local poll = uv.new_poll(client:fd())
    poll:start('r', function() client:dispatch() end)
    polls[#polls + 1] = poll
  end
  local function finish(r)
    result, finished = r, true
  end
  -- Started from the loop, as a plugin's code runs: the first tick is
  -- already counted, so a start that blocks shows as a gap.
  -- Other loop handles a case makes (a browser's process), closed at the
  -- end: luv crashes at exit over a handle left open.
  local function own(handle)
    owned[#owned + 1] = handle
  end
  local kick = uv.new_timer()
  kick:start(20, 0, function() start(watch, finish, own) end)
  loop.spin(function() return finished end, seconds or 30)
  timer:stop()
  kick:close()
  timer:close()
  for _, poll in ipairs(polls) do poll:stop(); poll:close() end
  for _, handle in ipairs(owned) do
    if not handle:is_closing() then handle:close() end
  end
  for _, client in ipairs(clients) do client:close() end
  -- The closed handles are let go by one more turn of the loop (luv
  -- frees them there; a state closed first crashes at exit).
  loop.drain()
  return longest, result, ticks
end

-- The cases of the event-loop issue, by name, in the order they run.
M.order = { 'stdio_slow_start', 'http_slow_start', 'restart', 'login', 'config', 'handler_answer' }

M.cases = {}

-- A stdio server that reads nothing for 2 s after it starts, reached by
-- the first (async) call.
function M.cases.stdio_slow_start(mcp, env)
  return function(watch, finish)
    local client = mcp.new({ command = faulty(env, 'slowstart') })
    watch(client)
    client:call_async('echo', { message = 'hi' }, { on_done = function(ok, text) finish(ok and text or 'error: ' .. tostring(text)) end })
  end
end

-- An HTTP server slow at each step of its handshake: initialize and
-- initialized answered after 2 s each, its GET stream after 1.5 s.
function M.cases.http_slow_start(mcp, env)
  return function(watch, finish)
    local client = mcp.new({ url = env.http_base .. '/slow-init' })
    watch(client)
    client:call_async('echo', { message = 'hi' }, { on_done = function(ok, text) finish(ok and text or 'error: ' .. tostring(text)) end })
  end
end

-- An HTTP server that asks a question (elicitation/create) on an async
-- call's stream, and takes 2 s to take the answer a Lua handler gave.
function M.cases.handler_answer(mcp, env)
  return function(watch, finish)
    local client = mcp.new({ url = env.http_base .. '/ask-slow', handlers = {
      ['elicitation/create'] = function() return { action = 'accept', content = {} } end,
    } })
    watch(client)
    client:call_async('echo', { message = 'hi' }, { on_done = function(ok, text) finish(ok and text or 'error: ' .. tostring(text)) end })
  end
end

-- A server that dies, started again (slowly) by the next async call.
function M.cases.restart(mcp, env)
  return function(watch, finish)
    local client = mcp.new({ command = faulty(env, 'slowstart') })
    watch(client)
    client:call_async('echo', { message = 'first' }, { on_done = function()
      client:call_async('die', {}, { on_done = function()
        client:call_async('echo', { message = 'again' }, { on_done = function(ok, text)
          finish(ok and text or 'error: ' .. tostring(text))
        end })
      end })
    end })
  end
end

-- A login whose browser comes back to the loopback listener after 2 s.
-- The browser is started without waiting for it (uv.spawn), as an editor
-- would open one.
function M.cases.login(mcp, env, loop)
  return function(watch, finish, own)
    local client = mcp.new({ url = env.http_base .. '/mcp', auth = { authorize = function(url)
      own(loop.uv.spawn('sh', { args = { '-c', "sleep 2; curl -s -L -o /dev/null '" .. url:gsub("'", '') .. "'" } },
        function() end))
      return nil
    end } })
    watch(client)
    client:call_async('whoami', {}, { on_done = function(ok, text)
      finish(ok and (text and 'token' or 'no token') or 'error: ' .. tostring(text))
    end })
  end
end

-- Three servers from one config file: one slow to start, one quick, one
-- whose command does not exist.
function M.cases.config(mcp, env)
  return function(watch, finish)
    local path = env.scratch .. '/mcp.json'
    local f = assert(io.open(path, 'w'))
    local function argv_json(argv)
      local quoted = {}
      for i, word in ipairs(argv) do quoted[i] = string.format('%q', word) end
      return '[' .. table.concat(quoted, ', ') .. ']'
    end
    local slow, quick = faulty(env, 'slowstart'), faulty(env, 'plain')
    f:write(string.format([[{"mcpServers": {
      "slow": {"command": %s, "args": %s},
      "quick": {"command": %s, "args": %s},
      "broken": {"command": "/nonexistent/mcp-server"}
    }}]], string.format('%q', slow[1]), argv_json({ (table.unpack or unpack)(slow, 2) }),
      string.format('%q', quick[1]), argv_json({ (table.unpack or unpack)(quick, 2) })))
    f:close()
    local clients = mcp.connect(mcp.load_config(path))
    for _, name in ipairs({ 'broken', 'quick', 'slow' }) do watch(clients[name]) end
    local registry, order = M.registry(), {}
    if not mcp.mount_all_async then
      -- A build without it (the figures before): what a plugin did then.
      local mounted, failed = mcp.mount_all(registry, clients)
      return finish({ mounted = #mounted, failed = failed, order = 'all at once' })
    end
    mcp.mount_all_async(registry, clients, {
      on_server = function(name) order[#order + 1] = name end,
      on_done = function(mounted, failed)
        finish({ mounted = #mounted, failed = failed, order = table.concat(order, ' ') })
      end,
    })
  end
end

-- A registry as an agent keeps one.
function M.registry()
  local tools = {}
  return {
    get = function(_, name) return tools[name] end,
    add = function(_, tool) tools[tool.name] = tool end,
  }
end

-- luv's loop for M.measure.
function M.luv_loop(uv)
  return {
    uv = uv,
    spin = function(done, seconds)
      local deadline = uv.hrtime() + seconds * 1e9
      while not done() and uv.hrtime() < deadline do uv.run('once') end
    end,
    drain = function() uv.run('nowait') end,
  }
end

-- Neovim's: its loop runs already; vim.wait turns it.
function M.nvim_loop(vim)
  return {
    uv = vim.uv or vim.loop,
    spin = function(done, seconds) vim.wait(seconds * 1000, done, 1) end,
    drain = function() vim.wait(10) end,
  }
end

return M
