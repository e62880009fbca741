-- sleepy.lua - a bundled MCP server over stdio that works on many requests
-- at once (it runs on luv's event loop), for the async examples and specs.
--
--   lua5.4 lua/servers/sleepy.lua   (needs luv: Debian's lua-luv)
--
-- Tools:
--   sleep {ms, label}  answers after ms milliseconds, with label, whatever
--                      else is running: ten 300 ms sleeps end in ~300 ms
--                      if the client really has them in flight together.
--   chatty {n}         sends n log notifications, then answers.
--   crash              exits with status 3, saying so on stderr.
-- A `notifications/cancelled` stops its sleeper, which then never answers;
-- with $CANCEL_LOG set, each is written there ("cancelled ID REASON"), so
-- that a caller can see the server heard it.
local dir = arg[0]:match('^(.*)[/\\][^/\\]*$') or '.'
package.path = dir .. '/?.lua;' .. dir .. '/../?.lua;' .. package.path
local uv = require('luv')
local server = require('stdio_server')
local trace = require('trace')

local stdout = uv.new_pipe(false)
stdout:open(1)
local function send(msg)
  stdout:write(trace.encode(msg) .. '\n')
end

local sleepers = {}

local function note_cancel(id, reason)
  local path = os.getenv('CANCEL_LOG')
  if not path then return end
  local f = io.open(path, 'a')
  f:write('cancelled ', trace.encode(id), ' ', reason or '', '\n')
  f:close()
end

local tools = {
  { name = 'sleep', description = 'Answer after ms milliseconds with label.',
    inputSchema = { type = 'object', properties = { ms = { type = 'number' }, label = { type = 'string' } } } },
  { name = 'chatty', description = 'Send n log notifications, then answer.',
    inputSchema = { type = 'object', properties = { n = { type = 'integer' } } } },
  { name = 'crash', description = 'Exit with status 3.', inputSchema = { type = 'object' } },
}

local function call(id, name, args)
  if name == 'sleep' then
    local timer = uv.new_timer()
    local key = trace.encode(id)
    sleepers[key] = timer
    timer:start(math.floor(tonumber(args.ms) or 0), 0, function()
      timer:close()
      sleepers[key] = nil
      send({ jsonrpc = '2.0', id = id, result = server.text(args.label or ('slept ' .. tostring(args.ms))) })
    end)
  elseif name == 'chatty' then
    for i = 1, math.floor(tonumber(args.n) or 1) do
      send({ jsonrpc = '2.0', method = 'notifications/message', params = { level = 'info', data = 'line ' .. i } })
    end
    send({ jsonrpc = '2.0', id = id, result = server.text('chatted') })
  elseif name == 'crash' then
    io.stderr:write('crashing on purpose\n')
    os.exit(3)
  else
    send({ jsonrpc = '2.0', id = id, error = { code = -32602, message = 'Unknown tool: ' .. tostring(name) } })
  end
end

local function handle(msg)
  local id, method, params = msg.id, msg.method, msg.params or {}
  if method == 'initialize' then
    send({ jsonrpc = '2.0', id = id, result = { protocolVersion = params.protocolVersion,
      capabilities = { tools = {} }, serverInfo = { name = 'sleepy', version = '1' } } })
  elseif method == 'tools/list' then
    send({ jsonrpc = '2.0', id = id, result = { tools = tools } })
  elseif method == 'tools/call' then
    call(id, params.name, params.arguments or {})
  elseif method == 'ping' then
    send({ jsonrpc = '2.0', id = id, result = {} })
  elseif method == 'notifications/cancelled' then
    local key = trace.encode(params.requestId)
    local timer = sleepers[key]
    if timer then
      timer:stop()
      timer:close()
      sleepers[key] = nil
      note_cancel(params.requestId, params.reason)
    end
  elseif id ~= nil and method then
    send({ jsonrpc = '2.0', id = id, error = { code = -32601, message = 'Method not found' } })
  end
end

local stdin = uv.new_pipe(false)
stdin:open(0)
local pending = ''
stdin:read_start(function(err, chunk)
  if err or not chunk then
    uv.stop()
    return
  end
  pending = pending .. chunk
  while true do
    local line, rest = pending:match('^([^\n]*)\n(.*)$')
    if not line then break end
    pending = rest
    local ok, msg = pcall(trace.decode, line)
    if ok and type(msg) == 'table' then handle(msg) end
  end
end)
uv.run()
