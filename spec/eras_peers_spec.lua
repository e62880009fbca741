-- The era probe against real servers of both eras, over stdio and over
-- HTTP: the 2026-07-28 peers of the TypeScript SDK v2 (2.4.0) and the
-- Python SDK (2.3.0), spoken to the modern way by default and through
-- initialize when opts.era = "legacy" asks for it; and the servers people
-- run today, on the Python SDK 1.x and the TypeScript SDK 1.x, which know
-- nothing of server/discover and must go on working as before.
-- (spec/eras_spec.lua holds the probe to each way a server can meet it,
-- against our own scripted server.)
local H = require('helpers')

local mcp = H.native()
local PEERS = H.ROOT .. '/spec/peers/'
local NODE = PEERS .. 'node_modules/.bin/node'

-- Every wait bounded, generously: a peer starting on a busy machine (the
-- Python ones take about a second) is not what these specs are about.
local TIMEOUT = 30

local function sorted_names(tools)
  local names = {}
  for i, tool in ipairs(tools) do names[i] = tool.name end
  table.sort(names)
  return names
end

-- opts for mcp.new: the place the server is found at, and the rest.
local function with(where, opts)
  local out = { timeout = TIMEOUT, connect_timeout = TIMEOUT }
  for k, v in pairs(where) do out[k] = v end
  for k, v in pairs(opts or {}) do out[k] = v end
  return out
end

