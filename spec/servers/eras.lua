-- eras.lua MODE - stdio servers of each protocol era, and the ways older
-- servers meet a request they do not know before `initialize` (the era
-- probe, `server/discover`):
--
--   errors     a legacy server answering it -32601, as most SDKs do
--   ignores    a legacy server that says nothing to it
--   exits      a legacy server that exits on it (status 1)
--   empty      a legacy server that answers every method with {}
--   modern     2026-07-28 only: answers server/discover, refuses
--              initialize with -32022 naming what it speaks
--   both       answers server/discover and initialize alike
--   oldlist    refuses the probe with -32022 naming only 2025-11-25
--   future     refuses the probe with -32022 naming only 2030-01-01
--   slow       modern, but reads nothing for ERAS_DELAY_MS first (a
--              cold start)
--   slowboth   as both, with slow's cold start
--
-- Tools: `echo` {text}; `seen` (the methods received so far, one per
-- line, with each request's envelope version after a space when it had
-- one); `meta` (the _meta of this call, as JSON). In the modern modes,
-- the rounds of input (input_required) a modern server may ask for:
--   ask      asks one elicitation (key "q") with the state "s1", then
--            returns what came back and the state it was given
--   shed     asks nothing, only sends a state ("later"), and finishes
--            when that state comes back (a server shedding load)
--   endless  asks for input on every round, for ever
--   weird    returns a result of a resultType nobody knows
-- and change notifications, which go only to a subscriptions/listen the
-- client keeps open (acknowledged with what was asked, less prompt list
-- changes, which this server never sends, though it offers them when
-- $ERAS_PROMPTS is set):
--   grow     adds the tool `extra`, and tells the listen the list changed
--   touch    {uri}: tells the listen that resource changed, if it asked
--   hangup   ends the listen (its result), as a server going away does
--   listens  the listens received so far, one line each: id and filter
-- Its tool list and resource reads say they may be kept $ERAS_TTL_MS
-- milliseconds (none: not at all), in the scope $ERAS_SCOPE (else
-- "private"); each read of memo://N says how many reads came before,
-- followed by $ERAS_READ_PAD dots.
local dir = arg[0]:match('(.*)/') or '.'
package.path = dir .. '/../../lua/?.lua;' .. dir .. '/../../lua/servers/?.lua;' .. package.path
local server = require('stdio_server')
local trace = require('trace')

local mode = arg[1] or 'errors'
local seen = {}
local VERSION_KEY = 'io.modelcontextprotocol/protocolVersion'

local function envelope_version(msg)
  local meta = type(msg.params) == 'table' and msg.params._meta
  return type(meta) == 'table' and meta[VERSION_KEY] or nil
end

if mode == 'slow' or mode == 'slowboth' then
  -- A cold start: nothing is read until the interpreter is "ready".
  os.execute('sleep ' .. tonumber(os.getenv('ERAS_DELAY_MS') or '1500') / 1000)
end

local speaks_modern = mode == 'modern' or mode == 'both' or mode == 'slow' or mode == 'slowboth'
local only_modern = mode == 'modern' or mode == 'slow'

local function refuse_version(msg, supported)
  server.send({ jsonrpc = '2.0', id = msg.id, error = {
    code = -32022, message = 'Unsupported protocol version',
    data = { supported = supported, requested = envelope_version(msg) or (msg.params or {}).protocolVersion },
  } })
end

local function discover(msg)
  server.result(msg.id, {
    resultType = 'complete',
    supportedVersions = { '2026-07-28' },
    capabilities = { tools = { listChanged = true }, resources = { subscribe = true, listChanged = true },
      prompts = os.getenv('ERAS_PROMPTS') and { listChanged = true } or nil },
    instructions = 'speaks ' .. mode,
    _meta = { ['io.modelcontextprotocol/serverInfo'] = { name = 'eras-' .. mode, version = '1.0' } },
    ttlMs = tonumber(os.getenv('ERAS_TTL_MS')) or 0,
    cacheScope = 'public',
  })
end

-- What each mode does with the probe, before any initialize.
local on_probe = {
  ignores = function() end,
  exits = function()
    io.stderr:write('eras: unknown request before initialize\n')
    os.exit(1)
  end,
  empty = function(msg) server.result(msg.id, trace.ordered({}, {})) end,
  oldlist = function(msg) refuse_version(msg, { '2025-11-25' }) end,
  future = function(msg) refuse_version(msg, { '2030-01-01' }) end,
}

-- The open listen: its id, and what it asked for.
local listen, listens = nil, {}
local grown = false
local reads = 0

local function cacheable(result)
  result.resultType = 'complete'
  result.ttlMs = tonumber(os.getenv('ERAS_TTL_MS'))
  result.cacheScope = os.getenv('ERAS_SCOPE') or 'private'
  return result
end

local function to_listen(method, params)
  params = params or {}
  params._meta = { ['io.modelcontextprotocol/subscriptionId'] = listen.id }
  server.send({ jsonrpc = '2.0', method = method, params = params })
