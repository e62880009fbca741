-- demo.lua - what the native module does for an agent, in ten seconds.
--
--   lua5.4 lua/examples/demo.lua                 against the bundled counter server
--   lua5.4 lua/examples/demo.lua --mcp "CMD"     against any stdio MCP server
--
-- It does what an agent does at start-up: discover a server's tools, mount
-- them into its tool registry, and call them. Against the bundled counter
-- it then shows the point of a long-lived session: the count climbs from
-- call to call, where the pure-Lua module (which re-spawns the server for
-- every request) starts from zero each time.
local root = (arg and arg[0] or ''):match('^(.*)/lua/examples/[^/]*$') or '.'
package.cpath = root .. '/?.so;' .. package.cpath
package.path = root .. '/lua/?.lua;' .. package.path

-- The native module, found on cpath; lua/mcp.lua is the pure reference.
local open_mcp = package.loadlib(root .. '/mcp.so', 'luaopen_mcp')
assert(open_mcp, 'mcp.so not found: build it first with `make build`')
---@type mcp
local mcp = open_mcp()

local command = (arg and arg[-1] or 'lua5.4') .. ' ' .. root .. '/lua/servers/counter.lua'
local custom = false
for i = 1, #arg do
  if arg[i] == '--mcp' and arg[i + 1] then command, custom = arg[i + 1], true end
end

-- A registry with the interface mcp.mount expects: get(name), add(tool).
local registry = { tools = {}, order = {} }
function registry:get(name) return self.tools[name] end
function registry:add(t) self.tools[t.name] = t; self.order[#self.order + 1] = t.name end

local function ms(seconds) return string.format('%7.2f ms', seconds * 1000) end
local function timed(f, ...)
  local t0 = mcp.clock()
  local function pack(...) return { n = select('#', ...), ... } end
  local results = pack(pcall(f, ...))
  return mcp.clock() - t0, (table.unpack or unpack)(results, 1, results.n)
end

print('server: ' .. command)
local client = mcp.new({ command = command, prefix = 'mcp_' })

local took, ok, names = timed(mcp.mount, registry, client)
if not ok then
  print('could not start the server: ' .. tostring(names))
  os.exit(1)
end
print(string.format('%s  spawned, handshook, discovered and mounted %d tools (server %s %s)',
  ms(took), #names, tostring(client.server_info and client.server_info.name),
  tostring(client.server_info and client.server_info.version)))
for _, name in ipairs(names) do
  local t = registry:get(name)
  local args = {}
  for _, a in ipairs(t.args) do args[#args + 1] = a.name .. ':' .. a.type .. (a.required and '' or '?') end
  print(string.format('             %-22s %s  (%s)', name, t.description, table.concat(args, ', ')))
end

local function run(name, args)
  local t = registry:get(name)
  local took2, ok2, text = timed(t.run, args)
  print(string.format('%s  %s(%s) -> %s%s', ms(took2), name, args and next(args) and 'by=' .. tostring(args.by) or '',
    ok2 and '' or 'error: ', tostring(text):gsub('\n', ' '):sub(1, 70)))
end

if custom then
  -- Any server: call the first tool that takes no required argument.
  for _, name in ipairs(names) do
    local needs = false
    for _, a in ipairs(registry:get(name).args) do needs = needs or a.required end
    if not needs then run(name, {}); run(name, {}); break end
  end
  client:close()
  return
end

print('\nthe native module keeps one server process, so its state survives:')
for _ = 1, 3 do run('mcp_increment') end
run('mcp_increment', { by = 10 })
run('mcp_whoami')
run('mcp_whoami')
client:close()

print('\nthe pure-Lua module re-spawns the server for every call, so the count starts over:')
local pure = dofile(root .. '/lua/mcp.lua')
local old = pure.new({ command = command })
for _ = 1, 3 do
  local took3, ok3, text = timed(old.call, old, 'increment', {})
  print(string.format('%s  increment() -> %s', ms(took3), ok3 and text or 'error: ' .. tostring(text)))
end
