-- mcp.server: a Lua program as an MCP server over stdio
-- (lua/examples/notes_server.lua), called by this module's client, by the
-- pure mcp.lua, by the TypeScript and Python SDKs' clients, and fed bytes
-- no client would send.
local H = require('helpers')
local trace = require('trace')

local mcp = H.native()
local NOTES = { H.LUA, H.ROOT .. '/lua/examples/notes_server.lua' }
local LATER = { H.LUA, H.ROOT .. '/spec/servers/later.lua' }

-- The server fed `lines` on stdin (then its end): its stdout as decoded
-- messages, and its exit status.
local function fed(lines, server)
  server = server or NOTES
  local input = H.tmpname()
  local f = assert(io.open(input, 'wb'))
  f:write(table.concat(lines, '\n'), '\n')
  f:close()
  local out, status
  if H.WINDOWS then
    -- cmd.exe: no exit status to read back here (H.command is sh's).
    local p = io.popen(string.format('%s %s < %s 2>NUL', server[1], server[2], input))
    out = p:read('*a')
    p:close()
  else
    out, status = H.command(string.format('%s %s < %s 2>/dev/null', server[1], server[2], input))
  end
  os.remove(input)
  local messages = {}
  for line in out:gmatch('[^\r\n]+') do messages[#messages + 1] = trace.decode(line) end
  return messages, status
end

describe('a Lua server on mcp.server, over stdio', function()
  local client, asked, changes
  before_each(function()
    asked, changes = {}, {}
    -- The earlier revisions' session: list changes pushed, -32002 for a
    -- resource nobody serves (the 2026-07-28 client is pinned below).
    client = mcp.new({ command = NOTES, era = 'legacy',
      on_list_changed = function(kind) changes[#changes + 1] = kind end,
      handlers = { ['elicitation/create'] = function(params)
        asked[#asked + 1] = params.message
        return { action = 'accept', content = { name = 'Ada' } }
      end } })
  end)
  after_each(function() client:close() end)

  it('lists its tools as defined, and shapes each call by what the handler returned', function()
    local names = {}
    for _, t in ipairs(client:discover()) do names[#names + 1] = t.name end
    assert.same({ 'add', 'note', 'ask_name', 'count', 'grow' }, names)
    assert.same({ readOnlyHint = true }, client.tools[1].annotations)
    assert.equal('notes', client.server_info.name)
    assert.equal('Notes kept by day.', client.instructions)
    -- a number is its text (and the handler's print went to stderr)
    assert.equal('5', (client:call('add', { a = 2, b = 3 })))
    -- a table of a tool with an output schema is its structured content
    local text, is_error, result = client:call('note', { day = 'monday' })
    assert.same({ '{"day":"monday","text":"buy milk"}', false }, { text, is_error })
    assert.same({ day = 'monday', text = 'buy milk' }, result.structuredContent)
  end)

  it('refuses arguments that break the input schema in words the model can act on, without running the handler', function()
    local text, is_error = client:call('add', { a = 'two', b = 3 })
    assert.is_true(is_error)
    assert.equal('Invalid arguments for tool add: "two" is not of type "number" (at /a). '
      .. 'Call it again with arguments that match its inputSchema.', text)
  end)

  it('returns a handler\'s nil, message as a tool error, and an unknown tool as the protocol\'s', function()
    local text, is_error = client:call('note', { day = 'friday' })
    assert.same({ 'no note for friday; the days with notes are monday and tuesday', true }, { text, is_error })
    assert.has_error(function() client:call('nope', {}) end, 'MCP tools/call nope failed: Unknown tool: nope (code -32602)')
  end)

  it('speaks 2026-07-28 to a client that does: questions in rounds (input_required), list changes on its subscriptions/listen', function()
    local heard = {}
    local modern = mcp.new({ command = NOTES, era = 'modern',
      on_list_changed = function(kind) heard[#heard + 1] = kind end,
      handlers = { ['elicitation/create'] = function(params)
        asked[#asked + 1] = params.message
        return { action = 'accept', content = { name = 'Cy' } }
      end } })
    assert.equal('5', (modern:call('add', { a = 2, b = 3 })))
    assert.equal('modern', modern.era)
    assert.equal('Hello, Cy', (modern:call('ask_name', {})))
    assert.same({ 'Your name?' }, asked)
    -- list changes come on its subscriptions/listen, opened once it listed
    modern:discover()
    modern:call('grow', {})
    local deadline = os.time() + 10
    while #heard == 0 and os.time() < deadline do
      modern:dispatch()
      mcp.wait_any({}, 0.05)
    end
    assert.same({ 'tools' }, heard)
    modern:close()
  end)

  it('speaks the earlier revisions to a client that does: the question goes over the session', function()
    local legacy = mcp.new({ command = NOTES, era = 'legacy',
      handlers = { ['elicitation/create'] = function() return { action = 'accept', content = { name = 'Bo' } } end } })
    assert.equal('Hello, Bo', (legacy:call('ask_name', {})))
    assert.equal('legacy', legacy.era)
    legacy:close()
  end)

  it('asks the client for input while the handler waits (elicitation)', function()
    assert.equal('Hello, Ada', (client:call('ask_name', {})))
    assert.same({ 'Your name?' }, asked)
  end)

  it('reports progress as the handler counts', function()
    local seen = {}
    assert.equal('counted to 3', (client:call('count', { n = 3 }, { on_progress = function(p, total, message)
      seen[#seen + 1] = string.format('%s/%s %s', p, total, message)
    end })))
    assert.same({ '1/3 counted 1', '2/3 counted 2', '3/3 counted 3' }, seen)
  end)

  it('tells the client its tool list changed when a tool is added while serving', function()
    client:discover()
    assert.equal('added', (client:call('grow', {})))
    client:ping()
    assert.equal('grown', (client:call('grown', {})))
    assert.same({ 'tools' }, changes)
    assert.equal('grown', client.tools[#client.tools].name)
  end)

  it('serves resources, templates, prompts and completions', function()
    assert.same({ { uri = 'notes://today', mimeType = 'text/plain', text = 'buy milk' } },
      client:read_resource('notes://today'))
    assert.equal('call Ada', client:read_resource('notes://tuesday')[1].text)
    assert.has_error(function() client:read_resource('other://x') end,
      'MCP resources/read failed: Resource not found: other://x (code -32002)')
    assert.equal('Please review a.lua', client:get_prompt('review', { file = 'a.lua' }).messages[1].content.text)
    local completion = client:request('completion/complete',
      { ref = { type = 'ref/prompt', name = 'review' }, argument = { name = 'file', value = 'm' } }).completion
    assert.same({ 'main.lua', 'mcp.lua' }, completion.values)
  end)
end)

describe('what a client may send a Lua server', function()
  it('a line that is not JSON, an unknown method and a ping each get their answer, and stdin\'s end ends serving', function()
    local messages, status = fed({
      'not json',
      '{"jsonrpc":"2.0","id":1,"method":"no/such"}',
      '{"jsonrpc":"2.0","id":2,"method":"ping"}',
    })
    if not H.WINDOWS then assert.equal(0, status) end
    assert.equal(3, #messages)
    assert.equal(-32700, messages[1].error.code)
    assert.same({ code = -32601, message = 'Method not found: no/such' }, messages[2].error)
    assert.equal(2, messages[3].id)
  end)

  it('a request the client cancelled gets no reply, and its handler sees the cancellation', function()
    local messages = fed({
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","arguments":{"n":50}}}',
      '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}',
      '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"count","arguments":{"n":1}}}',
    })
    assert.equal(1, #messages)
    assert.equal(2, messages[1].id)
    assert.equal('counted to 1', messages[1].result.content[1].text)
  end)

  it('past 1024 messages kept while a handler waits for its client, a request is refused at once as busy', function()
    local lines = {
      '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        .. '"capabilities":{"elicitation":{}},"clientInfo":{"name":"flood","version":"0"}}}',
      '{"jsonrpc":"2.0","method":"notifications/initialized"}',
      '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask_name"}}',
    }
    for i = 1, 1100 do lines[#lines + 1] = '{"jsonrpc":"2.0","id":' .. (100 + i) .. ',"method":"ping"}' end
    lines[#lines + 1] = '{"jsonrpc":"2.0","id":"server-1","result":{"action":"accept","content":{"name":"Ada"}}}'
    local messages = fed(lines)
    assert.equal('elicitation/create', messages[2].method)
    local busy = {}
    for i = 3, 78 do busy[#busy + 1] = messages[i].id end
    assert.equal(1125, busy[1])
    assert.equal(1200, busy[#busy])
    assert.same({ code = -32000, message = 'Server busy: 1024 messages already wait for a handler that is asking '
      .. 'its client something; send this again once it is answered' }, messages[3].error)
    assert.equal('Hello, Ada', messages[79].result.content[1].text)
    assert.equal(101, messages[80].id)
    assert.equal(1124, messages[#messages].id)
    assert.equal(1 + 1 + 76 + 1 + 1024, #messages)
  end)

  it('a log below the level the client set is not sent, even while its handler runs', function()
    local messages = fed({
      '{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"error"}}',
      '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}',
      '{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"debug"}}',
      '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}',
    })
    assert.same({ 1, 2, 3, 'notifications/message', 4 },
      { messages[1].id, messages[2].id, messages[3].id, messages[4].method, messages[5].id })
    assert.same({ level = 'info', data = 'adding 1 and 2' }, messages[4].params)
  end)

  it('a handler that answers later leaves its request open while others are answered', function()
    local messages = fed({
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hold"}}',
      '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hold"}}',
      '{"jsonrpc":"2.0","id":3,"method":"ping"}',
      '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"release"}}',
    }, LATER)
    assert.same({ 3, 4, 1, 2 }, { messages[1].id, messages[2].id, messages[3].id, messages[4].id })
    assert.same({ 'released 2', 'released', 'released' }, { messages[2].result.content[1].text,
      messages[3].result.content[1].text, messages[4].result.content[1].text })
  end)

  it('a question to the client with a callback does not wait: the answer comes when the client\'s does', function()
    local messages = fed({
      '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        .. '"capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"0"}}}',
      '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask_name_later"}}',
      '{"jsonrpc":"2.0","id":3,"method":"ping"}',
      '{"jsonrpc":"2.0","id":"server-1","result":{"action":"accept","content":{"name":"Ada"}}}',
      '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"ask_name_later"}}',
      '{"jsonrpc":"2.0","id":"server-2","error":{"code":-1,"message":"no"}}',
    }, LATER)
    assert.same({ 1, 'elicitation/create', 3, 2, 'elicitation/create', 4 }, { messages[1].id, messages[2].method,
      messages[3].id, messages[4].id, messages[5].method, messages[6].id })
    assert.equal('Hello, Ada', messages[4].result.content[1].text)
    assert.same({ 'the client refused elicitation/create: no (code -1)', true },
      { messages[6].result.content[1].text, messages[6].result.isError })
  end)

  it('serves its skill: listed with each file\'s digest and size, read as a resource, unknown ones refused', function()
    local messages = fed({
      '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        .. '"capabilities":{},"clientInfo":{"name":"c","version":"0"}}}',
      '{"jsonrpc":"2.0","id":2,"method":"skills/list"}',
      '{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"skill://notes/note-taking/SKILL.md"}}',
      '{"jsonrpc":"2.0","id":4,"method":"skills/get","params":{"uri":"skill://notes/nothing/SKILL.md"}}',
    })
    assert.same({}, messages[1].result.capabilities.extensions['io.modelcontextprotocol/skills'])
    local skill = messages[2].result.skills[1]
    assert.same({ name = 'note-taking', description = 'How notes are kept here: one per day, short' }, skill.frontmatter)
    assert.same({ 'skill://notes/note-taking/SKILL.md', 'skill://notes/note-taking/references/format.md' },
      { skill.resources[1].uri, skill.resources[2].uri })
    local text = messages[3].result.contents[1].text
    -- ": " inside a plain YAML scalar would start a mapping: that value is quoted
    assert.equal('---\nname: note-taking\ndescription: "How notes are kept here: one per day, short"\n---\n'
      .. '# Note taking\n\nOne note a day; see references/format.md.\n', text)
    assert.equal(#text, skill.resources[1].size)
    if not H.WINDOWS then
      local file = H.tmpname()
      local f = assert(io.open(file, 'wb'))
      f:write(text)
      f:close()
      local sum = H.command('sha256sum ' .. file):match('^(%x+)')
      os.remove(file)
      assert.equal('sha256:' .. sum, skill.resources[1].digest)
    end
    assert.same({ -32602, 'Unknown skill: skill://notes/nothing/SKILL.md' },
      { messages[4].error.code, messages[4].error.message })
  end)

  it('ids that cannot be ids, and requests with no method, are refused', function()
    local messages = fed({
      '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
      '{"jsonrpc":"2.0","id":3}',
    })
    assert.equal(-32600, messages[1].error.code)
    assert.equal('Invalid Request: no method', messages[2].error.message)
  end)
end)

describe("this module's client, on a Lua server's listings", function()
  it('keeps titles and only https: and data: icons of resources, templates and prompts, blocking or not', function()
    local client = mcp.new({ command = { H.LUA, H.ROOT .. '/spec/servers/icons.lua' } })
    local function look(items)
      local srcs = {}
      for _, icon in ipairs(items[1].icons) do srcs[#srcs + 1] = icon.src end
      return { items[1].title, srcs }
    end
    local safe = { 'https://example.com/a.png', 'data:image/png;base64,AAAA' }
    assert.same({ 'One', safe }, look(client:list_resources()))
    assert.same({ 'Numbered', safe }, look(client:list_resource_templates()))
    assert.same({ 'Greeting', safe }, look(client:list_prompts()))
    local handle = client:list_prompts_async()
    assert.same({ 'Greeting', safe }, look(handle:wait(10)))
    client:close()
  end)
end)

-- The SDKs' clients run on the Linux side only, and so does the pure
-- mcp.lua's stdio (a shell pipeline per request).
local peer_it = H.WINDOWS and pending or it

describe('other clients of a Lua server', function()
  peer_it('the pure mcp.lua serves as its client: discover and call', function()
    local reference = H.reference()
    local client = reference.new({ command = table.concat(NOTES, ' ') })
    local names = {}
    for _, t in ipairs(client:discover()) do names[#names + 1] = t.name end
    assert.same({ 'add', 'note', 'ask_name', 'count', 'grow' }, names)
    assert.equal('5', (client:call('add', { a = 2, b = 3 })))
  end)

  peer_it('the TypeScript SDK client lists, calls, answers an elicitation, reads and completes #peer', function()
    local out = H.command(string.format('cd %s/spec/peers && node stdio_client.mjs %s %s', H.ROOT, NOTES[1], NOTES[2]))
    local got = trace.decode(out:match('([^\n]+)\n?$'))
    assert.same({ name = 'notes', version = '1.0.0' }, got.server)
    assert.equal('5', got.add)
    assert.same({ day = 'monday', text = 'buy milk' }, got.note)
    assert.equal('Hello, Grace', got.asked)
    assert.is_true(got.bad)
    assert.equal('buy milk', got.today)
    assert.equal('Please review a.lua', got.prompt)
    assert.same({ 'main.lua', 'mcp.lua' }, got.complete)
  end)

  peer_it('the TypeScript SDK client v2, at 2026-07-28 and at 2025-11-25, lists, calls, answers an elicitation and reads #peer', function()
    for _, negotiation in ipairs({ 'auto', 'legacy' }) do
      local out = H.command(string.format('cd %s/spec/peers && V2_NEGOTIATION=%s node v2_client.mjs %s %s', H.ROOT,
        negotiation, NOTES[1], NOTES[2]))
      local got = trace.decode(out:match('([^\n]+)\n?$'))
      assert.same({ version = negotiation == 'auto' and '2026-07-28' or '2025-11-25', add = '5', asked = 'Hello, Grace',
        today = 'buy milk', prompt = 'Please review a.lua', tools = { 'add', 'note', 'ask_name', 'count', 'grow' } }, got)
    end
  end)

  peer_it('the rmcp client (3.11) connects, lists and calls #peer', function()
    local report = H.tmpname()
    local argv = mcp.json_encode(NOTES)
    local out = H.command(string.format("%s/target/peers/release/rmcp-bench-client stdio '%s' add '{\"a\":2,\"b\":3}' 3 %s 2>&1",
      H.ROOT, argv, report))
    local got = trace.decode(H.slurp(report) or 'null')
    os.remove(report)
    assert.is_table(got, out)
    assert.equal(3, #got.calls_us)
  end)

  peer_it('the MCP Inspector\'s CLI (2.12) lists tools and skills and calls #peer', function()
    local function inspect(args)
      local out = H.command(string.format('cd %s/spec/peers && MCP_CATALOG_PATH=%s node_modules/.bin/mcp-inspector --cli %s %s %s 2>/dev/null',
        H.ROOT, H.tmpname(), NOTES[1], NOTES[2], args))
      return trace.decode(out:match('(%b{})')), out
    end
    local listed, out = inspect('--method tools/list')
    assert.is_table(listed, out)
    assert.equal('add', listed.tools[1].name)
    local called = inspect('--method tools/call --tool-name add --tool-arg a=2 --tool-arg b=3')
    assert.equal('5', called.content[1].text)
    local skills = inspect('--method skills/list')
    assert.equal('skill://notes/note-taking/SKILL.md', skills.skills[1].uri)
  end)

  peer_it('the Python SDK client lists, calls and reads #peer', function()
    local out = H.command(string.format('cd /tmp && %s/spec/peers/python/bin/python %s/spec/peers/stdio_client.py %s %s 2>/dev/null',
      H.ROOT, H.ROOT, NOTES[1], NOTES[2]))
    local got = trace.decode(out:match('([^\n]+)\n?$'))
    assert.equal('notes', got.server)
    assert.equal('5', got.add)
    assert.same({ day = 'tuesday', text = 'call Ada' }, got.note)
  end)
end)
