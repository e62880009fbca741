-- Quirks of the native HTTP transport that only a misbehaving server shows:
-- streams that never end or never start, redirects, answers that are not
-- MCP at all, response headers past what the client reads, and header
-- values HTTP does not allow. The server is spec/servers/http_faults.js
-- (its header comment lists the paths); what it saw is read back with node
-- one-liners, so no assertion trusts our own client.
local H = require('helpers')
local trace = require('trace')

local mcp = H.native()

-- GET base..path with node's fetch, decoded.
local function get_json(base, path) return H.get_json(base .. path) end

-- Calls `check` until it returns true or `seconds` pass (by mcp.clock);
-- true when it did. Each check is a node process (some 50 ms), so no
-- extra pause between them.
local function within(seconds, check)
  local deadline = mcp.clock() + seconds
  repeat
    if check() then return true end
  until mcp.clock() > deadline
  return check()
end

describe('HTTP transport quirks', function()
  local stop, base, port
  setup(function() base, stop, port = H.fault_server() end)
  teardown(function() stop() end)

  local function stats() return get_json(base, '/stats') end
  local function log() return get_json(base, '/log') end

  -- Connections the server has open for `path`: all of them, and those
  -- whose last request was a GET (the server's stream).
  local function open(path)
    local s = stats()
    return s.paths[path] or 0, s.streams[path] or 0
  end

  local function requests(entries, method, path)
    local out = {}
    for _, r in ipairs(entries) do
      if (not method or r.method == method) and (not path or r.path == path) then out[#out + 1] = r end
    end
    return out
  end

  -- The client's stream thread opens the GET after the handshake: wait
  -- until the server holds it.
  local function stream_opened(path)
    return within(2, function() return select(2, open(path)) > 0 end)
  end

  it('close ends a GET stream that only sends keep-alive comments: the server sees no connection left', function()
    local client = mcp.new({ url = base .. '/keepalive' })
    client:discover()
    assert.equal('Echo: x', (client:call('echo', { message = 'x' })))
    assert.is_true(stream_opened('/keepalive'), 'the GET stream never opened')
    local t0 = mcp.clock()
    client:close()
    assert.is_true(mcp.clock() - t0 < 1, 'close took ' .. (mcp.clock() - t0) .. ' s')
    assert.is_true(within(2, function() return open('/keepalive') == 0 end),
      'connections still open: ' .. trace.encode(stats()))
  end)

  it('a collected client ends its keep-alive stream too, and collectgarbage does not wait for the DELETE #slow', function()
    log()
    local client = mcp.new({ url = base .. '/slow-delete' })
    client:discover()
    assert.equal('Echo: x', (client:call('echo', { message = 'x' })))
    assert.is_true(stream_opened('/slow-delete'), 'the GET stream never opened')
    local session = client.session_id
    assert.is_string(session)
    client = nil -- luacheck: ignore
    local t0 = mcp.clock()
    collectgarbage()
    collectgarbage()
    local took = mcp.clock() - t0
    -- The DELETE takes the server 3 s (the client gives up after 2): a
    -- synchronous one would hold collectgarbage past this bound.
    assert.is_true(took < 1, 'collectgarbage took ' .. took .. ' s')
    assert.is_true(within(2, function() return select(2, open('/slow-delete')) == 0 end),
      'the GET stream is still open: ' .. trace.encode(stats()))
    -- The DELETE went out, from the background, with the session id.
    local deletes = {}
    assert.is_true(within(2, function()
      for _, r in ipairs(requests(log(), 'DELETE', '/slow-delete')) do deletes[#deletes + 1] = r end
      return #deletes > 0
    end), 'no DELETE reached the server')
    assert.equal(1, #deletes)
    assert.equal(session, deletes[1].headers['mcp-session-id'])
    -- and its connection ends when the client gives up on it (2 s).
    assert.is_true(within(3, function() return open('/slow-delete') == 0 end),
      'connections still open: ' .. trace.encode(stats()))
  end)

  it('a GET stream that is accepted and never answered holds neither a call nor close #slow', function()
    local client = mcp.new({ url = base .. '/hang-get', timeout = 30 })
    client:discover()
    assert.is_true(stream_opened('/hang-get'), 'the GET never reached the server')
    local t0 = mcp.clock()
    assert.equal('Echo: x', (client:call('echo', { message = 'x' })))
    assert.is_true(mcp.clock() - t0 < 2, 'the call took ' .. (mcp.clock() - t0) .. ' s')
    t0 = mcp.clock()
    client:close()
    assert.is_true(mcp.clock() - t0 < 3, 'close took ' .. (mcp.clock() - t0) .. ' s')
    assert.is_true(within(2, function() return open('/hang-get') == 0 end),
      'connections still open: ' .. trace.encode(stats()))
  end)

  it('a redirect to another origin is refused with its Location, and never followed', function()
    log()
    local client = mcp.new({ url = base .. '/away', headers = { ['X-Api-Key'] = 'secret' } })
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    assert.equal('MCP transport failed (302): the server at ' .. base .. '/away redirected to http://localhost:' .. port
      .. '/landing, which is not followed (another origin: your headers and the session id stay with the one they'
      .. ' were given for); use that address as opts.url if you trust it', err)
    client:close()
    local seen = log()
    assert.is_true(#requests(seen, 'POST', '/away') > 0)
    assert.same({}, requests(seen, nil, '/landing'))
  end)

  it('a same-origin 307 with a relative Location is followed, method, body and headers kept, and remembered', function()
    log()
    local client = mcp.new({ url = base .. '/moved', headers = { ['X-Api-Key'] = 'secret' } })
    local tools = client:discover()
    assert.equal(2, #tools)
    assert.equal('Echo: through', (client:call('echo', { message = 'through' })))
    client:close()
    local seen = log()
    local landed = requests(seen, nil, '/plain')
    assert.is_true(#landed >= 4)
    for i, r in ipairs(landed) do
      assert.equal('secret', r.headers['x-api-key'], 'request ' .. i .. ' to /plain')
    end
    -- The first POST (the era probe) went to /moved and arrived at
    -- /plain with the same body; every later request went straight to
    -- /plain.
    local moved = requests(seen, nil, '/moved')
    assert.equal(1, #moved)
    assert.equal('server/discover', trace.decode(moved[1].body).method)
    local first_at_plain = requests(seen, 'POST', '/plain')[1]
    assert.equal(moved[1].body, first_at_plain.body)
    assert.equal(1, #requests(seen, 'DELETE', '/plain'))
  end)

  it('a 200 with an HTML page (a login page) fails at once, quoting it', function()
    local client = mcp.new({ url = base .. '/login', timeout = 30 })
    local t0 = mcp.clock()
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    assert.is_true(mcp.clock() - t0 < 2, 'discover took ' .. (mcp.clock() - t0) .. ' s')
    assert.equal('MCP transport failed (200): the server at ' .. base .. '/login answered text/html, not JSON or an'
      .. ' event stream: <html><body>Sign in</body></html>', err)
    client:close()
  end)

  it('a 401 says credentials are needed and quotes WWW-Authenticate', function()
    local client = mcp.new({ url = base .. '/auth' })
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    assert.equal('MCP transport failed (401): the server at ' .. base .. '/auth refused the request (HTTP 401,'
      .. ' WWW-Authenticate: Bearer resource_metadata="http://127.0.0.1:' .. port
      .. '/.well-known/oauth-protected-resource"); it needs credentials: set opts.auth.token (or opts.headers.Authorization)', err)
    client:close()
  end)

  it('opts.auth.token goes as a bearer token on every request: POST, the GET stream, DELETE', function()
    log()
    local client = mcp.new({ url = base .. '/bearer', auth = { token = 'right' } })
    client:discover()
    assert.equal('Echo: hi', (client:call('echo', { message = 'hi' })))
    stream_opened('/bearer')
    client:close()
    local entries = requests(log(), nil, '/bearer')
    local methods = {}
    for _, r in ipairs(entries) do
      methods[r.method] = true
      assert.equal('Bearer right', r.headers.authorization, r.method .. ' ' .. r.body)
      -- uncompressed: a compressor holds events back
      if r.method ~= 'DELETE' then assert.equal('identity', r.headers['accept-encoding']) end
    end
    assert.same({ POST = true, GET = true, DELETE = true }, methods)
  end)

  it('a token function is asked before each call, so a rotated token is used', function()
    log()
    local asked = 0
    local client = mcp.new({ url = base .. '/bearer', auth = { token = function()
      asked = asked + 1
      return 'right-' .. asked
    end } })
    client:discover()
    client:call('echo', { message = 'a' })
    client:call('echo', { message = 'b' })
    client:close()
    assert.equal(3, asked)
    local seen = {}
    for _, r in ipairs(requests(log(), 'POST', '/bearer')) do
      local m = trace.decode(r.body)
      if m.method == 'tools/call' then seen[#seen + 1] = m.params.arguments.message .. ' ' .. r.headers.authorization end
    end
    assert.same({ 'a Bearer right-2', 'b Bearer right-3' }, seen)
  end)

  it('a token the server refuses, and auth options that cannot be used, say so without quoting the token', function()
    local client = mcp.new({ url = base .. '/bearer', auth = { token = 'wrong-secret' } })
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    assert.equal('MCP transport failed (401): the server at ' .. base .. '/bearer refused the request (HTTP 401,'
      .. ' WWW-Authenticate: Bearer error="invalid_token"); the token in opts.auth.token was not accepted', err)
    client:close()
    local cases = {
      { { auth = { token = 'x' }, headers = { authorization = 'Bearer y' } },
        'mcp.new: give opts.auth.token or opts.headers.Authorization, not both' },
      { { auth = { token = 'x', authorize = function() end } },
        'mcp.new: give opts.auth.token or a login (opts.auth.authorize and the like), not both' },
      { { auth = { token = 42 } }, 'mcp.new: opts.auth.token must be a string or a function returning one' },
      { { auth = { token = 'line\nbreak-secret' } }, 'mcp: opts.auth.token must be a non-empty token without control bytes' },
      { { auth = 'x' }, 'mcp.new: opts.auth must be a table' },
    }
    for _, case in ipairs(cases) do
      case[1].url = base .. '/bearer'
      ok, err = pcall(mcp.new, case[1])
      assert.is_false(ok)
      assert.equal(case[2], err)
    end
    client = mcp.new({ url = base .. '/bearer', auth = { token = function() return nil end } })
    ok, err = pcall(client.discover, client)
    assert.equal('mcp: the opts.auth.token function must return a string, got nil', err)
  end)

  it("a 403 without a challenge is the server's own refusal, in its words, with no talk of credentials", function()
    local refusals = {
      { '/forbidden', 'MCP transport failed (403): HTTP 403' },
      { '/forbidden-reason', 'MCP transport failed (403): HTTP 403: Origin http://evil.example is not allowed' },
      { '/unauthorized-reason', 'MCP transport failed (401): the server at ' .. base .. '/unauthorized-reason'
        .. ' refused the request (HTTP 401: Your API key has expired); it needs credentials: set opts.auth.token'
        .. ' (or opts.headers.Authorization)' },
    }
    for _, case in ipairs(refusals) do
      local client = mcp.new({ url = base .. case[1] })
      local ok, err = pcall(client.discover, client)
      client:close()
      assert.is_false(ok)
      assert.equal(case[2], err)
    end
    -- A server that quotes the refused token does not get it into the error.
    local client = mcp.new({ url = base .. '/unauthorized-reason', auth = { token = 'sk-live-0123456789' } })
    local ok, err = pcall(client.discover, client)
    client:close()
    assert.is_false(ok)
    assert.equal('MCP transport failed (401): the server at ' .. base .. '/unauthorized-reason refused the request'
      .. ' (HTTP 401: Your API key has expired (Bearer [credentials])); the token in opts.auth.token was not accepted',
      err)
  end)

  it('a connection reset while a large POST is still being written is a transport failure', function()
    local client = mcp.new({ url = base .. '/cut-big' })
    client:discover()
    local ok, err = pcall(client.call, client, 'echo', { message = string.rep('x', 8 * 1024 * 1024) })
    client:close()
    assert.is_false(ok)
    assert.equal('MCP transport failed (7): cannot reach the MCP server at ' .. base .. '/cut-big', err)
  end)

  it('more response headers than the client reads (128) is a named failure', function()
    local client = mcp.new({ url = base .. '/many-headers' })
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    assert.equal('MCP transport failed (8): the server at ' .. base .. '/many-headers sent more response headers than'
      .. ' this client reads (128)', err)
    client:close()
  end)

  it('response headers over 64 KB are a named failure', function()
    local client = mcp.new({ url = base .. '/huge-header' })
    local ok, err = pcall(client.discover, client)
    assert.is_false(ok)
    -- 65536: ureq's default max_response_header_size.
    assert.equal('MCP transport failed (8): the server at ' .. base .. '/huge-header sent response headers over 65536'
      .. ' bytes, more than this client reads', err)
    client:close()
  end)

  it('header values with NUL or DEL are refused at mcp.new; a tab is sent as given', function()
    for _, value in ipairs({ 'a\0b', 'a\127b', '\1' }) do
      local ok, err = pcall(mcp.new, { url = base .. '/plain', headers = { ['X-Key'] = value } })
      assert.is_false(ok)
      assert.equal('mcp.new: opts.headers.X-Key contains a control byte (NUL, DEL or another), which HTTP does not allow', err)
    end
    log()
    local client = mcp.new({ url = base .. '/plain', headers = { ['X-Key'] = 'a\tb' } })
    assert.equal('Echo: tab', (client:call('echo', { message = 'tab' })))
    client:close()
    local seen = requests(log(), 'POST', '/plain')
    assert.is_true(#seen > 0)
    for i, r in ipairs(seen) do
      assert.equal('a\tb', r.headers['x-key'], 'request ' .. i)
    end
  end)

  it('SIGINT while a POST waits for its JSON body returns Lua to the host, and the request is cancelled', function()
    log()
    local seconds, raised, out, status =
      H.interrupted_call(string.format('{ url = %q, timeout = 30 }', base .. '/slow'), 'slow', 'c:discover()')
    assert.equal(0, status, out)
    assert.is_truthy(raised and raised:find('^mcp:%d+: interrupted!$'), out)
    -- the server answers after 3 s; the call must not wait for it
    assert.is_true(seconds < 2, out)
    local cancelled
    for _, r in ipairs(requests(log(), 'POST', '/slow')) do
      local m = trace.decode(r.body)
      if m.method == 'notifications/cancelled' then cancelled = m.params end
    end
    -- ids: initialize 1, tools/list 2, tools/call 3
    assert.same({ requestId = 3, reason = 'interrupted by the user' }, cancelled)
  end)
end)

describe('a modern HTTP server', function()
  local stop, base
  setup(function() base, stop = H.fault_server() end)
  teardown(function() stop() end)

  it('Ctrl-C during a blocking task call sends tasks/cancel over HTTP too', function()
    get_json(base, '/log')
    local out, status = H.run_lua(string.format([[
      local mcp = require('mcp')
      local f = io.open('/proc/self/stat')
      local self_pid = f:read('*n')
      f:close()
      local c = mcp.new({ url = %q, timeout = 1 })
      os.execute(string.format('(sleep 0.5; kill -INT %%d) &', self_pid))
      local ok, err = pcall(c.call, c, 'slow_task', {}, { task = true })
      print('raised: ' .. tostring(err))
      -- the cancel's POST runs beside Lua; a close ends it with the rest
      os.execute('sleep 0.3')
      c:close()
    ]], base .. '/modern-drop'))
    assert.equal(0, status, out)
    assert.is_truthy(out:find('raised: [^\n]*interrupted!\n'), out)
    local cancelled
    within(5, function()
      for _, r in ipairs(get_json(base, '/log')) do
        local m = r.method == 'POST' and trace.decode(r.body)
        if m and m.method == 'tasks/cancel' then cancelled = m.params.taskId end
      end
      return cancelled ~= nil
    end)
    assert.is_truthy(tostring(cancelled):find('^http%-task%-%d+$'), out)
  end)

  it('a task whose id cannot be named in a header is said to be running at the server, never "not sent"', function()
    local client = mcp.new({ url = base .. '/modern-drop' })
    local ok, err = pcall(client.call, client, 'wide_task', {}, { task = true })
    assert.is_false(ok)
    assert.equal('MCP tools/call wide_task failed: its task ' .. ('w'):rep(64) .. '... (65472 more characters) is '
      .. 'running at the server, but tasks/get about it could not be sent (its Mcp-Name header would be 65536 bytes, '
      .. 'over the 8192 this client sends in one header (opts.max_header_bytes)); the call itself was sent, so '
      .. 'calling the tool again would run it twice', err)
    client:close()
    get_json(base, '/log')
  end)

  it('a reply stream that breaks is not resumed: the request goes again as a new one, with no session', function()
    local client = mcp.new({ url = base .. '/modern-drop' })
    client:discover()
    assert.equal('modern', client.era)
    assert.equal('Echo: x (call 2)', (client:call('echo', { message = 'x' })))
    client:close()
    local seen = get_json(base, '/log')
    local calls, ids = 0, {}
    for _, r in ipairs(seen) do
      assert.equal('POST', r.method, 'no GET stream, no resumption, no DELETE')
      assert.is_nil(r.headers['mcp-session-id'])
      assert.is_nil(r.headers['last-event-id'])
      local msg = trace.decode(r.body)
      assert.equal(msg.method, r.headers['mcp-method'])
      assert.equal('2026-07-28', r.headers['mcp-protocol-version'])
      if msg.method == 'tools/call' then
        calls = calls + 1
        ids[#ids + 1] = msg.id
        assert.equal('echo', r.headers['mcp-name'])
      end
    end
    assert.equal(2, calls)
    assert.are_not.equal(ids[1], ids[2])
  end)
end)

describe('connect_timeout over HTTP', function()
  local stop, base
  setup(function() base, stop = H.fault_server() end)
  teardown(function() stop() end)

  for _, case in ipairs({ { 'discover', 'c:discover()' }, { 'discover_async', 'c:discover_async():wait()' } }) do
    it('bounds the whole handshake when the server trickles its response head a byte each 100 ms: ' .. case[1], function()
      local out = H.run_lua(string.format([[
        local mcp = require('mcp')
        local c = mcp.new({ url = %q, timeout = 8, connect_timeout = 2 })
        local t0 = mcp.clock()
        local ok, err = pcall(function() %s end)
        print(string.format('%%.1f', mcp.clock() - t0))
        print(err)
        c:close()
      ]], base .. '/trickle', case[2]))
      local seconds, err = out:match('^(%S+)\n(.*)\n$')
      -- 8 s, the request timeout, before; 2 s and a little now
      assert.is_true(tonumber(seconds) < 4, out)
      assert.equal('MCP server/discover timed out after 2 s (opts.connect_timeout)', err)
    end)
  end
end)

describe("a header past the client's own limit", function()
  local stop, base
  setup(function() base, stop = H.fault_server() end)
  teardown(function() stop() end)

  it('a 256 KiB Mcp-Param value is refused before it is sent, naming the limit and the option, not the server', function()
    local client = mcp.new({ url = base .. '/modern-drop' })
    client:discover()
    assert.equal('Mcp-Param-Region of 8192 bytes', (client:call('route', { region = string.rep('a', 8192) })))
    assert.has_error(function() client:call('route', { region = string.rep('a', 256 * 1024) }) end,
      'MCP tools/call route not sent: its Mcp-Param-Region header would be 262144 bytes, over the 8192 this client'
      .. ' sends in one header (opts.max_header_bytes; HTTP servers and proxies commonly refuse more than 8 KiB)')
    -- the same async, and the client goes on
    assert.has_error(function() client:call_async('route', { region = string.rep('a', 9000) }):wait() end,
      'MCP tools/call route not sent: its Mcp-Param-Region header would be 9000 bytes, over the 8192 this client'
      .. ' sends in one header (opts.max_header_bytes; HTTP servers and proxies commonly refuse more than 8 KiB)')
    assert.equal('Mcp-Param-Region of 2 bytes', (client:call('route', { region = 'eu' })))
    client:close()
    local roomy = mcp.new({ url = base .. '/modern-drop', max_header_bytes = 12000 })
    roomy:discover()
    assert.equal('Mcp-Param-Region of 11000 bytes', (roomy:call('route', { region = string.rep('a', 11000) })))
    roomy:close()
    assert.has_error(function() mcp.new({ url = base .. '/modern-drop', max_header_bytes = 1e6 }) end,
      'mcp.new: opts.max_header_bytes must be a whole number of bytes from 1 to 65536')
  end)
end)

describe('a modern reply stream that breaks under a call with effects', function()
  local MAY_HAVE_RUN = "MCP tools/call charge failed: the server's reply stream ended before the reply came, so it may"
    .. ' or may not have run; it was not sent again, since nothing says running it twice is safe (a tool annotated'
    .. ' readOnlyHint or idempotentHint is; pass opts.idempotent = true for a call you know is)'
  local stop, base
  before_each(function() base, stop = H.fault_server() end)
  after_each(function() stop() end)

  it('a tool annotated destructive and not idempotent runs once and fails saying it may have run', function()
    local client = mcp.new({ url = base .. '/modern-drop' })
    client:discover()
    assert.has_error(function() client:call('charge', {}) end, MAY_HAVE_RUN)
    -- counted on the server: one run for one call (three before)
    assert.equal('1', (client:call('charges', {})))
    client:close()
  end)

  it('the same, made async or before the tools were listed', function()
    local client = mcp.new({ url = base .. '/modern-drop' })
    assert.has_error(function() client:call_async('charge', {}):wait() end, MAY_HAVE_RUN)
    assert.equal('1', (client:call('charges', {})))
    client:close()
  end)

  it('a caller who says the call is idempotent has it sent again as a new request', function()
    local client = mcp.new({ url = base .. '/modern-drop' })
    client:discover()
    assert.equal('charged 2', (client:call('charge', { broken_runs = 1 }, { idempotent = true })))
    assert.has_error(function() client:call('charge', {}, { idempotent = 'yes' }) end,
      'client:call: opts.idempotent must be a boolean')
    client:close()
  end)
end)

describe('cancelling a modern HTTP request', function()
  local stop, base
  setup(function() base, stop = H.fault_server() end)
  teardown(function() stop() end)

  it('closes its reply stream, which is how the server hears of it; nothing is posted', function()
    local client = mcp.new({ url = base .. '/modern-drop' })
    client:discover()
    get_json(base, '/log')
    local handle = client:call_async('hang', {})
    os.execute('sleep 0.3')
    assert.is_true(handle:cancel())
    -- Every request the server saw, the close of the stream among them.
    local seen, closed = {}, false
    local function read_log()
      for _, r in ipairs(get_json(base, '/log')) do
        seen[#seen + 1] = r
        closed = closed or r.method == 'CLOSED'
      end
      return closed
    end
    assert.is_true(within(5, read_log))
    client:close()
    -- What came after the close counts too.
    read_log()
    assert.equal('hang', trace.decode(seen[1].body).params.name)
    for _, r in ipairs(seen) do
      assert.is_nil(r.body:find('notifications/cancelled', 1, true), 'a cancellation was posted')
    end
  end)
end)
