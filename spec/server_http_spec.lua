-- mcp.server over Streamable HTTP: the notes example
-- (lua/examples/notes_server.lua --http) called by this module's client,
-- the pure mcp.lua and the TypeScript and Python SDKs' clients; the guard
-- against browsers and strangers; the discovery file; and
-- spec/servers/lua_http.lua fed, by spec/clients/hostile_http.py, what no
-- client should send.
local H = require('helpers')
local trace = require('trace')

local mcp = H.native()
local NOTES = H.ROOT .. '/lua/examples/notes_server.lua'

-- A server process whose stdin we hold: it prints its URL first and ends
-- when we close its stdin. Returns the URL and a stop function.
local function started(command)
  local log = H.tmpname()
  local stdin = assert(io.popen(command .. ' > ' .. log .. ' 2>&1', 'w'))
  local deadline = os.time() + 15
  local url
  repeat
    url = (H.slurp(log) or ''):match('^(http://[^\n]+)\n')
    if not url then os.execute('sleep 0.05') end
  until url or os.time() > deadline
  assert(url, 'the server printed no URL: ' .. tostring(H.slurp(log)))
  return url, function()
    stdin:close()
    os.remove(log)
  end
end

local function notes(discovery)
  return started(string.format('%s %s --http %s', H.LUA, NOTES, discovery or ''))
end

local function lua_http(opts)
  return started(string.format("%s %s/spec/servers/lua_http.lua '%s'", H.LUA, H.ROOT, mcp.json_encode(opts or {})))
end

-- curl's status line and the body (JSON decoded when it is JSON).
local function curl(url, args)
  local out = H.command(string.format("curl -s -i -H 'Content-Type: application/json' "
    .. "-H 'Accept: application/json, text/event-stream' %s '%s'", args, url))
  local status = tonumber(out:match('^HTTP/1.1 (%d+)'))
  local body = out:match('\r\n\r\n(.*)$') or ''
  return status, trace.decode(body) or body, out
end

