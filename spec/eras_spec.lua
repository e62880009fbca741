-- Which revision a server speaks, found per server: the era probe
-- (server/discover) before the first request, against our servers of each
-- era and each way an older server meets a request it does not know
-- (spec/servers/eras.lua), the verdicts remembered from one process to the
-- next, and what a modern session sends.
local H = require('helpers')

local mcp = H.native()
local ERAS = H.ROOT .. '/spec/servers/eras.lua'

-- A command line no other spec uses: verdicts are remembered per command
-- line, and each spec here must meet its server for the first time.
local count = 0
local function eras(mode)
  count = count + 1
  return { H.LUA, ERAS, mode, 'run-' .. count .. '-' .. tostring({}):match('0x(%x+)') }
end

local function lines(text)
  local out = {}
  for line in (text .. '\n'):gmatch('([^\n]*)\n') do
    if line ~= '' then out[#out + 1] = line end
  end
  return out
end

local function seen(client)
  return lines((client:call('seen', {})))
end

describe('the era probe', function()
  it('a server answering it -32601 is legacy: the probe, then initialize on id 1 as ever', function()
    local client = mcp.new({ command = eras('errors') })
    assert.is_nil(rawget(client, 'era'))
    client:discover()
    assert.equal('legacy', client.era)
    assert.equal('2025-06-18', client.negotiated_version)
    -- The probe's id is its own: initialize 1, tools/list 2, as the
    -- reference numbers them.
    assert.equal(2, client.next_id)
    assert.same({ 'server/discover 2026-07-28', 'initialize', 'notifications/initialized', 'tools/list', 'tools/call' },
      seen(client))
    client:close()
  end)

  it('a server that ignores it costs a second, once, and is spoken to in the old way', function()
    local client = mcp.new({ command = eras('ignores') })
    local t0 = mcp.clock()
    client:discover()
    local took = mcp.clock() - t0
    assert.equal('legacy', client.era)
    assert.is_true(took >= 0.9 and took < 5, tostring(took))
    client:close()
  end)

  it('a server that exits on it is started again and spoken to in the old way', function()
    local client = mcp.new({ command = eras('exits') })
    client:discover()
    assert.equal('legacy', client.era)
    assert.same({ 'initialize', 'notifications/initialized', 'tools/list', 'tools/call' }, seen(client))
    client:close()
  end)

  it('a server answering every method with {} is legacy, not a modern server with no versions', function()
    local client = mcp.new({ command = eras('empty') })
    client:discover()
    assert.equal('legacy', client.era)
    client:close()
  end)

  it('-32022 naming only an older version is legacy; naming none this client speaks is a clear error', function()
    local old = mcp.new({ command = eras('oldlist') })
    old:discover()
    assert.equal('legacy', old.era)
    old:close()
    local future = mcp.new({ command = eras('future') })
    assert.has_error(function() future:discover() end,
      'MCP: the server speaks protocol versions 2030-01-01; this client speaks 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05')
    future:close()
  end)

  it('a modern server gets no initialize: every request carries the envelope', function()
    local client = mcp.new({ command = eras('modern') })
    local tools = client:discover()
    assert.is_true(#tools > 0)
    assert.equal('modern', client.era)
    assert.equal('2026-07-28', client.negotiated_version)
    assert.same({ name = 'eras-modern', version = '1.0' }, client.server_info)
    assert.equal('speaks modern', client.instructions)
    -- tools/list took id 1: nothing went to initialize
    assert.equal(1, client.next_id)
    -- and, once the tools are listed, the listen for their changes
    assert.same({ 'server/discover 2026-07-28', 'tools/list 2026-07-28', 'subscriptions/listen 2026-07-28',
      'tools/call 2026-07-28' }, seen(client))
    local meta = mcp.json_decode((client:call('meta', {})))
    assert.same({
      ['io.modelcontextprotocol/protocolVersion'] = '2026-07-28',
      ['io.modelcontextprotocol/clientCapabilities'] = {},
      ['io.modelcontextprotocol/clientInfo'] = { name = 'lua-agent', version = '0.1' },
    }, meta)
    client:close()
  end)

  it('a modern server that starts slower than the probe waits is found when it refuses initialize', function()
    local client = mcp.new({ command = eras('slow'), env = { ERAS_DELAY_MS = '1500' } })
    client:discover()
    assert.equal('modern', client.era)
    assert.same({ 'server/discover 2026-07-28', 'initialize', 'server/discover 2026-07-28', 'tools/list 2026-07-28',
      'subscriptions/listen 2026-07-28', 'tools/call 2026-07-28' }, seen(client))
    client:close()
  end)

  it('opts.era = "legacy" sends no probe; "modern" refuses a legacy server, saying why', function()
    local legacy = mcp.new({ command = eras('both'), era = 'legacy' })
    legacy:discover()
    assert.equal('legacy', legacy.era)
    assert.equal('initialize', seen(legacy)[1])
    legacy:close()
    local modern = mcp.new({ command = eras('errors'), era = 'modern' })
    assert.has_error(function() modern:discover() end,
      'MCP: the server does not speak the 2026-07-28 revision (opts.era = "modern"): it answered MCP server/discover'
      .. ' failed: Method not found: server/discover (code -32601); leave opts.era unset to speak to it through initialize')
    modern:close()
    assert.has_error(function() mcp.new({ command = eras('errors'), era = 'new' }) end,
      'mcp.new: opts.era must be "auto", "legacy" or "modern"')
  end)
end)

-- Runs `source` in a Lua process of its own with its own cache
-- directory: what the module remembers in the process and in the file.
local function run(cache, source)
  local path = H.tmpname() .. '.lua'
  local f = assert(io.open(path, 'w'))
  f:write('package.cpath = ' .. string.format('%q', H.ROOT .. '/?.so;') .. ' .. package.cpath\n')
  f:write(source)
  f:close()
  local out = H.command('cd ' .. H.ROOT .. ' && XDG_CACHE_HOME=' .. cache .. ' timeout 60 ' .. H.LUA .. ' ' .. path)
  os.remove(path)
  return out
end

describe('remembered eras', function()

  it('a legacy verdict skips the probe in the next client and the next process; the file is its owner\'s', function()
    local cache = H.tmpname()
    local source = string.format([[
      local mcp = require('mcp')
      for i = 1, 2 do
        local c = mcp.new({ command = { %q, %q, 'ignores' } })
        local t0 = mcp.clock()
        c:discover()
        print(string.format('%%s %%.1f %%s', c.era, mcp.clock() - t0, (c:call('seen', {}):gsub('\n', ','))))
        c:close()
      end
    ]], H.LUA, ERAS)
    local first = lines(run(cache, source))
    assert.is_truthy(first[1]:match('^legacy 1%.%d server/discover 2026%-07%-28,initialize,'), first[1])
    assert.is_truthy(first[2]:match('^legacy 0%.%d initialize,'), first[2])
    local again = lines(run(cache, source))
    assert.is_truthy(again[1]:match('^legacy 0%.%d initialize,'), again[1])
    local file = cache .. '/lua-mcp/eras.json'
    assert.equal('-rw-------', H.command('stat -c %A ' .. file):match('%S+'))
    assert.equal('drwx------', H.command('stat -c %A ' .. cache .. '/lua-mcp'):match('%S+'))
    local remembered = mcp.json_decode(H.slurp(file))
    assert.equal('legacy', remembered[1][2])
    -- named by a hash: a command line may hold a secret
    assert.is_truthy(remembered[1][1]:match('^%x+$') and #remembered[1][1] == 64, remembered[1][1])
    os.execute('rm -rf ' .. cache)
  end)

  it('a server remembered as legacy that now refuses initialize the modern way is probed again', function()
    local cache = H.tmpname()
    -- One command line, two servers: the mode is read from a file, so the
    -- same name is first a legacy server, then a modern one.
    local mode = H.tmpname()
    local source = string.format([[
      local mcp = require('mcp')
      local c = mcp.new({ command = 'exec %s %s "$(cat %s)"' })
      c:discover()
      print(c.era, (c:call('seen', {}):gsub('\n', ',')))
      c:close()
    ]], H.LUA, ERAS, mode)
    local function serve(m)
      local f = assert(io.open(mode, 'w'))
      f:write(m)
      f:close()
    end
    serve('errors')
    assert.equal('legacy', run(cache, source):match('^(%S+)'))
    assert.equal('legacy', mcp.json_decode(H.slurp(cache .. '/lua-mcp/eras.json'))[1][2])
    serve('modern')
    assert.equal('modern\tinitialize,server/discover 2026-07-28,tools/list 2026-07-28,subscriptions/listen 2026-07-28,'
      .. 'tools/call 2026-07-28\n', run(cache, source))
    assert.equal('2026-07-28', mcp.json_decode(H.slurp(cache .. '/lua-mcp/eras.json'))[1][2])
    os.remove(mode)
    os.execute('rm -rf ' .. cache)
  end)

  it('a server that speaks both and starts slower than the probe waits is probed again by the next process', function()
    local cache = H.tmpname()
    local source = string.format([[
      local mcp = require('mcp')
      local c = mcp.new({ command = { %q, %q, 'slowboth' }, env = { ERAS_DELAY_MS = '1300' } })
      c:discover()
      print(c.era)
      c:close()
    ]], H.LUA, ERAS)
    assert.equal('legacy\n', run(cache, source))
    assert.equal('modern\n', run(cache, source))
    os.execute('rm -rf ' .. cache)
  end)
end)

describe('the era cache file is trusted as the token store is', function()

  -- The first method the server saw: server/discover when the client
  -- probed, initialize when a remembered verdict spared the probe.
  local first_seen = string.format([[
    local mcp = require('mcp')
    local c = mcp.new({ command = { %q, %q, 'errors' } })
    c:discover()
    print((c:call('seen', {}):match('^(%%S+)')))
    c:close()
  ]], H.LUA, ERAS)

  it('an eras.json others can write is not believed, and the next verdict replaces it as its owner\'s alone', function()
    local cache = H.tmpname()
    local file = cache .. '/lua-mcp/eras.json'
    assert.equal('server/discover\n', run(cache, first_seen))
    assert.equal('initialize\n', run(cache, first_seen))
    os.execute('chmod 666 ' .. file)
    assert.equal('server/discover\n', run(cache, first_seen))
    assert.equal('-rw-------', H.command('stat -c %A ' .. file):match('%S+'))
    assert.equal('initialize\n', run(cache, first_seen))
    os.execute('rm -rf ' .. cache)
  end)

  it('a 1 GiB eras.json is taken for corrupt, not read whole', function()
    local cache = H.tmpname()
    local file = cache .. '/lua-mcp/eras.json'
    os.execute('mkdir -p -m 700 ' .. cache .. '/lua-mcp && truncate -s 1G ' .. file .. ' && chmod 600 ' .. file)
    local out = run(cache, first_seen .. [[
      for line in io.lines('/proc/self/status') do
        local kb = line:match('^VmHWM:%s+(%d+)')
        if kb then print(math.floor(tonumber(kb) / 1024)) end
      end
    ]])
    local seen, peak_mb = out:match('^(%S+)\n(%d+)\n$')
    assert.equal('server/discover', seen, out)
    -- 1 GB when it was read whole
    assert.is_true(tonumber(peak_mb) < 100, out)
    os.execute('rm -rf ' .. cache)
  end)

  it('48 processes recording verdicts at once keep all 48', function()
    local cache = H.tmpname()
    local script = H.tmpname() .. '.lua'
    local f = assert(io.open(script, 'w'))
    f:write('package.cpath = ' .. string.format('%q', H.ROOT .. '/?.so;') .. ' .. package.cpath\n')
    f:write(string.format([[
      local mcp = require('mcp')
      -- a server of its own name each: the extra argument is only a name
      local c = mcp.new({ command = { %q, %q, 'errors', arg[1] } })
      c:discover()
      c:close()
    ]], H.LUA, ERAS))
    f:close()
    H.command('cd ' .. H.ROOT .. ' && for i in $(seq 1 48); do XDG_CACHE_HOME=' .. cache .. ' timeout 60 '
      .. H.LUA .. ' ' .. script .. ' $i & done; wait')
    os.remove(script)
    local remembered = mcp.json_decode(H.slurp(cache .. '/lua-mcp/eras.json'))
    assert.equal(48, #remembered)
    os.execute('rm -rf ' .. cache)
  end)
end)

describe('a modern session', function()
  it('ping asks server/discover, and set_log_level goes in the envelope of every later request', function()
    local client = mcp.new({ command = eras('modern') })
    assert.is_true(client:ping())
    assert.same({}, client:set_log_level('debug'))
    local meta = mcp.json_decode((client:call('meta', {})))
    assert.equal('debug', meta['io.modelcontextprotocol/logLevel'])
    assert.same({ 'server/discover 2026-07-28', 'server/discover 2026-07-28', 'tools/call 2026-07-28',
      'tools/call 2026-07-28' }, seen(client))
    client:close()
  end)

  it('an input round is answered by the handler, and the request goes again with the answers and state', function()
    local asked
    local client = mcp.new({ command = eras('modern'), handlers = {
      ['elicitation/create'] = function(params)
        asked = params.message
        return { action = 'accept', content = { ok = true } }
      end,
    } })
    assert.equal('answered {"q":{"action":"accept","content":{"ok":true}}} state s1', (client:call('ask', {})))
    assert.equal('Go on?', asked)
    local meta = mcp.json_decode((client:call('meta', {})))
    assert.same({ elicitation = {} }, meta['io.modelcontextprotocol/clientCapabilities'])
    client:close()
  end)

  it('input no handler can give fails the call, naming the handler to set', function()
    local client = mcp.new({ command = eras('modern') })
    assert.has_error(function() client:call('ask', {}) end,
      'MCP tools/call ask failed: the server asked for elicitation/create and it could not be given: there is no'
      .. ' handler for it (set opts.handlers["elicitation/create"])')
    client:close()
  end)

  it('a round with only state waits a moment, then goes with the state alone', function()
    local client = mcp.new({ command = eras('modern') })
    local t0 = mcp.clock()
    assert.equal('after state', (client:call('shed', {})))
    assert.is_true(mcp.clock() - t0 >= 0.2)
    local handle = client:call_async('shed', {})
    assert.equal('after state', (handle:wait(5)))
    client:close()
  end)

  it('a server asking for input for ever is given up on after 10 rounds', function()
    local client = mcp.new({ command = eras('modern'), handlers = { ['roots/list'] = function() return { roots = {} } end } })
    assert.has_error(function() client:call('endless', {}) end,
      'MCP tools/call endless failed: the server asked for input 10 times without finishing (this client answers 10'
      .. ' rounds at most)')
    client:close()
  end)

  it('a host that asks its user itself takes the input request and goes on with the answers', function()
    local client = mcp.new({ command = eras('modern') })
    local _, _, result = client:call('ask', {}, { input_required = 'return' })
    assert.equal('input_required', result.resultType)
    assert.equal('elicitation/create', result.inputRequests.q.method)
    local text = client:call('ask', {}, { input_responses = { q = { action = 'decline' } },
                                          request_state = result.requestState })
    assert.equal('answered {"q":{"action":"decline"}} state s1', text)
    client:close()
  end)

  it('a result of an unknown resultType is refused, as the revision asks', function()
    local client = mcp.new({ command = eras('modern') })
    assert.has_error(function() client:call('weird', {}) end,
      'MCP tools/call weird failed: the result\'s resultType is bogus, which this client does not know (it knows'
      .. ' complete and input_required, and task on tools/call)')
    client:close()
  end)

  it('client:request can return a JSON-RPC error whole, its data included', function()
    local client = mcp.new({ command = eras('future'), era = 'legacy' })
    local result, err = client:request('server/discover', {}, { rpc_error = 'return' })
    assert.is_nil(result)
    assert.same({ code = -32022, message = 'Unsupported protocol version',
                  data = { supported = { '2030-01-01' } } }, err)
    assert.has_error(function() client:request('server/discover', {}) end,
      'MCP server/discover failed: Unsupported protocol version (code -32022); the server supports protocol versions'
      .. ' 2030-01-01')
    client:close()
  end)
end)

describe('change notifications from a modern server', function()
  it('one listen, on ids of its own, asks for what the client needs; a changed tool list is listed again', function()
    local changed = {}
    local client = mcp.new({ command = eras('modern'), on_list_changed = function(kind) changed[#changed + 1] = kind end })
    client:discover()
    local before = client.next_id
    assert.equal('grown', (client:call('grow', {})))
    assert.equal('"lua-mcp-listen-1" {"resourcesListChanged":true,"toolsListChanged":true}',
      (client:call('listens', {})))
    assert.same({ 'tools' }, changed)
    -- listed again before this call, as on an older server
    assert.equal('extra', (client:call('extra', {})))
    assert.equal('extra', client.tools[1].name)
    -- grow, listens, the tools/list, extra: the listen took no id
    assert.equal(before + 4, client.next_id)
    client:close()
  end)

  it('subscribe joins the listen, updates reach on_resource_updated, and a listen the server ends is sent again', function()
    local updated = {}
    local client = mcp.new({ command = eras('modern'), on_resource_updated = function(uri) updated[#updated + 1] = uri end })
    client:discover()
    assert.same({}, client:subscribe('memo://a'))
    client:call('touch', { uri = 'memo://a' })
    client:call('touch', { uri = 'memo://b' })
    client:call('hangup', {})
    -- The listen's end comes right behind hangup's reply: the next request
    -- or the one after notices it and listens again.
    local deadline = mcp.clock() + 10
    repeat client:ping() until #lines((client:call('listens', {}))) == 3 or mcp.clock() > deadline
    client:call('touch', { uri = 'memo://a' })
    client:ping()
    assert.same({ 'memo://a', 'memo://a' }, updated)
    assert.equal(table.concat({
      '"lua-mcp-listen-1" {"toolsListChanged":true}',
      '"lua-mcp-listen-2" {"resourceSubscriptions":["memo://a"],"toolsListChanged":true}',
      '"lua-mcp-listen-3" {"resourceSubscriptions":["memo://a"],"toolsListChanged":true}',
    }, '\n'), (client:call('listens', {})))
    client:close()
  end)

  it('a watched mount follows a modern server through the listen', function()
    local client = mcp.new({ command = eras('modern') })
    client:discover()
    local registry = H.registry()
    mcp.mount(registry, client, { watch = true })
    assert.is_nil(registry:get('extra'))
    client:call('grow', {})
    client:ping()
    -- the next call lists the tools again first, and the registry follows
    assert.equal('extra', (client:call('extra', {})))
    assert.is_truthy(registry:get('extra'))
    client:close()
  end)

  it('a filter the server acknowledges only in part is named in a warning through on_log', function()
    local logged = {}
    -- eras.lua offers prompt list changes (ERAS_PROMPTS) and never grants them
    local client = mcp.new({ command = eras('modern'), env = { ERAS_PROMPTS = '1' },
      on_list_changed = function() end,
      on_log = function(params) logged[#logged + 1] = params end })
    client:discover()
    client:ping()
    assert.same({ { level = 'warning', logger = 'lua-mcp',
      data = 'the server does not send promptsListChanged (subscriptions/listen acknowledged without it)' } }, logged)
    client:close()
  end)
end)

describe('results a modern server allows to be kept', function()
  it('a fresh tool list and read answer without a request; a change notification evicts them', function()
    local client = mcp.new({ command = eras('modern'), env = { ERAS_TTL_MS = '60000' } })
    client:discover()
    client:discover()
    assert.equal('read 1 of memo://1', client:read_resource('memo://1')[1].text)
    assert.equal('read 1 of memo://1', client:read_resource('memo://1')[1].text)
    assert.equal('read 2 of memo://2', client:read_resource('memo://2')[1].text)
    client:subscribe('memo://1')
    client:call('touch', { uri = 'memo://1' })
    client:ping()
    assert.equal('read 3 of memo://1', client:read_resource('memo://1')[1].text)
    client:call('grow', {})
    client:ping()
    assert.equal('extra', client:discover()[1].name)
    local methods = {}
    for _, line in ipairs(seen(client)) do
      local method = line:match('^(%S+)')
      if method:match('^resources/') or method:match('^tools/list') then
        methods[#methods + 1] = method
      end
    end
    assert.same({ 'tools/list', 'resources/read', 'resources/read', 'resources/read', 'tools/list' }, methods)
    client:close()
  end)

  it('the cache keeps max_entries at most, letting go first of what goes stale soonest', function()
    local client = mcp.new({ command = eras('modern'), env = { ERAS_TTL_MS = '60000' }, cache = { max_entries = 2 } })
    assert.equal('read 1 of memo://1', client:read_resource('memo://1')[1].text)
    assert.equal('read 2 of memo://2', client:read_resource('memo://2')[1].text)
    assert.equal('read 2 of memo://2', client:read_resource('memo://2')[1].text)
    assert.equal('read 3 of memo://3', client:read_resource('memo://3')[1].text)
    -- memo://1 went stale first, so it made room
    assert.equal('read 4 of memo://1', client:read_resource('memo://1')[1].text)
    assert.equal('read 3 of memo://3', client:read_resource('memo://3')[1].text)
    client:close()
    assert.has_error(function() mcp.new({ command = eras('modern'), cache = { max_bytes = -1 } }) end,
      'mcp.new: opts.cache.max_bytes must be a whole number from 0 to 2^40')
    assert.has_error(function() mcp.new({ command = eras('modern'), cache = 'yes' }) end,
      'mcp.new: opts.cache must be a boolean or a table of max_entries and max_bytes')
  end)

  it('1,000 distinct 64 KiB reads kept for a day leave the host within the cache bound #slow', function()
    local out = H.run_lua(string.format([[
      local mcp = require('mcp')
      local function rss()
        collectgarbage(); collectgarbage()
        for line in io.lines('/proc/self/status') do
          local kb = line:match('^VmRSS:%%s+(%%d+)')
          if kb then return tonumber(kb) / 1024 end
        end
      end
      local client = mcp.new({ command = { %q, %q, 'modern' }, env = { ERAS_TTL_MS = '86400000', ERAS_READ_PAD = '65536' } })
      client:read_resource('memo://0')
      local before = rss()
      for i = 1, 1000 do client:read_resource('memo://' .. i) end
      print(math.floor(rss() - before))
      client:close()
    ]], H.LUA, ERAS))
    local grown = tonumber(out:match('^(%d+)\n'))
    -- 64 MB and more when nothing bounded it; the default bound is 8 MiB
    assert.is_truthy(grown, out)
    assert.is_true(grown < 30, 'grew by ' .. out)
  end)

  it('ping goes to the server whatever the server allows to be kept: it is a liveness check', function()
    local client = mcp.new({ command = eras('modern'), env = { ERAS_TTL_MS = '60000' } })
    client:ping()
    client:ping()
    local discovers = 0
    for _, line in ipairs(seen(client)) do
      if line:match('^server/discover') then discovers = discovers + 1 end
    end
    -- the probe, then both pings
    assert.equal(3, discovers)
    client:close()
  end)

  it('opts.cache "refresh" and "bypass" go to the server; opts.cache = false keeps nothing', function()
    local client = mcp.new({ command = eras('modern'), env = { ERAS_TTL_MS = '60000' } })
    assert.equal('read 1 of memo://1', client:read_resource('memo://1')[1].text)
    assert.equal('read 2 of memo://1', client:read_resource('memo://1', { cache = 'refresh' })[1].text)
    assert.equal('read 2 of memo://1', client:read_resource('memo://1')[1].text)
    assert.equal('read 3 of memo://1', client:read_resource('memo://1', { cache = 'bypass' })[1].text)
    assert.equal('read 2 of memo://1', client:read_resource('memo://1')[1].text)
    assert.has_error(function() client:read_resource('memo://1', { cache = 'always' }) end,
      'client:request: opts.cache must be "refresh" or "bypass"')
    client:close()
    local off = mcp.new({ command = eras('modern'), env = { ERAS_TTL_MS = '60000' }, cache = false })
    assert.equal('read 1 of memo://1', off:read_resource('memo://1')[1].text)
    assert.equal('read 2 of memo://1', off:read_resource('memo://1')[1].text)
    off:close()
  end)

  it('a result with no time, or time zero, is never kept', function()
    local client = mcp.new({ command = eras('modern'), env = { ERAS_TTL_MS = '0' } })
    assert.equal('read 1 of memo://1', client:read_resource('memo://1')[1].text)
    assert.equal('read 2 of memo://1', client:read_resource('memo://1')[1].text)
    client:close()
  end)

  it('a private result answers only the credentials it was fetched with; a public one answers any', function()
    local function reads(scope)
      local n, tokens = 0, { 'one', 'one', 'two' }
      local client = mcp.new({ command = eras('modern'), env = { ERAS_TTL_MS = '60000', ERAS_SCOPE = scope },
        auth = { token = function()
          n = n + 1
          return tokens[n]
        end } })
      local out = {}
      for i = 1, 3 do out[i] = client:read_resource('memo://1')[1].text end
      client:close()
      return out
    end
    -- A token function is asked once per call: the third read is made
    -- with another token.
    assert.same({ 'read 1 of memo://1', 'read 1 of memo://1', 'read 2 of memo://1' }, reads('private'))
    assert.same({ 'read 1 of memo://1', 'read 1 of memo://1', 'read 1 of memo://1' }, reads('public'))
  end)
end)
