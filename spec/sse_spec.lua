-- The 2024-11-05 HTTP+SSE transport: chosen with opts.transport_kind =
-- "sse" (or a config's "type": "sse"), or found by the fallback the
-- 2025-03-26 revision describes (an initialize POST refused with 400,
-- 404 or 405, then a GET of the same URL). Against the TypeScript SDK's
-- SSEServerTransport (spec/peers/echo_server.mjs sse), the Python SDK's
-- sse_app (spec/peers/legacy_server.py sse, mcp 1.30) and
-- spec/servers/sse_faults.py, which misbehaves on demand.
local H = require('helpers')

local mcp = H.native()
local PEERS = H.ROOT .. '/spec/peers/'
local peer_it = H.WINDOWS and pending or it

local function serve(command)
  local _, stop, out = H.start(command, 'listening %d+')
  return 'http://127.0.0.1:' .. out:match('listening (%d+)'), stop
end

local function faults(mode)
  return serve('python3 ' .. H.ROOT .. '/spec/servers/sse_faults.py ' .. mode)
end

-- How many streams the fault server opened.
local function streams_opened(base)
  local p = io.popen('curl -s ' .. base .. '/count')
  local n = tonumber(p:read('*a'))
  p:close()
  return n
end

describe('HTTP+SSE (2024-11-05)', function()
  peer_it('the TypeScript SDK\'s SSE server: named, and found by the fallback from a refused POST #peer', function()
    local base, stop = serve('node ' .. PEERS .. 'echo_server.mjs sse 0')
    for _, kind in ipairs({ 'sse', false }) do
      local client = mcp.new({ url = base .. '/sse', transport_kind = kind or nil, timeout = 10 })
      local tools = client:discover()
      assert.same({ 'echo' }, { tools[1].name })
      assert.equal('Echo: hi', client:call('echo', { message = 'hi' }))
      assert.equal('Echo: async', client:call_async('echo', { message = 'async' }):wait(10))
      client:close()
    end
    stop()
  end)

  peer_it('the Python SDK\'s SSE server (mcp 1.30 sse_app): found by the fallback, async from an event loop #peer', function()
    local base, stop = serve(PEERS .. 'python-v1/bin/python ' .. PEERS .. 'legacy_server.py sse 0')
    local client = mcp.new({ url = base .. '/sse', timeout = 10 })
    local fd = client:fd()
    assert.is_number(fd)
    local handle = client:discover_async()
    assert.same({ 'add', 'echo' }, (function()
      local names = {}
      for _, tool in ipairs(handle:wait(10)) do names[#names + 1] = tool.name end
      table.sort(names)
      return names
    end)())
    assert.equal('5', client:call('add', { a = 2, b = 3 }))
    client:close()
    stop()
  end)

  it('a stream that ends ends its session: the next call starts another', function()
    local base, stop = faults('ends')
    local client = mcp.new({ url = base .. '/sse', transport_kind = 'sse', timeout = 5 })
    assert.equal('one', client:call('echo', { text = 'one' }))
    assert.equal('two', client:call('echo', { text = 'two' }))
    assert.equal('three', client:call_async('echo', { text = 'three' }):wait(5))
    assert.equal(3, streams_opened(base))
    client:close()
    stop()
  end)

  it('an endpoint on another origin is refused: nothing is posted there', function()
    local base, stop = faults('foreign')
    local client = mcp.new({ url = base .. '/sse', transport_kind = 'sse', timeout = 5 })
    local ok, err = pcall(client.call, client, 'echo', { text = 'x' })
    assert.same({ false, 'MCP transport failed (8): the HTTP+SSE server at ' .. base .. '/sse named'
      .. ' "http://evil.example/messages?session=1" as its message endpoint, on another origin: refused, since your'
      .. ' headers and credentials stay with the origin they were given for' }, { ok, err })
    client:close()
    stop()
  end)

  it('a stream that names no endpoint fails within opts.connect_timeout', function()
    local base, stop = faults('silent')
    local client = mcp.new({ url = base .. '/sse', transport_kind = 'sse', connect_timeout = 0.5 })
    local started = mcp.clock()
    local ok, err = pcall(client.call, client, 'echo', { text = 'x' })
    assert.same({ false, 'MCP transport failed (28): the HTTP+SSE stream of ' .. base .. '/sse named no endpoint'
      .. ' within 0.5 s (opts.connect_timeout)' }, { ok, err })
    assert.is_true(mcp.clock() - started < 5)
    client:close()
    stop()
  end)

  it('credentials go with the stream and every POST; a refused stream is a refusal of credentials', function()
    local base, stop = faults('token')
    local client = mcp.new({ url = base .. '/sse', transport_kind = 'sse', auth = { token = 's3cret' }, timeout = 5 })
    assert.equal('in', client:call('echo', { text = 'in' }))
    client:close()
    local stranger = mcp.new({ url = base .. '/sse', transport_kind = 'sse', timeout = 5 })
    local ok, err = pcall(stranger.call, stranger, 'echo', { text = 'x' })
    assert.same({ false, 'MCP transport failed (401): the server at ' .. base .. '/sse refused the request (HTTP 401,'
      .. ' WWW-Authenticate: Bearer realm="sse-faults"); it needs credentials: set opts.auth.token (or'
      .. ' opts.headers.Authorization)' }, { ok, err })
    stranger:close()
    stop()
  end)

  it('a URL that is neither keeps the POST\'s own refusal; transport_kind = "http" never falls back', function()
    local base, stop = faults('counted')
    local refused = mcp.new({ url = base .. '/nothing', transport_kind = 'http', timeout = 5 })
    local ok, err = pcall(refused.call, refused, 'echo', { text = 'x' })
    assert.is_false(ok)
    assert.truthy(err:find('^MCP transport failed %(404%)'), err)
    assert.equal(0, streams_opened(base))
    refused:close()
    assert.has_error(function() mcp.new({ url = base, transport_kind = 'websocket' }) end,
      'mcp.new: opts.transport_kind must be "http" or "sse"')
    assert.has_error(function() mcp.new({ url = base, transport_kind = 'sse', era = 'modern' }) end,
      'mcp.new: opts.era = "modern" does not go with opts.transport_kind = "sse" (the HTTP+SSE transport predates'
        .. ' the 2026-07-28 revision)')
    stop()
  end)

  if io.open('/proc/self/status') then
    it('close lets go of every stream, socket and thread', function()
      local base, stop = faults('counted')
      local stat = io.open('/proc/self/stat')
      local pid = H.int(stat:read('*n'))
      stat:close()
      local function held()
        local p = io.popen('ls /proc/' .. pid .. '/fd | wc -l; grep ^Threads /proc/' .. pid .. '/status')
        local out = p:read('*a')
        p:close()
        local fds, threads = out:match('(%d+)%s+Threads:%s+(%d+)')
        return tonumber(fds), tonumber(threads)
      end
      local warm = mcp.new({ url = base .. '/sse', transport_kind = 'sse', timeout = 5 })
      warm:call('echo', { text = 'warm' })
      warm:close()
      os.execute('sleep 0.2')
      local fds, threads = held()
      for i = 1, 5 do
        local client = mcp.new({ url = base .. '/sse', transport_kind = 'sse', timeout = 5 })
        assert.equal('n' .. i, client:call('echo', { text = 'n' .. i }))
        client:close()
      end
      -- No more than before (one an earlier spec left may have gone),
      -- once the poll thread has let go of the last stream (a loaded
      -- machine may take a moment).
      local fds_after, threads_after
      for _ = 1, 40 do
        fds_after, threads_after = held()
        if fds_after <= fds and threads_after <= threads then break end
        os.execute('sleep 0.05')
      end
      assert.is_true(fds_after <= fds and threads_after <= threads,
        string.format('descriptors %d -> %d, threads %d -> %d', fds, fds_after, threads, threads_after))
      stop()
    end)
  end
end)
