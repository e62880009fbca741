-- The client surface beyond discover and call: resources, prompts,
-- completion, logging, notifications, ping, the async forms, and the
-- reference's low-level methods over a live session. Against
-- server-everything over stdio and HTTP, and spec/servers/faulty.lua for
-- what it cannot be made to do (pages, missing capabilities).
local H = require('helpers')

local mcp = H.native()

-- What on_notification heard, sorted out as the callbacks for each kind
-- get it: on_log the params, on_resource_updated the uri, on_list_changed
-- the kind.
local function by_kind(heard)
  local out = { logs = {}, updated = {}, changed = {} }
  for _, msg in ipairs(heard) do
    local kind = msg.method:match('^notifications/(%a+)/list_changed$')
    if msg.method == 'notifications/message' then
      out.logs[#out.logs + 1] = msg.params
    elseif msg.method == 'notifications/resources/updated' then
      out.updated[#out.updated + 1] = msg.params.uri
    elseif kind then
      out.changed[#out.changed + 1] = kind
    end
  end
  return out
end

-- server-everything acknowledges each subscribe and unsubscribe with a log
-- message: which of the two each log message acknowledged, in order.
local function acknowledged(logs)
  local out = {}
  for _, params in ipairs(logs) do
    out[#out + 1] = tostring(params.data):match('^Received (%a+) Resource request')
  end
  return out
end

-- The same checks over both transports.
local function surface(open)
  return function()
    local logs, updated, changed, heard = {}, {}, {}, {}
    local client = open({
      on_log = function(params) logs[#logs + 1] = params end,
      on_resource_updated = function(uri) updated[#updated + 1] = uri end,
      on_list_changed = function(kind) changed[#changed + 1] = kind end,
      on_notification = function(msg) heard[#heard + 1] = msg end,
    })

    assert.is_true(client:ping())
    assert.is_table(client.server_capabilities.resources)
    assert.is_string(client.instructions)

    local resources = client:list_resources()
    assert.is_true(#resources >= 2)
    assert.equal('demo://resource/static/document/architecture.md', resources[1].uri)
    local contents = client:read_resource(resources[1].uri)
    assert.equal(resources[1].uri, contents[1].uri)
    assert.equal('text/markdown', contents[1].mimeType)
    assert.is_string(contents[1].text)

    local templates = client:list_resource_templates()
    assert.is_truthy(templates[1].uriTemplate:find('{resourceId}', 1, true))

    local prompts = client:list_prompts()
    local names = {}
    for _, p in ipairs(prompts) do names[p.name] = true end
    assert.is_true(names['simple-prompt'] and names['args-prompt'] and true)
    local prompt = client:get_prompt('args-prompt', { city = 'Paris', state = 'TX' })
    assert.is_truthy(prompt.messages[1].content.text:find('Paris', 1, true))

    local _, _, structured = client:call('get-structured-content', { location = 'New York' })
    assert.is_number(structured.structuredContent.temperature)

    local completion = client:complete({ type = 'ref/prompt', name = 'completable-prompt' },
      { name = 'department', value = 'E' })
    assert.is_table(completion.values)
    assert.equal('Engineering', completion.values[1])

    client:set_log_level('debug')
    assert.same({}, client:subscribe(resources[1].uri))
    assert.same({}, client:unsubscribe(resources[1].uri))

    -- the async forms return what the blocking ones do
    local handles = {
      client:list_resources_async(), client:read_resource_async(resources[1].uri),
      client:get_prompt_async('simple-prompt'), client:ping_async(),
    }
    assert.is_true(mcp.wait_all(handles, 30))
    assert.equal(#resources, #handles[1]:wait())
    assert.equal(resources[1].uri, handles[2]:wait()[1].uri)
    assert.is_table(handles[3]:wait().messages)
    local more = {
      client:list_resource_templates_async(), client:list_prompts_async(), client:list_tools_async(),
      client:complete_async({ type = 'ref/prompt', name = 'completable-prompt' }, { name = 'department', value = 'E' }),
      client:set_log_level_async('info'), client:unsubscribe_async(resources[1].uri),
      client:request_async('resources/list'),
    }
    assert.is_true(mcp.wait_all(more, 30))
    assert.equal(#templates, #more[1]:wait())
    assert.equal(#prompts, #more[2]:wait())
    assert.is_true(#more[3]:wait() >= 10)
    assert.equal('Engineering', more[4]:wait().values[1])
    assert.same({}, more[5]:wait())
    assert.same({}, more[6]:wait())
    assert.equal(#resources, #more[7]:wait().resources)

    -- a request the reference's way, over the live session
    local before = #heard
    local by_id, notifications = client:exchange({
      { jsonrpc = '2.0', id = client:id(), method = 'resources/list', params = {} },
    })
    local reply = by_id[client.next_id]
    assert.equal(#resources, #reply.result.resources)
    -- the notifications that came meanwhile, which on_notification heard too
    assert.same({ H.unpack(heard, before + 1) }, notifications)
    assert.same({}, client:handshake())

    client:notify('notifications/roots/list_changed')
    -- The subscribe and both unsubscribes were acknowledged; over HTTP on the
    -- server's own stream, which may still be bringing them.
    local deadline = mcp.clock() + 10
    while #acknowledged(logs) < 3 and mcp.clock() < deadline do
      client:dispatch()
      os.execute('sleep 0.05')
    end
    client:close()
    assert.same({ 'Subscribe', 'Unsubscribe', 'Unsubscribe' }, acknowledged(logs))
    -- on_notification heard every notification, those the callbacks for
    -- their kind got as well
    assert.same({ logs = logs, updated = updated, changed = changed }, by_kind(heard))
    return logs, updated, changed
  end
end

describe('the surface against server-everything #peer', function()
  it('over stdio', surface(function(callbacks)
    callbacks.command = H.everything_argv()
    return mcp.new(callbacks)
  end))

  it('over HTTP', function()
    local url, stop = H.everything_http()
    local ok, err = pcall(surface(function(callbacks)
      callbacks.url = url
      return mcp.new(callbacks)
    end))
    stop()
    assert(ok, err)
  end)

  it('on_log and on_resource_updated get their notifications, on_notification every one', function()
    local logs, updated, all = {}, {}, {}
    local client = mcp.new({ command = H.everything_argv(),
      on_log = function(params) logs[#logs + 1] = params end,
      on_resource_updated = function(uri) updated[#updated + 1] = uri end,
      on_notification = function(msg) all[msg.method] = true end })
    local uri = 'demo://resource/static/document/architecture.md'
    client:set_log_level('debug')
    client:subscribe(uri)
    -- The server sends both every 5 s once its tools switch them on.
    client:call('toggle-simulated-logging', {})
    client:call('toggle-subscriber-updates', {})
    local deadline = mcp.clock() + 20
    while (#logs == 0 or #updated == 0) and mcp.clock() < deadline do
      client:dispatch()
      os.execute('sleep 0.1')
    end
    client:close()
    assert.is_true(#logs > 0, 'no log message arrived')
    assert.is_string(logs[1].level)
    assert.equal(uri, updated[1])
    assert.is_true(all['notifications/message'] and all['notifications/resources/updated'])
  end)
end)

describe('progress and versions against server-everything #peer', function()
  local function long_running(client)
    local seen = {}
    local t0 = mcp.clock()
    -- 1.2 s of work with a 0.5 s timeout: only its progress keeps it alive
    local text = client:call('trigger-long-running-operation', { duration = 1.2, steps = 6 }, {
      timeout = 0.5, on_progress = function(progress, total) seen[#seen + 1] = { progress, total } end })
    assert.is_truthy(text:find('Long running operation completed', 1, true), text)
    assert.is_true(mcp.clock() - t0 >= 1.1)
    assert.same({ 1, 6 }, seen[1])
    assert.same({ 6, 6 }, seen[6])
    local ok, err = pcall(client.call, client, 'trigger-long-running-operation', { duration = 3, steps = 10 },
      { timeout = 1, max_total_timeout = 1, on_progress = function() end })
    assert.is_false(ok)
    assert.equal('MCP tools/call trigger-long-running-operation timed out after 1 s (opts.max_total_timeout)', err)
    local got = {}
    local h = client:call_async('trigger-long-running-operation', { duration = 0.4, steps = 2 },
      { on_progress = function(progress) got[#got + 1] = progress end })
    h:wait()
    assert.same({ 1, 2 }, got)
  end

  it('on_progress over stdio restarts the timeout, max_total_timeout caps it', function()
    local client = mcp.new({ command = H.everything_argv() })
    long_running(client)
    client:close()
  end)

  it('on_progress over HTTP', function()
    local url, stop = H.everything_http()
    local client = mcp.new({ url = url })
    local ok, err = pcall(long_running, client)
    client:close()
    stop()
    assert(ok, err)
  end)

  it('protocol_version = "2025-11-25" negotiates the newest revision; SUPPORTED_VERSIONS lists them', function()
    assert.same({ '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05' }, mcp.SUPPORTED_VERSIONS)
    assert.equal('2025-06-18', mcp.PROTOCOL_VERSION)
    local client = mcp.new({ command = H.everything_argv(), protocol_version = '2025-11-25' })
    client:discover()
    assert.equal('2025-11-25', client.negotiated_version)
    client:close()
  end)
end)

describe('the surface against our own servers', function()
  it('errors name the tool called even as calls cycle through more tools than the labels kept', function()
    local client = mcp.new({ command = H.COUNTER })
    client:discover()
    for _ = 1, 2 do
      for i = 1, 10 do
        local ok, err = pcall(client.call, client, 'nope' .. i, {})
        assert.is_false(ok)
        assert.equal(('MCP tools/call nope%d failed: Unknown tool: nope%d (code -32602)'):format(i, i), err)
      end
    end
    client:close()
  end)

  it('lists follow every page, blocking and async', function()
    local client = mcp.new({ command = H.faulty('catalog') })
    local resources = client:list_resources()
    assert.same({ 'file:///page1', 'file:///page2', 'file:///page3' },
      { resources[1].uri, resources[2].uri, resources[3].uri })
    assert.equal(3, #resources)
    local prompts = client:list_prompts_async():wait()
    assert.same({ 'prompt1', 'prompt2' }, { prompts[1].name, prompts[2].name })
    client:close()
  end)

  it('a request for a capability the server did not declare fails before sending, naming it', function()
    local log = H.tmpname()
    local client = mcp.new({ command = H.faulty('catalog'), env = { METHOD_LOG = log } })
    client:list_resources()
    local refusals = {
      { client.subscribe, 'file:///x', 'MCP resources/subscribe not sent: the server did not declare the resources.subscribe capability' },
      { client.set_log_level, 'debug', 'MCP logging/setLevel not sent: the server did not declare the logging capability' },
      { client.complete, { type = 'ref/prompt', name = 'p' }, 'MCP completion/complete not sent: the server did not declare the completions capability' },
    }
    for _, r in ipairs(refusals) do
      local ok, err = pcall(r[1], client, r[2], { name = 'a', value = 'b' })
      assert.is_false(ok)
      assert.equal(r[3], err)
    end
    local ok, err = pcall(client.subscribe_async, client, 'file:///x')
    assert.is_false(ok)
    assert.equal(refusals[1][3], err)
    client:close()
    local methods = H.slurp(log)
    assert.is_nil(methods:find('subscribe', 1, true), methods)
    assert.is_nil(methods:find('setLevel', 1, true), methods)

    local counter = mcp.new({ command = H.COUNTER })
    ok, err = pcall(counter.list_resources, counter)
    assert.equal('MCP resources/list not sent: the server did not declare the resources capability', err)
    counter:close()
  end)

  it('exchange over a live session answers initialize from the session and waits for every reply', function()
    local client = mcp.new({ command = H.COUNTER })
    local init = client:initialize_msg()
    local list_id, wrong_id = client:id(), client:id()
    local by_id = client:exchange({
      init,
      { jsonrpc = '2.0', method = 'notifications/initialized' },
      { jsonrpc = '2.0', id = list_id, method = 'tools/list' },
      { jsonrpc = '2.0', id = wrong_id, method = 'no/such/method' },
    })
    assert.equal('counter', by_id[init.id].result.serverInfo.name)
    assert.equal(3, #by_id[list_id].result.tools)
    assert.same({ code = -32601, message = 'Method not found: no/such/method' }, by_id[wrong_id].error)
    client:close()
  end)

  it("call returns the whole result third, and a result that breaks the tool's outputSchema fails", function()
    local client = mcp.new({ command = H.faulty('catalog') })
    local tools = client:discover()
    assert.equal('number', tools[1].outputSchema.properties.temperature.type)
    local text, is_error, result = client:call('weather', {})
    assert.same({ '{"temperature":21.5}', false }, { text, is_error })
    assert.same({ temperature = 21.5 }, result.structuredContent)
    local ok, err = pcall(client.call, client, 'misshapen', {})
    assert.is_false(ok)
    assert.equal('MCP tools/call misshapen: structuredContent does not match the tool\'s outputSchema: '
      .. '"warm" is not of type "number" at /temperature', err)
    ok, err = pcall(client.call, client, 'shapeless', {})
    assert.equal('MCP tools/call shapeless: structuredContent does not match the tool\'s outputSchema: '
      .. 'the result has no structuredContent', err)
    local h = client:call_async('misshapen', {})
    ok, err = pcall(h.wait, h)
    assert.is_truthy(err:find('^MCP tools/call misshapen: structuredContent does not match'), err)
    client:close()
  end)

  it('a changed tool list is listed again before the next call, and a watched registry follows', function()
    local changes, notices = {}, {}
    local client = mcp.new({ command = H.faulty('catalog'),
      on_list_changed = function(kind) changes[#changes + 1] = kind end,
      on_notification = function(m) if m.method:find('^lua%-mcp/') then notices[#notices + 1] = m end end })
    local with_remove = H.registry()
    function with_remove:remove(name) self.removed = (self.removed or 0) + 1; self.tools[name] = nil end
    local without_remove = H.registry()
    client:discover()
    assert.same({ 'weather', 'misshapen', 'grow', 'shapeless' },
      mcp.mount(with_remove, client, { watch = true }))
    mcp.mount(without_remove, client, { watch = true, prefix = 'cat_' })
    assert.equal('grown', (client:call('grow', {})))
    -- The server sends list_changed right behind the reply, so it may still
    -- be in the pipe when `call` returns; the ping's reply comes after it,
    -- so once the ping is answered the change has been seen.
    client:ping()
    -- the next call lists the tools again first
    client:call('weather', {})
    assert.same({ 'tools' }, changes)
    local names = {}
    for _, t in ipairs(client.tools) do names[#names + 1] = t.name end
    assert.same({ 'weather', 'misshapen', 'grow', 'extra' }, names)
    assert.is_truthy(with_remove:get('extra'))
    assert.is_nil(with_remove:get('shapeless'))
    assert.is_truthy(without_remove:get('cat_extra'))
    assert.is_truthy(without_remove:get('cat_shapeless'))
    assert.same({ 'cat_weather', 'cat_misshapen', 'cat_grow', 'cat_shapeless' }, notices[1].params.names)
    client:close()
  end)

  it('tool icons keep only https: and data: sources', function()
    local client = mcp.new({ command = H.faulty('catalog') })
    local tools = client:discover()
    assert.same({ { src = 'https://example.com/sun.png' }, { src = 'data:image/png;base64,AAAA' } }, tools[1].icons)
    client:close()
  end)

  it('a cwd, command or env that is not UTF-8 is refused naming the option and the encoding', function()
    if H.WINDOWS then return end -- there they are read in the code page (spec/windows_spec.lua)
    local cases = {
      { { command = H.COUNTER, cwd = 'caf\233' }, 'opts.cwd' },
      { { command = { H.LUA, 'caf\233.lua' } }, 'opts.command[2]' },
      { { command = H.COUNTER, env = { NOTE = 'caf\233' } }, 'opts.env.NOTE' },
    }
    for _, case in ipairs(cases) do
      -- a command is read when the server is first started
      assert.has_error(function() mcp.new(case[1]):discover() end, 'mcp.new: ' .. case[2]
        .. ' is not UTF-8, which is what this system takes (a bad byte at offset 3); pass it as UTF-8')
    end
  end)

  it('wrong arguments are refused with what to pass', function()
    local client = mcp.new({ command = H.COUNTER })
    local ok, err = pcall(client.read_resource, client, 42)
    assert.is_false(ok)
    assert.equal('client:read_resource: the uri must be a string, got number', err)
    ok, err = pcall(client.notify, client, nil)
    assert.equal('client:notify: the method must be a string, got nil', err)
    local fixture = mcp.new({ transport = H.server({}) })
    ok, err = pcall(fixture.list_resources, fixture)
    assert.equal('client:list: needs a command or url client (a fixture transport only runs discover, call and exchange)', err)
    client:close()
  end)
end)
