-- HTTP keeps its connections: a reply stream is read to its end, so its
-- connection goes back to the pool for the next POST, and one that stays
-- open is read on elsewhere without holding Lua. Connections are counted by
-- the servers themselves (a line per accepted connection for
-- server-everything, /stats for our fault server), never by our client.
local H = require('helpers')
local trace = require('trace')

local mcp = H.native()

local function lines_in(path)
  local f = io.open(path)
  if not f then return 0 end
  local n = 0
  for _ in f:lines() do n = n + 1 end
  f:close()
  return n
end

local get_json = H.get_json

describe('HTTP connections', function()
  it("discover and 300 calls to server-everything open at most three connections #peer", function()
    local log = H.tmpname()
    local url, stop = H.everything_http(log)
    local client = mcp.new({ url = url })
    client:discover()
    for i = 1, 300 do
      assert.equal('Echo: ' .. i, (client:call('echo', { message = tostring(i) })))
    end
    local opened = lines_in(log)
    client:close()
    stop()
    os.remove(log)
    assert.is_true(opened >= 1 and opened <= 3, opened .. ' connections')
  end)

  describe('against replies over SSE', function()
    local stop, base
    setup(function() base, stop = H.fault_server() end)
    teardown(function() stop() end)

    local function accepted(path) return get_json(base .. '/stats').accepted[path] or 0 end

    it('a stream that ends with its reply gives its connection back', function()
      -- The handshake's connection, the server's stream, and one for the
      -- answer to the ping the server sends on its stream (posted while
      -- the first is busy); the session's DELETE is not counted.
      local client = mcp.new({ url = base .. '/sse' })
      client:discover()
      for i = 1, 300 do
        assert.equal('Echo: ' .. i, (client:call('echo', { message = tostring(i) })))
      end
      local opened = accepted('/sse')
      client:close()
      assert.is_true(opened >= 1 and opened <= 3, opened .. ' connections')
    end)

    it('a stream that goes on a moment past its reply is read to its end, and what it brings reaches Lua', function()
      local seen = 0
      local client = mcp.new({ url = base .. '/sse-linger', on_notification = function(m)
        if m.method == 'notifications/message' and tostring(m.params.data):find('^after ') then seen = seen + 1 end
      end })
      client:discover()
      for i = 1, 300 do
        assert.equal('Echo: ' .. i, (client:call('echo', { message = tostring(i) })))
      end
      local deadline = mcp.clock() + 5
      repeat client:ping() until seen == 300 or mcp.clock() > deadline
      local opened = accepted('/sse-linger')
      client:close()
      assert.equal(300, seen)
      assert.is_true(opened >= 1 and opened <= 3, opened .. ' connections')
    end)

    it('SIGINT while the Lua thread reads its reply stream returns Lua to the host, and the request is cancelled', function()
      get_json(base .. '/log')
      local seconds, raised, out, status =
        H.interrupted_call(string.format('{ url = %q, timeout = 30 }', base .. '/sse'), 'slow', 'c:discover()')
      assert.equal(0, status, out)
      assert.is_truthy(raised and raised:find('^mcp:%d+: interrupted!$'), out)
      -- the server answers after 3 s; the call must not wait for it
      assert.is_true(seconds < 2, out)
      local cancelled
      for _, r in ipairs(get_json(base .. '/log')) do
        local m = r.method == 'POST' and trace.decode(r.body)
        if m and m.method == 'notifications/cancelled' then cancelled = m.params end
      end
      -- ids: initialize 1, tools/list 2, tools/call 3
      assert.same({ requestId = 3, reason = 'interrupted by the user' }, cancelled)
    end)

    it('streams that never end are read on by a few threads, and the rest are let go with their connections', function()
      local seen = 0
      local client = mcp.new({ url = base .. '/sse-open', on_notification = function(m)
        if m.method == 'notifications/message' and tostring(m.params.data):find('^after ') then seen = seen + 1 end
      end })
      client:discover()
      for i = 1, 20 do
        assert.equal('Echo: ' .. i, (client:call('echo', { message = tostring(i) })))
      end
      -- At most four streams are read past their reply; with the server's
      -- own stream and the last call's, six connections stay open.
      local open = get_json(base .. '/stats').paths['/sse-open'] or 0
      assert.is_true(open <= 6, open .. ' connections open')
      client:ping()
      assert.is_true(seen >= 1)
      client:close()
    end)
  end)
end)
