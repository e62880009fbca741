-- Record a real session once, replay it with the server gone: an agent's
-- tests then need no server.
local H = require('helpers')
local trace = require('trace')

local mcp = H.native()

local function lines(path)
  local out = {}
  for line in io.lines(path) do out[#out + 1] = trace.decode(line) end
  return out
end

-- What an agent does with a client; every return, for comparing.
local function session(client)
  local out = {}
  local tools = client:discover()
  out.tool_names = {}
  for _, t in ipairs(tools) do out.tool_names[#out.tool_names + 1] = t.name end
  out.echo = { client:call('echo', { message = 'recorded' }) }
  out.sum = { client:call('get-sum', { a = 2, b = 3 }) }
  out.resource = client:read_resource('demo://resource/static/document/architecture.md')
  out.unknown = { client:call('no-such-tool', {}) }
  out.echo_again = { client:call('echo', { message = 'recorded' }) }
  return out
end

describe('record and replay', function()
  it('a session with server-everything replays with the server gone, with the same returns #peer', function()
    local path = H.tmpname() .. '.jsonl'
    local live = mcp.new({ command = H.everything_argv(), record = path })
    local recorded = session(live)
    live:close()
    assert.is_true(recorded.unknown[2], 'an isError result is part of the session')
    -- every line is {"dir", "msg", "t"}
    local entries = lines(path)
    assert.equal('send', entries[1].dir)
    assert.equal('initialize', entries[1].msg.method)
    assert.equal('recv', entries[2].dir)
    assert.equal(1, entries[2].msg.id)
    for i, e in ipairs(entries) do
      assert.is_true(type(e.t) == 'number' and (i == 1 or e.t >= entries[i - 1].t))
    end
    local replayed = mcp.replay(path)
    assert.same(recorded, session(replayed))
    local ok, err = pcall(replayed.call, replayed, 'echo', { message = 'never recorded' })
    assert.is_false(ok)
    assert.equal('MCP replay: no recorded reply for tools/call {"arguments":{"message":"never recorded"},"name":"echo"}', err)
    replayed:close()
    os.remove(path)
  end)

  it('notifications come back in their order, as on_notification saw them', function()
    local path = H.tmpname() .. '.jsonl'
    local seen = {}
    local function watch(list) return function(m) list[#list + 1] = m.method .. ' ' .. tostring(m.params.progress) end end
    local live = mcp.new({ command = H.everything_argv(), record = path, on_progress = function() end,
      on_notification = watch(seen) })
    live:discover()
    local text = live:call('trigger-long-running-operation', { duration = 0.3, steps = 3 }, { on_progress = function() end })
    live:close()
    local again = {}
    local replayed = mcp.replay(path, { on_notification = watch(again) })
    replayed:discover()
    assert.equal(text, (replayed:call('trigger-long-running-operation', { duration = 0.3, steps = 3 },
      { on_progress = function() end })))
    replayed:close()
    assert.is_true(#seen >= 3, 'progress notifications were recorded: ' .. #seen)
    assert.same(seen, again)
    os.remove(path)
  end)

  it('over HTTP the headers are never written, so a key stays out of the file #peer', function()
    local url, stop = H.everything_http()
    local path = H.tmpname() .. '.jsonl'
    local client = mcp.new({ url = url, headers = { Authorization = 'Bearer sk-very-secret' }, record = path })
    client:discover()
    assert.equal('Echo: x', (client:call('echo', { message = 'x' })))
    client:close()
    stop()
    local text = H.slurp(path)
    assert.is_falsy(text:find('sk-very-secret', 1, true))
    local replayed = mcp.replay(path)
    replayed:discover()
    assert.equal('Echo: x', (replayed:call('echo', { message = 'x' })))
    replayed:close()
    os.remove(path)
  end)

  it('mcp.new refuses a recording path it cannot write, at once', function()
    local ok, err = pcall(mcp.new, { command = H.COUNTER, record = '/nonexistent-dir/session.jsonl' })
    assert.is_false(ok)
    assert.equal('mcp.new: cannot open opts.record /nonexistent-dir/session.jsonl: No such file or directory (os error 2)', err)
  end)

  it('a recording is created readable by its owner only, and one made before is closed to others', function()
    local path = H.tmpname() .. '.jsonl'
    local c = mcp.new({ command = H.COUNTER, record = path })
    c:close()
    assert.equal('600', H.command('stat -c %a ' .. path):match('%d+'))
    os.execute('chmod 644 ' .. path)
    c = mcp.new({ command = H.COUNTER, record = path })
    c:close()
    assert.equal('600', H.command('stat -c %a ' .. path):match('%d+'))
    os.remove(path)
  end)

  it('a symbolic link at the recording path is refused and its target left alone', function()
    local target = H.tmpname()
    local link = H.tmpname() .. '.jsonl'
    local f = assert(io.open(target, 'w'))
    f:write('theirs\n')
    f:close()
    os.execute('ln -s ' .. target .. ' ' .. link)
    local ok, err = pcall(mcp.new, { command = H.COUNTER, record = link })
    assert.is_false(ok)
    assert.equal('mcp.new: cannot open opts.record ' .. link .. ': it is a symbolic link; give the file\'s own path', err)
    assert.equal('theirs\n', H.slurp(target))
    os.remove(link)
    os.remove(target)
  end)

  it('a recording that is not one is refused at mcp.replay, naming the line', function()
    local path = H.tmpname() .. '.jsonl'
    local f = assert(io.open(path, 'w'))
    f:write('{"dir":"send","msg":{"jsonrpc":"2.0","method":"notifications/initialized"},"t":0}\nnot json\n{"dir":"se')
    f:close()
    local ok, err = pcall(mcp.replay, path)
    assert.is_false(ok)
    assert.equal('mcp.replay: ' .. path .. ':2 is not a recorded message', err)
    os.remove(path)
    ok, err = pcall(mcp.replay, path)
    assert.equal('mcp.replay: cannot read ' .. path .. ': No such file or directory (os error 2)', err)
  end)
end)
