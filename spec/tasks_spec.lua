-- Tool calls a server makes tasks: followed to their end at the server's
-- poll interval, their input given once, cancelled with tasks/cancel.
-- Real peers: rmcp 3.11's task runtime (2026-07-28, the Tasks extension)
-- over stdio and HTTP, and server-everything's simulate-research-query
-- (2025-11-25 tasks); spec/servers/tasks.lua plays the failures.
local H = require('helpers')

local mcp = H.native()
local TASKS = { H.LUA, H.ROOT .. '/spec/servers/tasks.lua' }
local RMCP = H.ROOT .. '/target/peers/release/rmcp-tasks-peer'

describe('a task server that fails in the ways a real one can', function()
  local client, asked
  before_each(function()
    asked = 0
    client = mcp.new({ command = TASKS, handlers = { ['elicitation/create'] = function()
      asked = asked + 1
      return { action = 'accept', content = { choice = 'b' } }
    end } })
  end)
  after_each(function() client:close() end)

  local function raised(tool)
    local ok, err = pcall(client.call, client, tool, {}, { task = true })
    assert.is_false(ok)
    return err
  end

  it('a task that completes gives the call its result; a plain call never declares the extension', function()
    assert.equal('done', (client:call('finishes', {}, { task = true })))
    assert.equal('plain finishes', (client:call('finishes', {})))
    local seen = client:call('seen', {})
    assert.truthy(seen:find('tools/call declared\ntasks/get task%-1 declared\n'))
    assert.truthy(seen:find('\ntools/call\n'))
  end)

  it('a task the server cancels fails the call with its status message', function()
    assert.equal('MCP tools/call cancels failed: the server cancelled its task task-1: operator stopped it', raised('cancels'))
  end)

  it('a failed task raises its JSON-RPC error as a refused call does', function()
    assert.equal('MCP tools/call fails failed: quota exceeded (code -32000)', raised('fails'))
  end)

  it('a task lost when its server restarted is said so', function()
    assert.equal('MCP tools/call restarts failed: the server no longer knows its task task-1 (the task expired, '
      .. 'or the server restarted and lost it); call the tool again', raised('restarts'))
  end)

  it('a task still working past its ttl ends the call instead of polling for ever', function()
    assert.equal('MCP tools/call lingers failed: its task task-1 was still working 200 ms after it was made, '
      .. 'past the time the server gave it to live; the server may have discarded it', raised('lingers'))
  end)

  it('a task with no id, or a status nobody knows, is refused', function()
    assert.equal("MCP tools/call nameless failed: the server's answer about its task is unusable: "
      .. 'it made the call a task with no taskId', raised('nameless'))
    assert.equal("MCP tools/call odd failed: the server's answer about its task is unusable: "
      .. 'its status is paused, which this client does not know', raised('odd'))
  end)

  it('an input a poll still lists after it was answered is not asked of the user twice', function()
    assert.equal('answered {"action":"accept","content":{"choice":"b"}}', (client:call('asks', {}, { task = true })))
    assert.equal(1, asked)
    assert.truthy(client:call('seen', {}):find('tasks/update task%-1 declared'))
  end)

  it('handle:status() shows the task, and cancel sends tasks/cancel and settles the handle', function()
    local h = client:call_task('slow', {})
    assert.is_nil(mcp.wait_any({ h }, 0.2))
    local status = h:status()
    assert.equal('task-1', status.taskId)
    assert.equal('working', status.status)
    assert.is_true(h:cancel())
    local ok, err = pcall(h.wait, h)
    assert.is_false(ok)
    assert.equal('MCP tools/call slow cancelled', err)
    assert.truthy(client:call('seen', {}):find('tasks/cancel task%-1 declared'))
  end)

  it('a poll answered about another task fails the call, and the task keeps the id the call owns', function()
    local h = client:call_task('impostor', {})
    local ok, err = pcall(h.wait, h, 10)
    assert.is_false(ok)
    assert.equal('MCP tools/call impostor failed: the server\'s answer about its task is unusable: '
      .. 'asked about task task-1, it answered about task someone-elses-task', err)
    assert.equal('task-1', h:status().taskId)
  end)

  it('a task status that is 1 MB of JSON is quoted bounded and inert', function()
    local err = raised('strange')
    assert.equal('MCP tools/call strange failed: the server\'s answer about its task is unusable: its status is '
      .. '{"junk":"\239\191\189' .. ('x'):rep(54) .. '... (1048524 more characters), which is not a string', err)
  end)

  -- OSC 52 (a clipboard write) and a screen clear, 320,000 characters of
  -- them, as the method of an input request no handler answers.
  local function hostile_method_quoted()
    local method = ('\27]52;c;aGk=\7\27[2J'):rep(20000)
    local shown = method:sub(1, 64):gsub('%c', '\239\191\189')
    return shown .. '... (' .. (#method - 64) .. ' more characters)'
  end

  for _, case in ipairs({ { 'a task', 'asks_oddly', { task = true } }, { 'an input round', 'round_oddly' } }) do
    it('the method of ' .. case[1] .. '\'s input request is quoted bounded and inert in the error', function()
      local ok, err = pcall(client.call, client, case[2], {}, case[3])
      assert.is_false(ok)
      local m = hostile_method_quoted()
      assert.equal('MCP tools/call ' .. case[2] .. ' failed: the server asked for ' .. m
        .. ' and it could not be given: there is no handler for it (set opts.handlers["' .. m .. '"])', err)
    end)
  end

  it('200 tasks waited for together all move at once: wait_all settles them within its bound', function()
    local hs = {}
    for i = 1, 200 do hs[i] = client:call_task('finishes', {}) end
    -- each finishes on its second poll, 20 ms apart: 20 s in all when
    -- only the first unsettled handle was polled
    local t0 = mcp.clock()
    assert.is_true(mcp.wait_all(hs, 10))
    local took = mcp.clock() - t0
    for i = 1, 200 do assert.equal('done', (hs[i]:wait())) end
    assert.is_true(took < 10, took)
  end)

  it('Ctrl-C during a blocking task call sends tasks/cancel before Lua gets its thread back', function()
    local out, status = H.run_lua(string.format([[
      local mcp = require('mcp')
      local f = io.open('/proc/self/stat')
      local self_pid = f:read('*n')
      f:close()
      local c = mcp.new({ command = { %q, %q }, timeout = 1 })
      os.execute(string.format('(sleep 0.5; kill -INT %%d) &', self_pid))
      local ok, err = pcall(c.call, c, 'slow', {}, { task = true })
      print('raised: ' .. tostring(err))
      print(c:call('seen', {}))
      c:close()
    ]], H.LUA, TASKS[2]))
    assert.equal(0, status, out)
    assert.is_truthy(out:find('raised: [^\n]*interrupted!\n'), out)
    assert.is_truthy(out:find('tasks/cancel task%-1 declared'), out)
  end)

  it('opts.task must be true or a table', function()
    local ok, err = pcall(client.call, client, 'plain', {}, { task = 'yes' })
    assert.is_false(ok)
    assert.equal('client:call: opts.task must be true or a table ({ ttl = seconds })', err)
  end)
end)

for _, transport in ipairs({ 'stdio', 'HTTP' }) do
  describe('rmcp 3.11 task server over ' .. transport .. ' #peer', function()
    local where, stop
    setup(function()
      if transport == 'HTTP' then
        local port = H.port()
        local _
        _, stop = H.start(RMCP .. ' --http ' .. port, 'listening on')
        where = { url = 'http://127.0.0.1:' .. port .. '/mcp' }
      else
        where = { command = { RMCP } }
      end
    end)
    teardown(function() if stop then stop() end end)

    local function client()
      local opts = { handlers = { ['elicitation/create'] = function(p)
        return { action = 'accept', content = { name = 'Ada' } }
      end } }
      for k, v in pairs(where) do opts[k] = v end
      return mcp.new(opts)
    end

    it('runs a call as a task when asked, and at once when not', function()
      local c = client()
      assert.equal('3', (c:call('slow_sum', { a = 1, b = 2, ms = 100 }, { task = true })))
      assert.equal('3', (c:call('slow_sum', { a = 1, b = 2 })))
      assert.equal('2026-07-28', c.negotiated_version)
      c:close()
    end)

    it('answers the elicitation a task asks for, and calls a task-only tool declaring the extension it requires', function()
      local c = client()
      assert.equal('hello Ada', (c:call('ask_name', {})))
      c:close()
    end)

    it('raises a failed task as its error, and an expired one as the server says', function()
      local c = client()
      local ok, err = pcall(c.call, c, 'broken', {}, { task = true })
      assert.equal('MCP tools/call broken failed: the disk is full (code -32603)', err)
      ok, err = pcall(c.call, c, 'outlives_ttl', {}, { task = true })
      assert.is_false(ok)
      assert.equal('MCP tools/call outlives_ttl failed: task expired: TTL elapsed before completion (code -32603)', err)
      c:close()
    end)

    it('cancels a running task', function()
      local c = client()
      local h = c:call_task('slow_sum', { a = 5, b = 6, ms = 5000 })
      local deadline = mcp.clock() + 10
      while not h:status() and mcp.clock() < deadline do mcp.wait_any({ h }, 0.05) end
      assert.equal('working', h:status().status)
      assert.is_true(h:cancel())
      local _, err = pcall(h.wait, h)
      assert.equal('MCP tools/call slow_sum cancelled', err)
      assert.equal('11', (c:call_task('slow_sum', { a = 5, b = 6, ms = 200 }):wait()))
      c:close()
    end)
  end)
end

describe('a luv loop beside a task #peer', function()
  it('keeps ticking while the task is polled, and the descriptor rings at each poll', function()
    local out = H.run_lua(string.format([[
      local uv = require('luv')
      local mcp = require('mcp')
      local c = mcp.new({ command = { %q } })
      local watcher = uv.new_poll(c:fd())
      watcher:start('r', function() c:dispatch() end)
      local last, worst = uv.hrtime(), 0
      local timer = uv.new_timer()
      timer:start(1, 1, function()
        local now = uv.hrtime()
        worst = math.max(worst, (now - last) / 1e6)
        last = now
      end)
      c:call_task('slow_sum', { a = 1, b = 2, ms = 500 }, { on_done = function(ok, text)
        print(ok, text)
        watcher:stop()
        timer:stop()
      end })
      uv.run()
      print(string.format('worst %%.1f', worst))
      c:close()
    ]], RMCP))
    assert.truthy(out:find('true\t3\n'), out)
    assert.is_true(tonumber(out:match('worst (%S+)')) < 100, out)
  end)
end)

describe('server-everything, a 2025-11-25 task server #peer', function()
  it('runs a task-only tool as a task, answering the elicitation it sends through tasks/result', function()
    local questions = {}
    local c = mcp.new({ command = H.everything_argv(), protocol_version = '2025-11-25', handlers = {
      ['elicitation/create'] = function(p)
        questions[#questions + 1] = p.message
        return { action = 'accept', content = { interpretation = 'technical' } }
      end,
    } })
    c:discover()
    local h = c:call_async('simulate-research-query', { topic = 'python', ambiguous = true })
    local text = h:wait(30)
    assert.truthy(text:find('# Research Report: python (technical)', 1, true), text)
    assert.equal(1, #questions)
    -- Last described when it asked for input: its result came by tasks/result.
    assert.equal('input_required', h:status().status)
    assert.equal('string', type(h:status().taskId))
    c:close()
  end)
end)
