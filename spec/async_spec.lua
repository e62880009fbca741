-- The async API: many requests in flight on one session, handles that
-- settle whatever order replies come in, and nothing that blocks a caller
-- who only asks. Against lua/servers/sleepy.lua (our own server that works
-- on requests concurrently) and server-everything over stdio and HTTP.
local H = require('helpers')

local mcp = H.native()

local function sleepy(extra)
  local log = H.tmpname()
  local opts = H.sleepy(log)
  for k, v in pairs(extra or {}) do opts[k] = v end
  return mcp.new(opts), log
end

local function cancellations(log)
  local text = H.slurp(log) or ''
  local seen = {}
  for line in text:gmatch('[^\n]+') do seen[#seen + 1] = line end
  return seen
end

describe('many requests in flight on one session', function()
  it('ten 300 ms calls end together, each result in its own handle', function()
    local client = sleepy()
    client:discover()
    local t0 = mcp.clock()
    local handles = {}
    for i = 1, 10 do
      handles[i] = client:call_async('sleep', { ms = 300, label = 'call ' .. i })
    end
    -- call_async returns at once: the ten are on the wire before any reply
    assert.is_true(mcp.clock() - t0 < 0.25)
    assert.is_true(mcp.wait_all(handles, 10))
    -- in series this takes 3 s; in flight together about 0.3 s
    assert.is_true(mcp.clock() - t0 < 1.5, 'took ' .. (mcp.clock() - t0) .. ' s')
    for i = 1, 10 do
      local text, is_error, result = handles[i]:wait()
      assert.equal('call ' .. i, text)
      assert.is_false(is_error)
      assert.equal('call ' .. i, result.content[1].text)
    end
    client:close()
  end)

  it('replies in reverse order still reach their own handles, and wait_any returns the first to finish', function()
    local client = sleepy()
    local handles = {}
    for i = 1, 5 do
      handles[i] = client:call_async('sleep', { ms = 600 - 100 * i, label = 'slept ' .. (600 - 100 * i) })
    end
    assert.equal(5, mcp.wait_any(handles, 10))
    assert.is_true(handles[5]:done())
    assert.is_false(handles[1]:done())
    for i = 1, 5 do
      assert.equal('slept ' .. (600 - 100 * i), (handles[i]:wait()))
    end
    client:close()
  end)

  it('a blocking call in between keeps the async replies that arrive while it waits', function()
    local client = sleepy()
    local early = client:call_async('sleep', { ms = 50, label = 'early' })
    assert.same({ 'blocking', false }, { H.pair(client:call('sleep', { ms = 300, label = 'blocking' })) })
    assert.is_true(early:done())
    assert.equal('early', (early:wait()))
    client:close()
  end)

  it('cancel reaches the server as notifications/cancelled and settles only its own handle', function()
    local client, log = sleepy()
    client:discover() -- in flight on a session: connected first
    local doomed = client:call_async('sleep', { ms = 5000 })
    local kept = client:call_async('sleep', { ms = 200, label = 'kept' })
    assert.is_true(doomed:cancel('changed my mind'))
    assert.is_false(doomed:cancel())
    assert.is_true(doomed:done())
    local ok, err = pcall(doomed.wait, doomed)
    assert.is_false(ok)
    assert.equal('MCP tools/call sleep cancelled', err)
    assert.equal('kept', (kept:wait()))
    -- the server stopped the sleeper: it logged the cancellation and never answered
    assert.same({ 'cancelled 3 changed my mind' }, cancellations(log))
    client:close()
  end)

  it("a handle's own timeout fails only that handle, and the server is told", function()
    local client, log = sleepy()
    local slow = client:call_async('sleep', { ms = 5000 }, { timeout = 0.2 })
    local fine = client:call_async('sleep', { ms = 400, label = 'fine' })
    local ok, err = pcall(slow.wait, slow)
    assert.is_false(ok)
    assert.equal('MCP tools/call sleep timed out after 0.2 s', err)
    assert.equal('fine', (fine:wait()))
    assert.same({ 'cancelled 2 timed out after 0.2 s' }, cancellations(log))
    client:close()
  end)

  it('wait with a timeout returns nothing and leaves the request running', function()
    local client = sleepy()
    local h = client:call_async('sleep', { ms = 300, label = 'later' })
    assert.equal(0, select('#', h:wait(0.05)))
    assert.is_false(h:done())
    assert.equal('later', (h:wait()))
    client:close()
  end)

  it('a server crash settles every handle in flight with the exit error; the next call starts anew', function()
    local client = sleepy()
    local handles = {}
    for i = 1, 3 do handles[i] = client:call_async('sleep', { ms = 5000 }) end
    local crash = client:call_async('crash', {})
    assert.is_true(mcp.wait_all(handles, 10))
    for _, h in ipairs({ handles[1], handles[2], handles[3], crash }) do
      local ok, err = pcall(h.wait, h)
      assert.is_false(ok)
      assert.equal('MCP transport failed (3): MCP server exited (' .. H.LUA .. ' ' .. H.ROOT
        .. '/lua/servers/sleepy.lua): crashing on purpose', err)
    end
    assert.equal('again', (client:call('sleep', { ms = 1, label = 'again' })))
    client:close()
  end)

  it('close with handles in flight settles them with the close error and cancels them at the server', function()
    local client, log = sleepy()
    client:discover() -- in flight on a session: connected first
    local handles = { client:call_async('sleep', { ms = 5000 }), client:call_async('sleep', { ms = 5000 }) }
    client:close()
    for _, h in ipairs(handles) do
      assert.is_true(h:done())
      local ok, err = pcall(h.wait, h)
      assert.is_false(ok)
      assert.equal('MCP tools/call sleep failed: the client was closed before the reply came', err)
    end
    assert.same({ 'cancelled 3 the client was closed', 'cancelled 4 the client was closed' }, cancellations(log))
  end)

  it('a collected client cancels what it had in flight; its handles say so', function()
    local client, log = sleepy()
    client:discover() -- in flight on a session: connected first
    local h = client:call_async('sleep', { ms = 5000 })
    client = nil
    collectgarbage()
    collectgarbage()
    local ok, err = pcall(h.wait, h)
    assert.is_false(ok)
    assert.equal('MCP tools/call sleep failed: its client was collected before the reply came'
      .. ' (keep a reference to the client while its requests run)', err)
    -- the cancellation was written before the server's stdin closed
    local deadline = mcp.clock() + 5
    while #cancellations(log) == 0 and mcp.clock() < deadline do os.execute('sleep 0.05') end
    assert.same({ 'cancelled 3 the client was collected' }, cancellations(log))
  end)
end)

describe('callbacks and dispatch', function()
  for _, method in ipairs({ 'discover', 'notify' }) do
    it('a settled handle\'s on_done runs after client:' .. method .. '(), as after every blocking method', function()
      local client = sleepy()
      client:discover()
      local ran = {}
      client:call_async('sleep', { ms = 1, label = 'a' }, { on_done = function(ok, text) ran[#ran + 1] = text end })
      -- The reply arrives meanwhile; nothing has looked at the handle.
      os.execute('sleep 0.2')
      assert.same({}, ran)
      if method == 'discover' then client:discover() else client:notify('notifications/roots/list_changed') end
      assert.same({ 'a' }, ran)
      client:close()
    end)
  end

  it('on_done runs from dispatch with the values call returns', function()
    local client = sleepy()
    local got
    client:call_async('sleep', { ms = 50, label = 'done' }, { on_done = function(...) got = { ... } end })
    local deadline = mcp.clock() + 5
    local ran = 0
    while not got and mcp.clock() < deadline do
      ran = ran + client:dispatch()
      os.execute('sleep 0.02')
    end
    assert.equal(1, ran)
    assert.equal(true, got[1])
    assert.equal('done', got[2])
    assert.equal(false, got[3])
    assert.equal('done', got[4].content[1].text)
    client:close()
  end)

  it('callbacks run in the order their requests settled, not the order of any table', function()
    local client = sleepy()
    client:discover()
    local ran = {}
    -- settle in the order 2, 4, 5, 3, 1
    for i, ms in ipairs({ 500, 100, 400, 200, 300 }) do
      client:call_async('sleep', { ms = ms, label = 'call ' .. i }, { on_done = function(_, text)
        ran[#ran + 1] = text
      end })
    end
    os.execute('sleep 0.8')
    assert.equal(5, client:dispatch())
    assert.same({ 'call 2', 'call 4', 'call 5', 'call 3', 'call 1' }, ran)
    client:close()
  end)

  it('mcp.wait_all runs on_done in the order the requests settled, not the order it took their outcomes in', function()
    local client = sleepy()
    client:discover()
    local ran, handles = {}, {}
    -- listed 1..5, settling in the order 5, 4, 3, 2, 1
    for i = 1, 5 do
      handles[i] = client:call_async('sleep', { ms = 600 - 100 * i, label = 'call ' .. i }, {
        on_done = function(_, text) ran[#ran + 1] = text end,
      })
    end
    os.execute('sleep 0.8')
    assert.is_true(mcp.wait_all(handles, 10))
    assert.same({ 'call 5', 'call 4', 'call 3', 'call 2', 'call 1' }, ran)
    client:close()
  end)

  it('mcp.wait_all keeps the order of forty calls answered in order, as dispatch does', function()
    local client = mcp.new({ command = H.COUNTER })
    client:discover()
    local ran, handles = {}, {}
    for i = 1, 40 do
      handles[i] = client:call_async('increment', { by = 1 }, { on_done = function(_, text) ran[#ran + 1] = tonumber(text) end })
    end
    assert.is_true(mcp.wait_all(handles, 10))
    local expected = {}
    for i = 1, 40 do expected[i] = i end
    assert.same(expected, ran)
    client:close()
  end)

  it('8,000 requests queued before a slow server is up are made in linear time and their callbacks run in order', function()
    local client = mcp.new({ command = 'sleep 0.5; exec ' .. H.COUNTER, timeout = 60 })
    local ran, handles = {}, {}
    local t0 = mcp.clock()
    for i = 1, 8000 do
      handles[i] = client:call_async('increment', { by = 1 }, { on_done = function(_, text) ran[#ran + 1] = tonumber(text) end })
    end
    -- 13.5 s when each new request looked at every pending one; 0.05 s now
    local made = mcp.clock() - t0
    assert.is_true(made < 4, 'made in ' .. made .. ' s')
    assert.is_true(mcp.wait_all(handles, 60))
    assert.equal(8000, #ran)
    for i = 1, 8000 do
      if ran[i] ~= i then error('callback ' .. i .. ' ran for the reply ' .. tostring(ran[i])) end
    end
    client:close()
  end)

  it('on_done gets false and the error when the request fails, and may call the client again', function()
    local client = sleepy()
    local got, chained
    client:call_async('nope', {}, { on_done = function(ok, err)
      got = { ok, err }
      chained = client:call('sleep', { ms = 1, label = 'chained' })
    end })
    local h = client:call_async('sleep', { ms = 100 })
    h:wait()
    assert.same({ false, 'MCP tools/call nope failed: Unknown tool: nope (code -32602)' }, got)
    assert.equal('chained', chained)
    client:close()
  end)

  it('dispatch inside a callback of the same client is refused with a clear error', function()
    local refusals = {}
    local client
    client = mcp.new(H.sleepy())
    client = mcp.new({ command = H.sleepy().command, on_notification = function()
      local ok, err = pcall(client.dispatch, client)
      refusals[#refusals + 1] = ok and 'ran' or err
    end })
    client:call_async('chatty', { n = 1 }, { on_done = function()
      local ok, err = pcall(client.dispatch, client)
      refusals[#refusals + 1] = ok and 'ran' or err
    end })
    local deadline = mcp.clock() + 5
    while #refusals < 2 and mcp.clock() < deadline do
      client:dispatch()
      os.execute('sleep 0.02')
    end
    local refusal = 'MCP: client:dispatch() cannot run inside a callback of the same client'
      .. ' (on_notification, a handler or on_done); return from the callback first'
    assert.same({ refusal, refusal }, refusals)
    client:close()
  end)

  it('the descriptor from client:fd() becomes readable when a reply is ready, and when a timeout is due', function()
    local uv = require('luv')
    local client = sleepy()
    client:discover() -- in flight on a session: connected first
    local fd = client:fd()
    local function readable_within(ms)
      local poll, timer, woke = uv.new_poll(fd), uv.new_timer(), false
      poll:start('r', function() woke = true; uv.stop() end)
      timer:start(ms, 0, function() uv.stop() end)
      uv.run()
      poll:stop(); poll:close(); timer:close()
      uv.run('nowait')
      return woke
    end
    local h = client:call_async('sleep', { ms = 100, label = 'ready' })
    assert.is_false(readable_within(20))
    assert.is_true(readable_within(5000))
    assert.equal(0, client:dispatch())
    assert.is_false(readable_within(20))
    assert.equal('ready', (h:wait()))
    -- no message comes for a request that runs out of time: the timer rings
    local t = client:call_async('sleep', { ms = 5000 }, { timeout = 0.1 })
    client:dispatch()
    assert.is_true(readable_within(5000))
    client:dispatch()
    assert.is_true(t:done())
    client:close()
  end)

  it("an error in on_done reaches dispatch's caller, and the other ready callbacks wait for the next dispatch", function()
    local client = sleepy()
    client:discover() -- in flight on a session: connected first
    local ran = {}
    for _, label in ipairs({ 'a', 'b' }) do
      client:call_async('sleep', { ms = 10, label = label }, { on_done = function(_, text)
        ran[#ran + 1] = text
        error('on_done failed for ' .. text, 0)
      end })
    end
    os.execute('sleep 0.3') -- both settle meanwhile (a call would run their on_done)
    local _, first = pcall(client.dispatch, client)
    assert.same({ 'on_done failed for ' .. ran[1] }, { first })
    assert.equal(1, #ran)
    local _, second = pcall(client.dispatch, client)
    assert.same({ 'on_done failed for ' .. ran[2] }, { second })
    table.sort(ran)
    assert.same({ 'a', 'b' }, ran)
    assert.equal(0, client:dispatch())
    assert.equal('after', (client:call('sleep', { ms = 1, label = 'after' })))
    client:close()
  end)

  it('an error in on_progress ends the call with that error and cancels it at the server #peer', function()
    local client = mcp.new({ command = H.everything_argv() })
    local t0 = mcp.clock()
    assert.has_error(function()
      client:call('trigger-long-running-operation', { duration = 10, steps = 50 },
        { on_progress = function() error('seen enough', 0) end })
    end, 'seen enough')
    assert.is_true(mcp.clock() - t0 < 5, 'the call ran on for ' .. (mcp.clock() - t0) .. ' s')
    assert.equal('Echo: after', (client:call('echo', { message = 'after' })))
    client:close()
  end)

  -- lua.c's SIGINT handler raises "interrupted!" from inside whatever Lua
  -- code runs next: here, a callback that takes its time.
  for _, case in ipairs({
    { 'on_done run from dispatch', [[
        c:call_async('sleep', { ms = 10 }, { on_done = busy })
        os.execute('sleep 0.1')
        local ok, err = pcall(function() while mcp.clock() - t0 < 6 do c:dispatch() end end)
        report(ok, err)]] },
    { 'on_notification during a call', [[
        local ok, err = pcall(c.call, c, 'chatty', { n = 1 })
        report(ok, err)]], 'on_notification = busy' },
  }) do
    it('SIGINT inside ' .. case[1] .. ' stops the host', function()
      local out, status = H.run_lua(string.format([[
        local mcp = require('mcp')
        local f = io.open('/proc/self/stat')
        local self_pid = f:read('*n')
        f:close()
        local function busy() local t = mcp.clock(); while mcp.clock() - t < 4 do end end
        local c = mcp.new({ command = { %q, %q }, %s })
        c:call('sleep', { ms = 1 })
        os.execute(string.format('(sleep 0.5; kill -INT %%d) &', self_pid))
        local t0 = mcp.clock()
        local function report(ok, err)
          print(string.format('returned after %%.2f s: %%s %%s', mcp.clock() - t0, tostring(ok), tostring(err)))
        end
        %s
        c:close()
      ]], H.LUA, H.ROOT .. '/lua/servers/sleepy.lua', case[3] or '', case[2]))
      assert.equal(0, status, out)
      local seconds, raised = out:match('returned after (%S+) s: false ([^\n]*)')
      assert.is_truthy(raised and raised:find('interrupted!$'), out)
      assert.is_true(tonumber(seconds) < 3, out)
    end)
  end
end)

describe('the async API on other clients', function()
  it('a fixture transport answers at once: the handle is settled when call_async returns', function()
    local client = mcp.new({ transport = H.server({}) })
    client:discover()
    local h = client:call_async('echo', { text = 'hi' })
    assert.is_true(h:done())
    assert.same({ client:call('echo', { text = 'hi' }) }, { h:wait() })
  end)

  it('wrong arguments are refused with what to pass', function()
    local client = sleepy()
    local h = client:call_async('sleep', { ms = 1 })
    local ok, err = pcall(mcp.wait_any, { h, {} })
    assert.is_false(ok)
    assert.equal('mcp.wait_any: handles[2] is not a handle from call_async or request_async', err)
    ok, err = pcall(client.call_async, client, 'sleep', {}, { timeout = 'soon' })
    assert.equal('client:call_async: opts.timeout must be a number of seconds from 0.001 to 1e7', err)
    ok, err = pcall(client.request, client, 42)
    assert.equal('client:request: the method must be a string, got number', err)
    h:wait()
    client:close()
  end)

  it('waits across two servers at once', function()
    local a, b = sleepy(), mcp.new({ command = H.everything_argv() })
    local handles = {
      a:call_async('sleep', { ms = 300, label = 'a' }),
      b:call_async('echo', { message = 'b' }),
      b:request_async('tools/list'),
    }
    assert.is_true(mcp.wait_all(handles, 30))
    assert.equal('a', (handles[1]:wait()))
    assert.equal('Echo: b', (handles[2]:wait()))
    assert.is_true(#handles[3]:wait().tools >= 10)
    a:close()
    b:close()
  end)

  it("server-everything's long-running operations run together over stdio #peer", function()
    local client = mcp.new({ command = H.everything_argv() })
    client:discover()
    local t0 = mcp.clock()
    local handles = {}
    for i = 1, 3 do
      handles[i] = client:call_async('trigger-long-running-operation', { duration = 1, steps = 2 })
    end
    assert.is_true(mcp.wait_all(handles, 30))
    assert.is_true(mcp.clock() - t0 < 2.5, 'took ' .. (mcp.clock() - t0) .. ' s')
    for i = 1, 3 do
      assert.is_truthy((handles[i]:wait()):find('Long running operation completed', 1, true))
    end
    client:close()
  end)

  it("server-everything's long-running operations run together over HTTP #peer", function()
    local url, stop = H.everything_http()
    local client = mcp.new({ url = url })
    client:discover()
    local t0 = mcp.clock()
    local handles = {}
    for i = 1, 3 do
      handles[i] = client:call_async('trigger-long-running-operation', { duration = 1, steps = 2 })
    end
    handles[4] = client:request_async('tools/list')
    handles[5] = client:call_async('echo', { message = 'meanwhile' })
    assert.equal(5, mcp.wait_any({ handles[1], handles[2], handles[3], handles[4], handles[5] }, 30) and 5 or 0)
    assert.is_true(mcp.wait_all(handles, 30))
    assert.is_true(mcp.clock() - t0 < 2.5, 'took ' .. (mcp.clock() - t0) .. ' s')
    for i = 1, 3 do
      assert.is_truthy((handles[i]:wait()):find('Long running operation completed', 1, true))
    end
    assert.is_true(#handles[4]:wait().tools >= 10)
    assert.equal('Echo: meanwhile', (handles[5]:wait()))
    local slow = client:call_async('trigger-long-running-operation', { duration = 5, steps = 5 })
    assert.is_true(slow:cancel())
    client:close()
    stop()
  end)
end)
