-- Neovim (headless) with the LuaJIT build: the module loads from
-- package.cpath, discovers and calls the bundled counter, and one call runs
-- through vim.loop (client:fd() and dispatch) while a timer keeps ticking.
-- Runs in the suite's LuaJIT pass, when ./mcp.so is the LuaJIT build.
local H = require('helpers')

local function nvim(script)
  local path = H.tmpname() .. '.lua'
  local f = assert(io.open(path, 'w'))
  f:write(string.format('package.cpath = %q .. package.cpath\n', H.ROOT .. '/?.so;'))
  f:write(script)
  f:close()
  local out, status = H.command('cd ' .. H.ROOT .. ' && timeout 60 nvim --headless -u NONE -c '
    .. string.format('%q', 'luafile ' .. path))
  os.remove(path)
  return out, status
end

local describe_nvim = (H.LUA == 'luajit' and H.succeeded(os.execute('command -v nvim >/dev/null'))) and describe or pending

describe_nvim('Neovim', function()
  it('loads the LuaJIT build, discovers and calls, and a call through vim.loop never stops a timer', function()
    local out, status = nvim(string.format([[
      local mcp = require('mcp')
      local counter = mcp.new({ command = { 'luajit', %q } })
      io.stdout:write('tools ', #counter:discover(), '\n')
      io.stdout:write('call ', counter:call('increment', {}), '\n')
      local sleepy = mcp.new({ command = { 'luajit', %q } })
      sleepy:discover()
      local uv = vim.loop
      local ticks, got = 0, nil
      local timer = uv.new_timer()
      timer:start(10, 10, function() ticks = ticks + 1 end)
      local watcher = uv.new_poll(sleepy:fd())
      watcher:start('r', function() sleepy:dispatch() end)
      sleepy:call_async('sleep', { ms = 300, label = 'slept' }, { on_done = function(ok, text) got = text end })
      vim.wait(10000, function() return got ~= nil end, 5)
      io.stdout:write('async ', tostring(got), ' ticks ', ticks, '\n')
      timer:stop()
      watcher:stop()
      counter:close()
      sleepy:close()
      vim.cmd('qa!')
    ]], H.ROOT .. '/lua/servers/counter.lua', H.ROOT .. '/lua/servers/sleepy.lua'))
    assert.equal(0, status, out)
    assert.is_truthy(out:find('tools 3\n', 1, true), out)
    assert.is_truthy(out:find('call 1\n', 1, true), out)
    local ticks = tonumber(out:match('async slept ticks (%d+)'))
    assert.is_truthy(ticks, out)
    -- 300 ms of a 10 ms timer: a loop blocked by the call would tick once
    assert.is_true(ticks >= 15, out)
  end)

  it('the example starts a config file\'s servers without blocking, tells of each, lists and calls their tools, and stops them on VimLeavePre', function()
    local dir = H.tmpname()
    os.execute('mkdir -p ' .. dir)
    local pid_file = dir .. '/slow.pid'
    local config = dir .. '/mcp.json'
    local f = assert(io.open(config, 'w'))
    f:write(string.format([[{"mcpServers": {
      "counter": {"command": "luajit", "args": [%q]},
      "slow": {"command": "luajit", "args": [%q, "slowstart"], "env": {"PID_FILE": %q}},
      "broken": {"command": "/nonexistent/mcp-server"}
    }}]], H.ROOT .. '/lua/servers/counter.lua', H.ROOT .. '/spec/servers/faulty.lua', pid_file))
    f:close()
    local out, status = nvim(string.format([[
      local notes = {}
      vim.notify = function(message) notes[#notes + 1] = message end
      local uv = vim.loop
      local last, longest = nil, 0
      local timer = uv.new_timer()
      timer:start(1, 1, function()
        local now = uv.hrtime()
        if last then longest = math.max(longest, (now - last) / 1e6) end
        last = now
      end)
      vim.g.mcp_config = %q
      local M = dofile(%q)
      local function settled()
        for _, state in pairs(M.status) do if state == 'starting' then return false end end
        return true
      end
      vim.wait(15000, settled, 1)
      vim.cmd('McpCall counter_increment')
      vim.wait(5000, function() return table.concat(notes, '\n'):find('counter_increment: 1', 1, true) ~= nil end, 1)
      timer:stop()
      vim.cmd('McpTools')
      vim.cmd('McpStatus')
      vim.wait(50)
      io.stdout:write(table.concat(notes, '\n'), '\n', string.format('longest %%.1f\n', longest))
      vim.cmd('doautocmd VimLeavePre')
      local clients = 0
      for _ in pairs(M.clients) do clients = clients + 1 end
      io.stdout:write('clients after VimLeavePre ', clients, '\n')
      vim.cmd('qa!')
    ]], config, H.ROOT .. '/lua/examples/nvim.lua'))
    assert.equal(0, status, out)
    assert.is_truthy(out:find('counter ready: 3 tools', 1, true), out)
    assert.is_truthy(out:find('slow ready: ', 1, true), out)
    assert.is_truthy(out:find('broken failed: MCP transport failed (127)', 1, true), out)
    assert.is_truthy(out:find('counter_increment: 1', 1, true), out)
    assert.is_truthy(out:find('counter_whoami', 1, true), out)
    assert.is_truthy(out:find('slow_echo', 1, true), out)
    assert.is_truthy(out:find('counter: ready (3 tools)', 1, true), out)
    assert.is_truthy(out:find('clients after VimLeavePre 0', 1, true), out)
    local longest = tonumber(out:match('longest ([%d.]+)'))
    assert.is_true(longest < 100, 'the editor stood still for ' .. tostring(longest) .. ' ms while the servers started')
    -- The slow server was stopped with its client.
    local pid = H.slurp(pid_file):match('%d+')
    local deadline = os.time() + 6
    while H.succeeded(os.execute('kill -0 ' .. pid .. ' 2>/dev/null')) do
      assert.is_true(os.time() < deadline, 'the slow server outlived the editor')
      os.execute('sleep 0.05')
    end
  end)

  it('the event-loop cases never stall Neovim\'s loop', function()
    local http_base, stop_http = H.fault_server()
    local scratch = H.tmpname()
    os.execute('mkdir -p ' .. scratch)
    local out, status = nvim(string.format([[
      package.path = %q .. package.path
      local mcp = require('mcp')
      local S = require('stalls')
      local loop = S.nvim_loop(vim)
      local env = { lua = 'luajit', root = %q, http_base = %q, scratch = %q }
      for _, name in ipairs(S.order) do
        local gap, result = S.measure(loop, S.cases[name](mcp, env, loop))
        if type(result) == 'table' then result = result.mounted .. ' mounted' end
        io.stdout:write(string.format('%%s %%.1f %%s\n', name, gap, tostring(result)))
      end
      vim.cmd('qa!')
    ]], H.ROOT .. '/spec/?.lua;', H.ROOT, http_base, scratch))
    stop_http()
    assert.equal(0, status, out)
    local expected = { stdio_slow_start = 'Echo: hi', http_slow_start = 'Echo: hi', restart = 'Echo: again',
      login = 'token', handler_answer = 'Echo: accept' }
    for _, name in ipairs(require('stalls').order) do
      local gap, result = out:match(name .. ' ([%d.]+) ([^\n]*)')
      assert.is_truthy(gap, out)
      assert.is_true(tonumber(gap) < 100, name .. ': Neovim stood still for ' .. gap .. ' ms')
      if expected[name] then assert.equal(expected[name], result) end
    end
  end)

  it(':checkhealth mcp reports the module, the platform and ABI, the config file and each server', function()
    local dir = H.tmpname()
    os.execute('mkdir -p ' .. dir)
    local f = assert(io.open(dir .. '/mcp.json', 'w'))
    f:write(string.format([[{"mcpServers": {
      "counter": {"command": "luajit", "args": [%q]},
      "broken": {"command": "/nonexistent/server"},
      "off": {"command": "luajit", "disabled": true}}}]], H.ROOT .. '/lua/servers/counter.lua'))
    f:close()
    local report = dir .. '/health.txt'
    local out, status = H.command(('cd %s && timeout 60 nvim --headless -u NONE --cmd %q --cmd %q --cmd %q '
      .. '-c "checkhealth mcp" -c %q -c "qa!"'):format(dir, 'set rtp^=' .. H.ROOT,
      ("lua package.preload.mcp = package.loadlib('%s/mcp.so', 'luaopen_mcp')"):format(H.ROOT),
      'let g:mcp_config = "' .. dir .. '/mcp.json"', 'w! ' .. report))
    assert.equal(0, status, out)
    local text = assert(io.open(report)):read('*a')
    os.execute('rm -rf ' .. dir)
    local version = require('helpers').native()._VERSION
    for _, line in ipairs({
      '- OK: ' .. version .. ', native, from a preloaded loader',
      '- OK: ' .. assert(assert(loadfile(H.ROOT .. '/lua/mcp/install.lua'))().platform()) .. ', Lua ABI luajit (',
      '- OK: config file ' .. dir .. '/mcp.json',
      '- ERROR: broken: MCP transport failed (127): ',
      '- OK: counter: 3 tools',
      '- INFO: off: disabled',
    }) do
      assert.is_truthy(text:find(line, 1, true), line .. '\nnot in:\n' .. text)
    end
  end)

  it('serves its buffers over HTTP to the TypeScript SDK client, asks the user without blocking, and never stalls its loop', function()
    local discovery = H.tmpname()
    local out, status = nvim(string.format([[
      local uv = vim.loop
      -- the user answers the question 300 ms after it is asked
      vim.ui.input = function(_, on_confirm)
        local t = uv.new_timer()
        t:start(300, 0, function() t:close(); vim.schedule(function() on_confirm('yes, ship it') end) end)
      end
      local buf = vim.api.nvim_create_buf(true, false)
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'one', 'two', 'three' })
      vim.api.nvim_buf_set_name(buf, 'notes.txt')
      vim.diagnostic.set(vim.api.nvim_create_namespace('spec'), buf,
        { { lnum = 1, col = 0, severity = vim.diagnostic.severity.WARN, message = 'two is odd' } })
      local last, longest = nil, 0
      local ticker = uv.new_timer()
      ticker:start(1, 1, function()
        local now = uv.hrtime()
        if last then longest = math.max(longest, (now - last) / 1e6) end
        last = now
      end)
      vim.g.mcp_server_discovery = %q
      local M = dofile(%q)
      local found = vim.fn.json_decode(table.concat(vim.fn.readfile(%q), '\n'))
      local calls = vim.fn.json_encode({ { 'list_buffers', vim.empty_dict() }, { 'read_buffer', { buffer = buf } },
        { 'replace_lines', { buffer = buf, first = 2, last = 2, lines = { 'TWO' } } }, { 'read_buffer', { buffer = buf } },
        { 'diagnostics', { buffer = buf } }, { 'ask_user', { question = 'Ship it?' } } })
      local stdout, got, exited = uv.new_pipe(false), {}, false
      uv.spawn('node', { args = { 'call_tools.mjs', M.url, calls }, cwd = %q, stdio = { nil, stdout, nil } },
        function() exited = true end)
      stdout:read_start(function(_, data) if data then got[#got + 1] = data end end)
      vim.wait(30000, function() return exited end, 5)
      vim.wait(200, function() return false end, 5)
      io.stdout:write('discovered ', tostring(found.url == M.url), '\n')
      io.stdout:write('results ', table.concat(got), '\n')
      io.stdout:write(string.format('longest gap %%.1f ms\n', longest))
      M.stop()
      io.stdout:write('discovery removed ', tostring(vim.fn.filereadable(%q) == 0), '\n')
      vim.cmd('qa!')
    ]], discovery, H.ROOT .. '/lua/examples/nvim_server.lua', discovery, H.ROOT .. '/spec/peers', discovery))
    assert.equal(0, status, out)
    assert.is_truthy(out:find('discovered true\n', 1, true), out)
    assert.is_truthy(out:find('discovery removed true\n', 1, true), out)
    local results = require('trace').decode(out:match('results ([^\n]+)\n'))
    assert.is_truthy(results, out)
    assert.is_truthy(results[1]:find('notes.txt', 1, true), results[1])
    assert.same({ 'one\ntwo\nthree', 'replaced lines 2..2 with 1 lines', 'one\nTWO\nthree', 'yes, ship it' },
      { results[2], results[3], results[4], results[6] })
    assert.same({ { line = 2, column = 1, severity = 'WARN', message = 'two is odd' } },
      require('trace').decode(results[5]).diagnostics)
    local gap = tonumber(out:match('longest gap (%S+) ms'))
    print(string.format('\n  Neovim serving over HTTP: longest tick gap %.1f ms', gap))
    -- a loop that waited for the user's answer would stand still for 300 ms
    assert.is_true(gap < 200, out)
  end)
end)