end

local function listen_hook(msg)
  if msg.method == 'subscriptions/listen' then
    local asked = (msg.params or {}).notifications or {}
    listen = { id = msg.id, asked = asked }
    listens[#listens + 1] = trace.encode(msg.id) .. ' ' .. trace.encode(asked)
    local granted = {}
    for k, v in pairs(asked) do
      if k ~= 'promptsListChanged' then granted[k] = v end
    end
    to_listen('notifications/subscriptions/acknowledged', { notifications = granted })
    return true
  end
  if msg.method == 'notifications/cancelled' and listen and msg.params and msg.params.requestId == listen.id then
    listen = nil
    return true
  end
  if msg.method == 'tools/list' then
    local object = { type = 'object' }
    local tools = { { name = 'echo', inputSchema = object }, { name = 'meta', inputSchema = object },
      { name = 'seen', inputSchema = object } }
    if grown then tools = { { name = 'extra', inputSchema = object }, { name = 'seen', inputSchema = object } } end
    server.result(msg.id, cacheable({ tools = tools }))
    return true
  end
  if msg.method == 'resources/read' then
    reads = reads + 1
    local uri = msg.params.uri
    local pad = string.rep('.', tonumber(os.getenv('ERAS_READ_PAD')) or 0)
    server.result(msg.id, cacheable({ contents = { { uri = uri, text = 'read ' .. reads .. ' of ' .. uri .. pad } } }))
    return true
  end
  local name = msg.method == 'tools/call' and msg.params and msg.params.name
  local args = name and msg.params.arguments or {}
  if name == 'grow' then
    grown = true
    server.result(msg.id, server.text('grown'))
    if listen and listen.asked.toolsListChanged then to_listen('notifications/tools/list_changed') end
    return true
  elseif name == 'touch' then
    server.result(msg.id, server.text('touched'))
    local subscribed = listen and listen.asked.resourceSubscriptions or {}
    for _, uri in ipairs(subscribed) do
      if uri == args.uri then to_listen('notifications/resources/updated', { uri = uri }) end
    end
    return true
  elseif name == 'hangup' then
    server.result(msg.id, server.text('hung up'))
    if listen then
      server.result(listen.id, { resultType = 'complete',
        _meta = { ['io.modelcontextprotocol/subscriptionId'] = listen.id } })
      listen = nil
    end
    return true
  elseif name == 'listens' then
    server.result(msg.id, server.text(table.concat(listens, '\n')))
    return true
  elseif name == 'extra' then
    server.result(msg.id, server.text('extra'))
    return true
  end
  return false
end

local function hook(msg)
  if msg.method then
    seen[#seen + 1] = msg.method .. (envelope_version(msg) and (' ' .. envelope_version(msg)) or '')
  end
  if msg.method == 'initialize' and only_modern then
    refuse_version(msg, { '2026-07-28' })
    return true
  end
  if msg.method == 'server/discover' then
    if speaks_modern then
      discover(msg)
      return true
    end
    local handle = on_probe[mode]
    if handle then handle(msg) end
    return handle ~= nil
  end
  if only_modern and msg.id ~= nil and msg.method and not envelope_version(msg) then
    server.error(msg.id, -32602, 'Invalid params: missing _meta keys: ' .. VERSION_KEY)
    return true
  end
  if msg.method == 'tools/call' and msg.params and msg.params.name == 'meta' then
    server.result(msg.id, server.text(trace.encode(msg.params._meta or {})))
    return true
  end
  if speaks_modern and listen_hook(msg) then return true end
  if speaks_modern and msg.method == 'tools/call' and msg.params then
    local rounds = {
      ask = function(p)
        if p.inputResponses then
          return server.text('answered ' .. trace.encode(p.inputResponses) .. ' state ' .. tostring(p.requestState))
        end
        return { resultType = 'input_required', requestState = 's1', inputRequests = { q = {
          method = 'elicitation/create',
          params = { mode = 'form', message = 'Go on?', requestedSchema = { type = 'object',
            properties = { ok = { type = 'boolean' } } } },
        } } }
      end,
      shed = function(p)
        if p.requestState == 'later' and p.inputResponses == nil then return server.text('after state') end
        return { resultType = 'input_required', requestState = 'later' }
      end,
      endless = function()
        return { resultType = 'input_required', inputRequests = { again = { method = 'roots/list' } } }
      end,
      weird = function() return { resultType = 'bogus', content = {} } end,
    }
    local round = rounds[msg.params.name]
    if round then
      server.result(msg.id, round(msg.params))
      return true
    end
  end
  return false
end

server.run({
  echo = { run = function(args) return server.text(tostring(args.text)) end },
  seen = { run = function() return server.text(table.concat(seen, '\n')) end },
  meta = { run = function() return server.text('{}') end },
}, { name = 'eras-' .. mode, hook = hook })
