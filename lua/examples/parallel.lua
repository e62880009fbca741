-- parallel.lua - an agent turn in which the model asked for five tool calls
-- at once, to two servers: all five go out together, and the turn takes as
-- long as the slowest call rather than the sum of them.
--
--   lua5.4 lua/examples/parallel.lua      (needs luv for the sleepy server)
local root = (arg and arg[0] or ''):match('^(.*)/lua/examples/[^/]*$') or '.'
local open_mcp = package.loadlib(root .. '/mcp.so', 'luaopen_mcp')
assert(open_mcp, 'mcp.so not found: build it first with `make build`')
---@type mcp
local mcp = open_mcp()

local lua = arg[-1] or 'lua5.4'
local servers = {
  sleepy = mcp.new({ command = { lua, root .. '/lua/servers/sleepy.lua' } }),
  counter = mcp.new({ command = { lua, root .. '/lua/servers/counter.lua' } }),
}

-- What a model's turn might ask for: server, tool, arguments.
local wanted = {
  { 'sleepy', 'sleep', { ms = 400, label = 'fetched the weather' } },
  { 'sleepy', 'sleep', { ms = 250, label = 'searched the docs' } },
  { 'counter', 'increment', { by = 5 } },
  { 'sleepy', 'sleep', { ms = 300, label = 'read the calendar' } },
  { 'counter', 'get', {} },
}

local t0 = mcp.clock()
local handles = {}
for i, call in ipairs(wanted) do
  local client = servers[call[1]]
  handles[i] = client:call_async(call[2], call[3])
end

-- Report each result as it lands, then hand them all back in order.
local left = #handles
local pending = {}
for i, h in ipairs(handles) do pending[i] = h end
---@type table<mcp.Handle, integer>
local index_of = {}
for i, h in ipairs(handles) do index_of[h] = i end
while left > 0 do
  local i = mcp.wait_any(pending, 30)
  if not i then error('a tool call took longer than 30 s') end
  local h = table.remove(pending, i)
  local ok, text = pcall(h.wait, h)
  local n = index_of[h]
  local call = assert(wanted[n])
  print(string.format('%6.0f ms  #%d %s.%s -> %s', (mcp.clock() - t0) * 1000, n, call[1], call[2],
    ok and text or ('error: ' .. tostring(text))))
  left = left - 1
end
print(string.format('five calls in %.0f ms (the slowest alone takes 400 ms)', (mcp.clock() - t0) * 1000))

for _, client in pairs(servers) do client:close() end
