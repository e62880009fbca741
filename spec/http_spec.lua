-- The native Streamable HTTP transport, against server-everything in
-- streamableHttp mode (on 127.0.0.1 only) and against a fault server of our
-- own (spec/servers/http_faults.js) for what a real server will not do on
-- demand.
local H = require('helpers')
local trace = require('trace')

local mcp = H.native()

local function fetch_log(base)
  -- The fault server's request log, read through a fixture-free path: a
  -- tiny node one-liner, so the assertion does not trust our own client.
  local p = io.popen('node -e "fetch(\'' .. base .. '/log\').then(r => r.text()).then(t => process.stdout.write(t))"')
  local text = p:read('*a')
  p:close()
  return assert(trace.decode(text))
end

describe('HTTP against server-everything #peer', function()
  local stop, url
  setup(function()
    url, stop = H.everything_http()
  end)
  teardown(function() stop() end)

  it('discovers, echoes and returns structured content over one session', function()
    local client = mcp.new({ url = url })
    local tools = client:discover()
    assert.is_true(#tools >= 10)
    assert.equal('mcp-servers/everything', client.server_info.name)
    assert.is_true(client.session_ready)
    local session = client.session_id
    assert.is_string(session)
    assert.same({ 'Echo: over http', false }, { H.pair(client:call('echo', { message = 'over http' })) })
    assert.is_truthy(client:call('get-structured-content', { location = 'New York' }):find('"temperature"', 1, true))
    for i = 1, 50 do
      assert.equal('Echo: ' .. i, (client:call('echo', { message = tostring(i) })))
    end
    assert.equal(session, client.session_id)
    client:close()
  end)

  it('close ends the session with DELETE; the next call opens a new one', function()
    local client = mcp.new({ url = url })
    client:discover()
    local first = client.session_id
    client:close()
    client:close()
    assert.equal('Echo: again', (client:call('echo', { message = 'again' })))
    assert.are_not.equal(first, client.session_id)
    -- The old session is gone on the server: a request with it is refused
    -- (server-everything answers 400 here where the spec says 404).
    local p = io.popen('node -e "fetch(\'' .. url .. '\', {method: \'POST\', headers: {\'content-type\': \'application/json\', '
      .. '\'accept\': \'application/json, text/event-stream\', \'mcp-session-id\': \'' .. first .. '\'}, '
      .. 'body: JSON.stringify({jsonrpc: \'2.0\', id: 1, method: \'tools/list\'})}).then(r => console.log(r.status))"')
    local status = p:read('*l')
    p:close()
    assert.is_truthy(status == '400' or status == '404', status)
    client:close()
  end)

  it('a long operation completes and, called without a progressToken, brings no notification', function()
    -- server-everything sends notifications/progress only when the request
    -- carries _meta.progressToken, which this client does not send, and
    -- nothing else on this call (no log lines unless logging is toggled on).
    local seen = {}
    local client = mcp.new({ url = url, on_notification = function(m) seen[#seen + 1] = m end })
    local text = client:call('trigger-long-running-operation', { duration = 1, steps = 2 })
    assert.equal('Long running operation completed. Duration: 1 seconds, Steps: 2.', text)
    client:close()
    assert.same({}, seen)
  end)

  it('a reply past max_message_bytes is refused (SSE), and the client goes on', function()
    -- (server-everything's initialize reply alone is several KB)
    local client = mcp.new({ url = url, max_message_bytes = 40000 })
    local ok, err = pcall(client.call, client, 'echo', { message = string.rep('y', 50000) })
    assert.is_false(ok)
    assert.equal('MCP: a message from the server exceeded 40000 bytes (raise opts.max_message_bytes to allow it)', err)
    assert.equal('Echo: small', (client:call('echo', { message = 'small' })))
    client:close()
  end)

  it('mounts and runs tools as over stdio', function()
    local client = mcp.new({ url = url, prefix = 'web_' })
    local registry = H.registry()
    mcp.mount(registry, client)
    assert.equal('Echo: via registry', registry:get('web_echo').run({ message = 'via registry' }))
    client:close()
  end)
end)

describe('HTTPS', function()
  local stop, url, certs
  setup(function()
    certs = H.make_certificates()
    local base
    base, stop = H.fault_server({ cert = certs .. '/server.pem', key = certs .. '/server.key' })
    url = base .. '/plain'
  end)
  teardown(function()
    stop()
    os.execute('rm -rf ' .. certs)
  end)

  it('works with the server CA given in opts.ca_file', function()
    local client = mcp.new({ url = url, ca_file = certs .. '/ca.pem' })
    client:discover()
    assert.equal('Echo: over TLS', (client:call('echo', { message = 'over TLS' })))
    assert.is_string(client.session_id)
    client:close()
  end)

  it('refuses a certificate it cannot trust, and says why', function()
    local client = mcp.new({ url = url })
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    assert.is_truthy(err:find('MCP transport failed (60): cannot reach the MCP server at ' .. url .. ' (TLS: ', 1, true), err)
  end)

  it('SIGINT while a call waits on a TLS connection returns Lua to the host at once', function()
    -- rustls retries a read that fails as "interrupted": the interruption
    -- must not look like one, or it waits out the whole timeout.
    local slow = url:gsub('/plain$', '/slow')
    local opts = string.format('{ url = %q, ca_file = %q, timeout = 30 }', slow, certs .. '/ca.pem')
    local seconds, raised, out, status = H.interrupted_call(opts, 'slow', 'c:discover()')
    assert.equal(0, status, out)
    assert.is_truthy(raised and raised:find('^mcp:%d+: interrupted!$'), out)
    -- the server answers after 3 s
    assert.is_true(seconds < 2, out)
  end)

  it('a ca_file that cannot be read fails at mcp.new', function()
    local ok, err = pcall(mcp.new, { url = url, ca_file = '/nonexistent/ca.pem' })
    assert.is_false(ok)
    assert.equal('mcp.new: cannot read opts.ca_file /nonexistent/ca.pem: No such file or directory (os error 2)', err)
  end)
end)

describe('HTTP faults', function()
  local stop, base
  setup(function()
    base, stop = H.fault_server()
    fetch_log(base)
  end)
  teardown(function() stop() end)

  local function requests(method, path)
    local out = {}
    for _, r in ipairs(fetch_log(base)) do
      if (not method or r.method == method) and (not path or r.path == path) then out[#out + 1] = r end
    end
    return out
  end

  -- What the server's own stream brings is handed to Lua while Lua waits
  -- on a request: calls echo (`tries` times at most) until `seen` has it.
  local function call_until_seen(client, seen, tries)
    for _ = 1, tries do
      client:call('echo', { message = 'x' })
      if #seen > 0 then return end
      os.execute('sleep 0.05')
    end
  end

  it('sends the session id and the negotiated version on every later request, and our headers on all', function()
    local client = mcp.new({ url = base .. '/plain', headers = { Authorization = 'Bearer t0k', ['X-Trace'] = 'abc' } })
    client:discover()
    client:call('echo', { message = 'x' })
    client:close()
    local log = requests(nil, '/plain')
    assert.is_true(#log >= 6)
    -- The era probe first, as a modern request: its version in a header,
    -- and no session.
    assert.equal('server/discover', trace.decode(log[1].body).method)
    assert.equal('2026-07-28', log[1].headers['mcp-protocol-version'])
    assert.equal('server/discover', log[1].headers['mcp-method'])
    assert.is_nil(log[1].headers['mcp-session-id'])
    assert.equal('initialize', trace.decode(log[2].body).method)
    assert.is_nil(log[2].headers['mcp-session-id'])
    assert.is_nil(log[2].headers['mcp-protocol-version'])
    assert.is_nil(log[2].headers['mcp-method'])
    assert.equal('application/json, text/event-stream', log[2].headers.accept)
    assert.equal('application/json', log[2].headers['content-type'])
    for i, r in ipairs(log) do
      assert.equal('Bearer t0k', r.headers.authorization, 'request ' .. i)
      assert.equal('abc', r.headers['x-trace'])
      if i > 2 then
        assert.equal(client.session_id, r.headers['mcp-session-id'], 'request ' .. i)
        assert.equal('2025-06-18', r.headers['mcp-protocol-version'], 'request ' .. i)
      end
    end
    assert.equal('DELETE', log[#log].method)
  end)

  it("answers a ping on the server's stream and delivers its notifications", function()
    local seen = {}
    local client = mcp.new({ url = base .. '/plain', on_notification = function(m) seen[#seen + 1] = m.params.data end })
    client:discover()
    call_until_seen(client, seen, 20)
    client:close()
    assert.same({ 'hello from the server stream' }, seen)
    local answered = false
    for _, r in ipairs(requests('POST', '/plain')) do
      local msg = trace.decode(r.body)
      if msg.id == 'server-ping-1' then
        assert.same({ jsonrpc = '2.0', id = 'server-ping-1', result = {} }, msg)
        answered = true
      end
    end
    assert.is_true(answered)
  end)

  it('a 404 on a live session starts a new session and sends the request once more', function()
    local client = mcp.new({ url = base .. '/expire' })
    client:discover()
    local first = client.session_id
    for i = 1, 4 do
      assert.equal('Echo: ' .. i, (client:call('echo', { message = tostring(i) })))
    end
    assert.are_not.equal(first, client.session_id)
    client:close()
    local inits, calls = 0, 0
    for _, r in ipairs(requests('POST', '/expire')) do
      local m = trace.decode(r.body).method
      if m == 'initialize' then inits = inits + 1 end
      if m == 'tools/call' then calls = calls + 1 end
    end
    assert.equal(2, inits)
    assert.equal(5, calls) -- four calls, one of them sent twice
  end)

  -- Four calls on a session the server forgets at its fourth request:
  -- each way of calling gets the same one new session, and the forgotten
  -- call is sent once more on it.
  local function survives_a_forgotten_session(path, call)
    local client = mcp.new({ url = base .. path })
    client:discover()
    local first = client.session_id
    for i = 1, 4 do
      assert.equal('Echo: ' .. i, (call(client, { message = tostring(i) })))
    end
    assert.are_not.equal(first, client.session_id)
    client:close()
    local inits, calls = 0, 0
    for _, r in ipairs(requests('POST', path)) do
      local m = trace.decode(r.body).method
      if m == 'initialize' then inits = inits + 1 end
      if m == 'tools/call' then calls = calls + 1 end
    end
    assert.equal(2, inits)
    assert.equal(5, calls)
  end

  it('a call with its own timeout gets the same new session after a 404 as a plain call', function()
    survives_a_forgotten_session('/expire-timeout', function(client, args)
      return client:call('echo', args, { timeout = 5 })
    end)
  end)

  it('an async call gets the same new session after a 404 as a plain call', function()
    survives_a_forgotten_session('/expire-async', function(client, args)
      return client:call_async('echo', args):wait()
    end)
  end)

  it('an SSE stream that drops after its priming event is resumed with Last-Event-ID', function()
    local client = mcp.new({ url = base .. '/drop' })
    assert.equal('Echo: resumed', (client:call('echo', { message = 'resumed' })))
    client:close()
    local resumed = requests('GET', '/drop')
    local last = resumed[#resumed]
    assert.equal('evt-1', last.headers['last-event-id'])
  end)

  it("the server's own stream, ended after its priming event while idle, is resumed with Last-Event-ID", function()
    local seen = {}
    local client = mcp.new({ url = base .. '/get-drop', on_notification = function(m) seen[#seen + 1] = m.params.data end })
    client:discover()
    -- The stream ends 300 ms after its head, while no request waits: it
    -- is resumed by the client's own threads, before any call.
    local gets, deadline = {}, os.time() + 5
    repeat
      os.execute('sleep 0.1')
      for _, r in ipairs(requests('GET', '/get-drop')) do gets[#gets + 1] = r end
    until #gets >= 2 or os.time() > deadline
    assert.equal(2, #gets)
    assert.is_nil(gets[1].headers['last-event-id'])
    assert.equal('g-1', gets[2].headers['last-event-id'])
    call_until_seen(client, seen, 40)
    client:close()
    assert.same({ 'resumed after g-1' }, seen)
  end)

  it('a JSON-RPC error body on a 4xx is the error, with its message', function()
    local client = mcp.new({ url = base .. '/errors' })
    local ok, err = pcall(client.call, client, 'bad', {})
    assert.is_false(ok)
    assert.equal('MCP tools/call bad failed: Invalid params: message is required (code -32602)', err)
    ok, err = pcall(client.call, client, 'html', {})
    assert.is_false(ok)
    assert.equal('MCP transport failed (500): HTTP 500: <html><body><h1>Internal Server Error</h1></body></html>', err)
    assert.equal('Echo: fine', (client:call('echo', { message = 'fine' })))
    client:close()
  end)

  it('a call with a timeout of its own longer than the client\'s waits that long for its reply #slow', function()
    local client = mcp.new({ url = base .. '/slow', timeout = 1.5 })
    local text, is_error = client:call('slow', { message = 'late' }, { timeout = 10 })
    assert.is_false(is_error)
    assert.equal('Echo: late', text)
    client:close()
  end)

  it('a slow server meets the timeout, and the client goes on #slow', function()
    -- 1.5 s: the same limit covers the handshake, which a loaded machine
    -- can stretch past a few tenths of a second.
    local client = mcp.new({ url = base .. '/slow', timeout = 1.5 })
    assert.has_error(function() client:call('slow', {}) end, 'MCP tools/call slow timed out after 1.5 s')
    assert.equal('Echo: next', (client:call('echo', { message = 'next' })))
    client:close()
    local cancelled = false
    for _, r in ipairs(requests('POST', '/slow')) do
      local m = trace.decode(r.body)
      if m.method == 'notifications/cancelled' then cancelled = m.params.requestId end
    end
    assert.equal(2, cancelled) -- initialize was 1
  end)

  it('a session id full of shell metacharacters runs nothing', function()
    for _, f in ipairs({ '/tmp/lua-mcp-pwned', '/tmp/lua-mcp-pwned2', '/tmp/lua-mcp-pwned3' }) do os.remove(f) end
    local client = mcp.new({ url = base .. '/evil' })
    client:discover()
    assert.equal('Echo: safe', (client:call('echo', { message = 'safe' })))
    assert.is_truthy(client.session_id:find('$(touch', 1, true))
    client:close()
    for _, f in ipairs({ '/tmp/lua-mcp-pwned', '/tmp/lua-mcp-pwned2', '/tmp/lua-mcp-pwned3' }) do
      assert.is_nil(io.open(f), f .. ' was created')
    end
    -- and the id went back to the server byte for byte
    local log = requests('POST', '/evil')
    assert.equal(client.session_id, log[#log].headers['mcp-session-id'])
  end)

  it('a JSON reply past max_message_bytes is refused, and the client goes on', function()
    local client = mcp.new({ url = base .. '/plain', max_message_bytes = 1000 })
    local ok, err = pcall(client.call, client, 'echo', { message = string.rep('z', 3000) })
    assert.is_false(ok)
    assert.equal('MCP: a message from the server exceeded 1000 bytes (raise opts.max_message_bytes to allow it)', err)
    assert.equal('Echo: small', (client:call('echo', { message = 'small' })))
    client:close()
  end)

  it('a server without its own stream (GET 405) works', function()
    local client = mcp.new({ url = base .. '/nostream' })
    client:discover()
    assert.equal('Echo: x', (client:call('echo', { message = 'x' })))
    client:close()
  end)

  it('a host outside ASCII is refused before any connection, saying how to write it', function()
    local url = 'http://b\195\188cher.example:1/mcp'
    local client = mcp.new({ url = url, timeout = 5 })
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    assert.equal('MCP transport failed (3): cannot reach the MCP server at ' .. url
      .. ' (not a URL it can send: write it in ASCII, a host in its xn-- form and other bytes %-encoded)', err)
  end)

  it('an unreachable server gives the reference message', function()
    local url = 'http://127.0.0.1:1/mcp'
    local client = mcp.new({ url = url })
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    assert.equal('MCP transport failed (7): cannot reach the MCP server at ' .. url, err)
    if H.REFERENCE_SEES_STATUS and H.succeeded(os.execute('command -v curl >/dev/null')) then
      local reference = H.reference().new({ url = url })
      assert.equal(err, select(2, pcall(reference.discover, reference)))
    end
  end)

  it('header values with CR or LF are refused', function()
    local ok, err = pcall(mcp.new, { url = base .. '/plain', headers = { Authorization = 'Bearer x\r\nX-Injected: 1' } })
    assert.is_false(ok)
    assert.equal('mcp.new: opts.headers.Authorization contains CR or LF, which would split the header', err)
    ok, err = pcall(mcp.new, { url = base .. '/plain', headers = { ['Bad Name'] = 'x' } })
    assert.is_false(ok)
    assert.equal('mcp.new: opts.headers has an invalid header name "Bad Name"', err)
  end)
end)