local INIT = [[-d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",]]
  .. [["capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}']]

describe('a Lua server over Streamable HTTP', function()
  local url, stop
  setup(function() url, stop = notes() end)
  teardown(function() stop() end)

  it('serves this module\'s client: lists, calls, asks it through an elicitation, and reports progress', function()
    local asked, progress = {}, {}
    local client = mcp.new({ url = url,
      on_progress = function(p) progress[#progress + 1] = p.progress end,
      handlers = { ['elicitation/create'] = function(params)
        asked[#asked + 1] = params.message
        return { action = 'accept', content = { name = 'Ada' } }
      end } })
    local names = {}
    for _, t in ipairs(client:discover()) do names[#names + 1] = t.name end
    assert.same({ 'add', 'note', 'ask_name', 'count', 'grow' }, names)
    assert.equal('5', (client:call('add', { a = 2, b = 3 })))
    assert.equal('Hello, Ada', (client:call('ask_name', {})))
    assert.same({ 'Your name?' }, asked)
    assert.equal('counted to 3', (client:call('count', { n = 3 })))
    client:close()
  end)

  it('serves the pure mcp.lua, which POSTs each request with curl', function()
    local client = H.reference().new({ url = url })
    local names = {}
    for _, t in ipairs(client:discover()) do names[#names + 1] = t.name end
    assert.same({ 'add', 'note', 'ask_name', 'count', 'grow' }, names)
    assert.equal('5', (client:call('add', { a = 2, b = 3 })))
  end)

  it('serves the TypeScript SDK client: lists, calls, answers an elicitation on the call\'s stream #peer', function()
    local out = H.command(string.format('cd %s/spec/peers && node stdio_client.mjs %s', H.ROOT, url))
    local got = trace.decode(out:match('([^\n]+)\n?$'))
    assert.same({ name = 'notes', version = '1.0.0' }, got.server)
    assert.same({ '5', 'Hello, Grace', true, 'buy milk' }, { got.add, got.asked, got.bad, got.today })
    assert.same({ 'main.lua', 'mcp.lua' }, got.complete)
  end)

  it('serves the TypeScript SDK client v2 at 2026-07-28 (stateless, questions in rounds) and at 2025-11-25 #peer', function()
    for _, negotiation in ipairs({ 'auto', 'legacy' }) do
      local out = H.command(string.format('cd %s/spec/peers && V2_NEGOTIATION=%s node v2_client.mjs %s', H.ROOT,
        negotiation, url))
      local got = trace.decode(out:match('([^\n]+)\n?$'))
      assert.same({ negotiation == 'auto' and '2026-07-28' or '2025-11-25', '5', 'Hello, Grace', 'buy milk' },
        { got.version, got.add, got.asked, got.today })
    end
  end)

  it('serves the MCP Inspector\'s CLI (2.12): lists and calls #peer', function()
    local out = H.command(string.format('cd %s/spec/peers && MCP_CATALOG_PATH=%s node_modules/.bin/mcp-inspector --cli %s '
      .. '--method tools/call --tool-name add --tool-arg a=2 --tool-arg b=3 2>/dev/null', H.ROOT, H.tmpname(), url))
    local called = trace.decode(out:match('(%b{})'))
    assert.is_table(called, out)
    assert.equal('5', called.content[1].text)
  end)

  it('serves the Python SDK client #peer', function()
    local out = H.command(string.format('cd %s/spec/peers && python/bin/python stdio_client.py %s', H.ROOT, url))
    local got = trace.decode(out:match('([^\n]+)\n?$'))
    assert.same({ 'notes', '5', 'call Ada', 'buy milk' }, { got.server, got.add, got.note.text, got.today })
  end)

  it('refuses a page\'s foreign Origin and a rebound Host with 403, before any handler runs', function()
    local status, body = curl(url, "-H 'Origin: http://evil.example' " .. INIT)
    assert.same({ 403, 'requests from the origin "http://evil.example" are not allowed' },
      { status, body.error.message })
    status, body = curl(url, "-H 'Host: evil.example' " .. INIT)
    assert.same({ 403, 'the Host header names "evil.example", which is not this server' },
      { status, body.error.message })
    assert.equal(200, (curl(url, "-H 'Origin: http://localhost:9' " .. INIT)))
  end)

  it('names a session in every request after initialize: none is 400, an unknown one 404, DELETE ends one', function()
    local status, body, raw = curl(url, INIT)
    assert.equal(200, status)
    local session = raw:match('[Mm]cp%-[Ss]ession%-[Ii]d: ([^\r\n]+)')
    local ping = [[-d '{"jsonrpc":"2.0","id":2,"method":"ping"}']]
    status, body = curl(url, ping)
    assert.same({ 400, 'Bad Request: Mcp-Session-Id header is required' }, { status, body.error.message })
    status, body = curl(url, "-H 'Mcp-Session-Id: forged' " .. ping)
    assert.same({ 404, 'Session not found: initialize again' }, { status, body.error.message })
    assert.equal(200, (curl(url, "-H 'Mcp-Session-Id: " .. session .. "' " .. ping)))
    assert.equal(200, (curl(url, "-X DELETE -H 'Mcp-Session-Id: " .. session .. "'")))
    assert.equal(404, (curl(url, "-H 'Mcp-Session-Id: " .. session .. "' " .. ping)))
  end)
end)

describe('where a Lua HTTP server may listen', function()
  it('refuses an address beyond loopback without a token, saying why and what to pass', function()
    local server = mcp.server({ name = 'open' })
    local ok, err = pcall(server.listen, server, { host = '0.0.0.0' })
    assert.is_false(ok)
    assert.equal('server:listen: 0.0.0.0 is not a loopback address, so anyone who can reach it could call '
      .. 'this server: pass opts.token (clients then send Authorization: Bearer TOKEN)', err)
  end)

  it('after close, nothing listens: a request is refused by the system, and the port is free again', function()
    local server = mcp.server({ name = 'closing' })
    local url = server:listen({ port = 0 })
    assert.equal(true, server:run(0))
    server:close()
    local status = curl(url, INIT)
    assert.is_nil(status)
    assert.same({ false, 'server:run: call server:listen first' }, { pcall(server.run, server, 0.01) })
  end)

  it('with a token, answers 401 and the challenge without it, and serves a client that sends it', function()
    local url, stop = lua_http({ token = 's3cret' })
    local status, body, raw = curl(url, INIT)
    assert.same({ 401, 'this server needs a bearer token (Authorization: Bearer ...)' }, { status, body.error.message })
    assert.truthy(raw:find('WWW%-Authenticate: Bearer\r\n'))
    status, body, raw = curl(url, "-H 'Authorization: Bearer guess' " .. INIT)
    assert.truthy(raw:find('WWW%-Authenticate: Bearer error="invalid_token"'))
    local client = mcp.new({ url = url, auth = { token = 's3cret' } })
    assert.equal('3', (client:call('add', { a = 1, b = 2 })))
    client:close()
    stop()
  end)

  it('writes a discovery file only this user can read once bound, and removes it at close', function()
    if H.WINDOWS then return pending('Unix file modes') end
    local file = H.tmpname()
    local url, stop = notes(file)
    local found = trace.decode(H.slurp(file))
    assert.equal(url, found.url)
    assert.is_number(found.pid)
    assert.equal('-rw-------', H.command('ls -l ' .. file):sub(1, 10))
    -- two started at once get two ports, no fight over one
    local other, stop_other = notes()
    assert.are_not.equal(url, other)
    stop_other()
    stop()
    assert.is_nil(io.open(file))
  end)
end)

-- These bytes meet the poll thread, which is the same whatever the Lua
-- runtime: they run once, in the 5.4 pass, with the #peer specs.
describe('what a hostile client may send a Lua HTTP server #peer', function()
  local url, stop
  setup(function() url, stop = lua_http({ read_timeout = 2, max_message_bytes = 100000, max_connections = 128 }) end)
  teardown(function() stop() end)

  local function check(name)
    local out = H.command(string.format('timeout 60 python3 %s/spec/clients/hostile_http.py %s %s',
      H.ROOT, url, name))
    return assert(trace.decode(out), name .. ': ' .. out)
  end

  it('a body past max_message_bytes is 413 and a head past 16 KiB 431, and the connection closes', function()
    local big = check('big-body')
    assert.same({ 413, 'the body is over 100000 bytes', 'close' },
      { big.status, trace.decode(big.body).error.message, big.headers.connection })
    local head = check('big-head')
    assert.same({ 431, 'the request\'s head is over 16384 bytes' }, { head.status, trace.decode(head.body).error.message })
  end)

  it('a body that is not JSON is -32700 and a batch is refused, with 400', function()
    local bad = check('not-json')
    assert.same({ 400, -32700 }, { bad.status, trace.decode(bad.body).error.code })
    local batch = check('batch')
    assert.same({ 400, 'Invalid Request: one JSON-RPC message per POST' },
      { batch.status, trace.decode(batch.body).error.message })
  end)

  it('a body of 20,000 nested arrays is refused as too deep, and the server serves on', function()
    local got = check('deep')
    assert.equal(400, got.status)
    assert.equal(-32700, trace.decode(got.body).error.code)
    assert.is_true(got.answered_after)
  end)

  it('two calls with the same id at once are each answered, on their own connections', function()
    local got = check('duplicate-ids')
    assert.same({ 200, 200 }, got.statuses)
    for _, body in ipairs(got.bodies) do
      local reply = trace.decode(body)
      assert.same({ 7, '3' }, { reply.id, reply.result.content[1].text })
    end
  end)

  it('a forged session and one used after DELETE are 404', function()
    assert.same({ fake = 404, delete = 200, after_delete = 404 }, check('forged'))
  end)

  it('a request trickled a byte at a time is cut off at read_timeout while others are answered', function()
    local got = check('slowloris')
    assert.is_true(got.closed)
    assert.is_true(got.served_meanwhile)
    assert.is_true(got.cut_after >= 2 and got.cut_after < 8, 'cut after ' .. got.cut_after .. ' s')
  end)

  it('connections past the bound are answered 503 at once, and the server serves once they go', function()
    local got = check('connections')
    assert.equal(300 - 128, got.refused)
    assert.is_true(got.answered_after)
  end)

  it('a client that never reads a 64 MB event stream is cut off, and the server stays small and serving', function()
    local got = check('never-reads')
    assert.is_true(got.answered_after)
    assert.is_true(got.read_before_close_mb < 64, got.read_before_close_mb .. ' MB read')
    assert.is_true(got.rss_kib < 64 * 1024, got.rss_kib .. ' KiB resident')
  end)
end)