-- The clients a spec made, each closed after it whatever happened.
local opened = {}
local function open(opts)
  local c = mcp.new(opts)
  opened[#opened + 1] = c
  return c
end
local function close_all()
  for i, c in ipairs(opened) do
    c:close()
    opened[i] = nil
  end
end

-- A peer over stdio, or started in the background over HTTP for the
-- describe it is called in. Returns a function giving, inside a spec, where
-- mcp.new finds it (the URL is known only once setup has run).
local function serve(peer, transport)
  local url, stop
  if transport == 'HTTP' then
    setup(function()
      local port = H.port()
      stop = select(2, H.start(peer.interpreter .. ' ' .. peer.script .. ' http ' .. port, 'listening %d+', 60))
      url = 'http://127.0.0.1:' .. port .. '/mcp'
    end)
    teardown(function() if stop then stop() end end)
  end
  return function()
    if transport == 'HTTP' then return { url = url } end
    return { command = { peer.interpreter, peer.script, 'stdio' } }
  end
end

-- An elicitation handler answering `answer` ('accept' with ok = true, or
-- 'decline'), and what it was asked.
local function confirming(answer)
  local asked = {}
  local handlers = {
    ['elicitation/create'] = function(params)
      asked[#asked + 1] = params.message
      if answer == 'accept' then return { action = 'accept', content = { ok = true } } end
      return { action = answer }
    end,
  }
  return handlers, asked
end

-- `tools`: what each lists (sorted); the TypeScript one also reports what
-- the client declared and asks for input by URL.
local MODERN = {
  { name = 'the TypeScript SDK v2 server', interpreter = NODE, script = PEERS .. 'modern_server.mjs',
    info = { name = 'modern-ts', version = '1.0.0' }, declares = true,
    tools = { 'add', 'confirm', 'declared', 'echo', 'grow', 'link', 'route', 'sample', 'steps' } },
  { name = 'the Python SDK 2.3.0 server', interpreter = PEERS .. 'python/bin/python', script = PEERS .. 'modern_server.py',
    info = { name = 'modern-py', version = '1.0.0' },
    tools = { 'add', 'confirm', 'echo', 'grow', 'route', 'steps' } },
}

-- A peer's tools once grow has added extra.
local function grown(tools)
  local out = { 'extra' }
  for _, name in ipairs(tools) do out[#out + 1] = name end
  table.sort(out)
  return out
end

for _, peer in ipairs(MODERN) do
  for _, transport in ipairs({ 'stdio', 'HTTP' }) do
    describe(peer.name .. ' over ' .. transport .. ' #peer', function()
      local where = serve(peer, transport)

      after_each(close_all)
      local function client(opts) return open(with(where(), opts)) end

      it('is spoken to at 2026-07-28 with default opts, and lists its tools', function()
        local c = client()
        local tools = c:discover()
        assert.equal('modern', c.era)
        assert.equal('2026-07-28', c.negotiated_version)
        assert.same(peer.info, c.server_info)
        -- No pin on the ids: a peer slower to start than the probe waits
        -- (about a second; the Python one takes 0.8 to 1 s here) is sent
        -- initialize, refuses it with -32022 and is probed again (the path
        -- spec/eras_spec.lua pins), so whether id 1 went to initialize
        -- depends on the machine's load.
        -- (`extra` appears only once `grow` has run, which no spec here does)
        assert.same(peer.tools, sorted_names(tools))
      end)

      it('add answers 5 with the structuredContent its outputSchema describes', function()
        local c = client()
        c:discover()
        local text, is_error, result = c:call('add', { a = 2, b = 3 })
        assert.equal('5', text)
        assert.is_false(is_error)
        assert.same({ sum = 5 }, result.structuredContent)
        assert.equal('complete', result.resultType)
      end)

      it('gives the greet prompt and reads memo://note', function()
        local c = client()
        local prompt = c:get_prompt('greet', { name = 'Lua' })
        assert.equal(1, #prompt.messages)
        assert.equal('user', prompt.messages[1].role)
        assert.same({ type = 'text', text = 'Hello, Lua' }, prompt.messages[1].content)
        assert.same({ { uri = 'memo://note', mimeType = 'text/plain', text = 'a note' } }, c:read_resource('memo://note'))
      end)

      it("confirm's input round is answered by the elicitation handler: accept confirms, decline declines", function()
        local handlers, asked = confirming('accept')
        local c = client({ handlers = handlers })
        assert.equal('confirmed deploy', (c:call('confirm', { action = 'deploy' })))
        assert.same({ 'Confirm deploy?' }, asked)
        local declining, asked_again = confirming('decline')
        local d = client({ handlers = declining })
        assert.equal('declined deploy', (d:call('confirm', { action = 'deploy' })))
        assert.same({ 'Confirm deploy?' }, asked_again)
      end)

      if transport == 'HTTP' then
        it("route's region, marked x-mcp-header, goes out as the Mcp-Param-Region header", function()
          local c = client()
          c:discover()
          local text, is_error = c:call('route', { region = 'eu-west', query = 'weather' })
          assert.is_false(is_error)
          assert.equal('eu-west:weather\nheader=eu-west', text)
        end)

        it('a call before the tools were listed goes without the header, is refused (-32020), and goes again after'
          .. ' they are listed', function()
          local c = client()
          assert.equal('eu-west:weather\nheader=eu-west', (c:call('route', { region = 'eu-west', query = 'weather' })))
          assert.same(peer.tools, sorted_names(c.tools))
        end)
      else
        it('route over stdio has no header to send, and answers with its arguments alone', function()
          local c = client()
          c:discover()
          assert.equal('eu-west:weather', (c:call('route', { region = 'eu-west', query = 'weather' })))
        end)
      end

      it('opts.era = "legacy" speaks through initialize, and confirm comes as a real elicitation/create', function()
        local handlers, asked = confirming('accept')
        local c = client({ era = 'legacy', handlers = handlers })
        local tools = c:discover()
        assert.equal('legacy', c.era)
        assert.equal('2025-06-18', c.negotiated_version)
        assert.same(peer.info, c.server_info)
        -- initialize took id 1, tools/list 2
        assert.equal(2, c.next_id)
        assert.same(peer.tools, sorted_names(tools))
        assert.equal('5', (c:call('add', { a = 2, b = 3 })))
        local text, is_error, result = c:call('confirm', { action = 'deploy' })
        assert.equal('confirmed deploy', text)
        assert.is_false(is_error)
        assert.same({ 'Confirm deploy?' }, asked)
        -- A 2025 result: no resultType, so no input round came back; the
        -- handler was asked by a request of the server's own.
        assert.is_nil(result.resultType)
        local declining = confirming('decline')
        local d = client({ era = 'legacy', handlers = declining })
        assert.equal('declined deploy', (d:call('confirm', { action = 'deploy' })))
        assert.equal('legacy', d.era)
      end)

      -- What a new user tries first: a tool that logs three steps, with
      -- on_log set and no set_log_level. A 2026-07-28 server sends a
      -- request's logs only when its envelope asks (logLevel); a 2025
      -- session gets them unasked.
      for _, era in ipairs({ 'modern', 'legacy' }) do
        it('with on_log set and no set_log_level, a ' .. era .. ' session hears the three steps a tool logs', function()
          local logged = {}
          local c = client({ era = era, on_log = function(params) logged[#logged + 1] = params end })
          assert.equal('done', (c:call('steps', {})))
          local deadline = mcp.clock() + TIMEOUT
          while #logged < 3 and mcp.clock() < deadline do c:ping() end
          assert.equal(era, c.era)
          assert.same({
            { level = 'info', logger = 'steps', data = 'step 1' },
            { level = 'info', logger = 'steps', data = 'step 2' },
            { level = 'info', logger = 'steps', data = 'step 3' },
          }, logged)
        end)
      end

      it('set_log_level chooses the level a modern session asks for: at warning, info steps stay away', function()
        local logged = {}
        local c = client({ on_log = function(params) logged[#logged + 1] = params end })
        c:set_log_level('warning')
        assert.equal('done', (c:call('steps', {})))
        c:ping()
        assert.equal('modern', c.era)
        assert.same({}, logged)
      end)

      if peer.declares then
        for _, era in ipairs({ 'modern', 'legacy' }) do
          it('a ' .. era .. ' session declares opts.capabilities over what handlers imply, and opts.extensions', function()
            local c = client({ era = era, handlers = confirming('accept'),
              capabilities = { elicitation = { url = {} }, sampling = { tools = {} }, roots = { listChanged = true } },
              extensions = { ['io.modelcontextprotocol/ui'] = { mimeTypes = { 'text/html;profile=mcp-app' } } } })
            local declared = mcp.json_decode((c:call('declared', {})))
            assert.same({
              elicitation = { url = {} },
              sampling = { tools = {} },
              roots = { listChanged = true },
              extensions = { ['io.modelcontextprotocol/ui'] = { mimeTypes = { 'text/html;profile=mcp-app' } } },
            }, declared)
            assert.same({ ['io.github.lua-mcp/test'] = { version = '1' } }, c.server_capabilities.extensions)
          end)

          it('on a ' .. era .. ' session a sampling request offering tools reaches the handler with them', function()
            local asked = {}
            local handlers = { ['sampling/createMessage'] = function(params)
              asked[#asked + 1] = params
              return { role = 'assistant', content = { type = 'text', text = '4' }, model = 'stub' }
            end }
            local c = client({ era = era, handlers = handlers, capabilities = { sampling = { tools = {} } } })
            assert.equal('model said 4', (c:call('sample', {})))
            assert.equal(1, #asked)
            assert.equal('calc', asked[1].tools[1].name)
            assert.same({ mode = 'auto' }, asked[1].toolChoice)
          end)

          it('on a ' .. era .. ' session a URL-mode elicitation reaches the handler with its URL once elicitation.url is declared', function()
            local asked = {}
            local handlers = { ['elicitation/create'] = function(params)
              asked[#asked + 1] = params
              return { action = 'accept' }
            end }
            local c = client({ era = era, handlers = handlers, capabilities = { elicitation = { form = {}, url = {} } } })
            assert.equal('link accept', (c:call('link', {})))
            assert.equal(1, #asked)
            assert.equal('url', asked[1].mode)
            assert.equal('https://example.com/sign-in', asked[1].url)
            assert.equal('Sign in to continue', asked[1].message)
            -- Declared without url, the server asks nothing: a modern one
            -- refuses with the capability it needs (-32021), the 2025
            -- shim fails the tool.
            local plain = client({ era = era, handlers = handlers })
            local ok, text, is_error = pcall(plain.call, plain, 'link', {})
            assert.equal(1, #asked)
            if era == 'modern' then
              assert.is_false(ok)
              assert.equal("MCP tools/call link failed: Cannot request input 'link' (elicitation/create): the request's "
                .. 'client capabilities do not declare the required capability (code -32021); the server requires '
                .. 'the client capabilities {"elicitation":{"url":{}}}', text)
            else
              assert.is_true(ok)
              assert.is_true(is_error)
              assert.equal("Cannot request input 'link' (elicitation/create): the client on this 2025-era connection "
                .. 'did not declare the required capability', text)
            end
          end)
        end
      end

      -- Last: the HTTP server is shared by the describe, and keeps the tool.
      it('a list change comes on the listen: on_list_changed hears it, and the new tool is listed', function()
        local changed = {}
        local c = client({ on_list_changed = function(kind) changed[#changed + 1] = kind end })
        c:discover()
        assert.equal('grown', (c:call('grow', {})))
        -- Over HTTP the listen is a stream of its own: the change may come
        -- a moment after grow's reply.
        local deadline = mcp.clock() + TIMEOUT
        while #changed == 0 and mcp.clock() < deadline do c:ping() end
        assert.same({ 'tools' }, changed)
        -- the next call finds the list stale and lists it first
        assert.equal('extra', (c:call('extra', {})))
        assert.same(grown(peer.tools), sorted_names(c.tools))
      end)
    end)
  end
end

-- The Python SDK's last 1.x (FastMCP), spec/peers/legacy_server.py.
local LEGACY_PY = { interpreter = PEERS .. 'python-v1/bin/python', script = PEERS .. 'legacy_server.py' }

for _, transport in ipairs({ 'stdio', 'HTTP' }) do
  describe('the Python SDK 1.30.0 server over ' .. transport .. ' #peer', function()
    local where = serve(LEGACY_PY, transport)
    after_each(close_all)

    -- How it answers the probe, seen on the wire: over stdio its session
    -- cannot parse a method it does not know and answers -32602
    -- ("Invalid request parameters", data ""); over HTTP the Streamable HTTP
    -- transport wants a session for anything but initialize and answers
    -- HTTP 400 with {"id":"server-error","error":{"code":-32600,"message":
    -- "Bad Request: Missing session ID"}} (and an mcp-session-id header of a
    -- session nobody initialized, which the client must not adopt).
    it('is legacy with default opts and works as before', function()
      local c = open(with(where()))
      local tools = c:discover()
      assert.equal('legacy', c.era)
      assert.equal('2025-06-18', c.negotiated_version)
      assert.same({ name = 'legacy-py', version = '1.30.0' }, c.server_info)
      assert.equal(2, c.next_id)
      assert.same({ 'add', 'echo' }, sorted_names(tools))
      local text, is_error = c:call('add', { a = 2, b = 3 })
      assert.equal('5', text)
      assert.is_false(is_error)
      assert.equal('over ' .. transport, (c:call('echo', { text = 'over ' .. transport })))
    end)
  end)
end

describe('server-everything over stdio #peer', function()
  after_each(close_all)
  -- On the TypeScript SDK 1.x (1.32.2): it answers the probe -32601
  -- ("Method not found"), as any 2025 server should.
  it('is legacy with default opts and works as before', function()
    local c = open(with({ command = H.everything_argv() }))
    c:discover()
    assert.equal('legacy', c.era)
    assert.equal('2025-06-18', c.negotiated_version)
    assert.equal('mcp-servers/everything', c.server_info.name)
    local text, is_error = c:call('echo', { message = 'hi' })
    assert.equal('Echo: hi', text)
    assert.is_false(is_error)
  end)
end)
