-- stdio_server.lua - a tiny MCP server framework over stdin/stdout, in
-- pure Lua, for the bundled demo server and the specs' fault servers.
--
-- It reads one JSON-RPC message per line, answers `initialize`,
-- `tools/list` and `tools/call` from a table of tools, and lets a server
-- hook any message first (to misbehave on purpose).
local trace = require('trace')

local server = {}

function server.send(msg)
  io.stdout:write(trace.encode(msg), '\n')
  io.stdout:flush()
end

function server.result(id, result)
  server.send({ jsonrpc = '2.0', id = id, result = result })
end

function server.error(id, code, message)
  server.send({ jsonrpc = '2.0', id = id, error = { code = code, message = message } })
end

function server.text(s, is_error)
  return { content = { { type = 'text', text = s } }, isError = is_error or nil }
end

-- The process id, read from /proc: lets a spec prove which process
-- answered, and that it is gone after the client closes.
function server.pid()
  local f = io.open('/proc/self/stat')
  local pid = f and f:read('*n')
  if f then f:close() end
  return pid
end

-- tools: name -> { description =, inputSchema =, run = function(args, id) -> result }
-- opts.name: serverInfo name; opts.hook(msg) -> true to say it was handled.
function server.run(tools, opts)
  opts = opts or {}
  local names = {}
  for name in pairs(tools) do names[#names + 1] = name end
  table.sort(names)
  for line in io.stdin:lines() do
    local msg = trace.decode(line)
    if type(msg) == 'table' and not (opts.hook and opts.hook(msg)) then
      if msg.method == 'initialize' then
        server.result(msg.id, {
          protocolVersion = msg.params and msg.params.protocolVersion or '2025-06-18',
          capabilities = { tools = trace.ordered({}, {}) },
          serverInfo = { name = opts.name or 'lua-server', version = '1.0' },
        })
      elseif msg.method == 'tools/list' then
        local list = {}
        for _, name in ipairs(names) do
          local t = tools[name]
          list[#list + 1] = {
            name = name,
            description = t.description,
            inputSchema = t.inputSchema or { type = 'object', properties = trace.ordered({}, {}) },
          }
        end
        server.result(msg.id, { tools = list })
      elseif msg.method == 'tools/call' then
        local t = tools[msg.params.name]
        if t then
          server.result(msg.id, t.run(msg.params.arguments or {}, msg.id))
        else
          server.error(msg.id, -32602, 'Unknown tool: ' .. tostring(msg.params.name))
        end
      elseif msg.method == 'ping' then
        server.result(msg.id, trace.ordered({}, {}))
      elseif msg.id ~= nil and msg.method then
        server.error(msg.id, -32601, 'Method not found: ' .. msg.method)
      end
    end
  end
  if opts.on_eof then opts.on_eof() end
end

return server
