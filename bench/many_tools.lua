-- many_tools.lua - what mount's search, max_output and code save an
-- agent, in bytes sent to its model and in time:
--   1. the tool definitions (name, description, input schema, as JSON)
--      an agent sends its model with every tool mounted, per server and
--      in all, against the two entries search = true sends instead;
--   2. one search's time at 1,000 tools (median of 200 queries);
--   3. a 10 MB result under max_output = 4096: the bytes the model gets,
--      the file kept, and the pages (and time) to read it all back.
--
--   lua5.4 bench/many_tools.lua        (after make build, and make test once for node's peers)
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
local root = io.popen('cd ' .. here .. '/.. && pwd'):read('*l')
package.cpath = root .. '/?.so;' .. package.cpath
local mcp = require('mcp')
local modules = root .. '/spec/peers/node_modules/@modelcontextprotocol/'

local function registry()
  local r = { tools = {}, order = {} }
  function r:get(name) return self.tools[name] end
  function r:add(tool) self.tools[tool.name] = tool; self.order[#self.order + 1] = tool.name end
  return r
end

-- The definitions a model is sent: every entry's name and description
-- and, for a mounted tool, the input schema its server gave.
local function definition_bytes(reg, schemas)
  local bytes = 0
  for _, name in ipairs(reg.order) do
    local entry = reg.tools[name]
    local args = {}
    for _, a in ipairs(entry.args) do args[a.name] = { type = a.type } end
    local schema = schemas[name] or { type = 'object', properties = args }
    bytes = bytes + #mcp.json_encode({ name = name, description = entry.description, input_schema = schema })
  end
  return bytes
end

local dir = os.tmpname()
os.remove(dir)
os.execute('mkdir -p ' .. dir)
local servers = {
  { 'server-everything', { 'node', modules .. 'server-everything/dist/index.js' } },
  { 'server-filesystem', { 'node', modules .. 'server-filesystem/dist/index.js', dir } },
  { 'server-memory', { 'node', modules .. 'server-memory/dist/index.js' } },
  { 'many_tools.lua (300)', { 'lua5.4', root .. '/spec/servers/many_tools.lua', '300' } },
}

print('1. tool definitions sent to the model (bytes of JSON)')
print(string.format('%-24s %6s %12s %12s', 'server', 'tools', 'every tool', 'search'))
local all, clients = registry(), {}
local total_every, total_tools = 0, 0
local schemas = {}
for _, server in ipairs(servers) do
  local client = mcp.new({ command = server[2], timeout = 60 })
  clients[#clients + 1] = client
  local every = registry()
  local tools = client:discover()
  local own = {}
  for _, tool in ipairs(tools) do own[tool.name] = tool.inputSchema; schemas[tool.name] = tool.inputSchema end
  mcp.mount(every, client, { trust = true })
  local searched = registry()
  mcp.mount(searched, client, { trust = true, search = true })
  local bytes = definition_bytes(every, own)
  total_every, total_tools = total_every + bytes, total_tools + #tools
  print(string.format('%-24s %6d %12d %12d', server[1], #tools, bytes, definition_bytes(searched, {})))
  mcp.mount(all, client, { trust = true, search = true, prefix = server[1]:match('^[%w]+') .. '_' })
end
print(string.format('%-24s %6d %12d %12d', 'all four, one registry', total_tools, total_every, definition_bytes(all, {})))
for _, client in ipairs(clients) do client:close() end
os.execute('rm -rf ' .. dir)

print('\n2. one search at 1,000 tools (median of 200 queries)')
local big = mcp.new({ command = { 'lua5.4', root .. '/spec/servers/many_tools.lua', '1000' }, timeout = 60 })
local reg = registry()
local indexed = #mcp.mount(reg, big, { trust = true, search = true })
local queries = { 'delete a hotel booking', 'export invoices for a customer', 'weather forecast', 'sync my playlist',
  'validate a contract', 'render the spreadsheet', 'extra tool 777', 'restore an archived email' }
local times = {}
for i = 1, 200 do
  local t0 = mcp.clock()
  reg:get('mcp_search_tools').run({ query = queries[i % #queries + 1] })
  times[#times + 1] = mcp.clock() - t0
end
table.sort(times)
print(string.format('%d tools indexed: median %.1f us, p90 %.1f us per search (JSON answer included)',
  indexed, times[100] * 1e6, times[180] * 1e6))
big:close()

print('\n3. a 10 MB result under max_output = 4096')
local many = mcp.new({ command = { 'lua5.4', root .. '/spec/servers/many_tools.lua' }, timeout = 60 })
local capped = registry()
mcp.mount(capped, many, { trust = true, max_output = 4096, include = { 'big_text' } })
local t0 = mcp.clock()
local text = capped:get('big_text').run({ bytes = 10 * 1000 * 1000 })
local call_time = mcp.clock() - t0
local from = tonumber(text:match('offset = (%d+)'))
local pages, read, offset = 0, 0, 0
t0 = mcp.clock()
while true do
  local page = capped:get('mcp_read_output').run({ id = 'out-1', offset = offset })
  pages = pages + 1
  local body, next_offset = page:match('^(.*)\n%[bytes %d+ to %d+ of %d+; next page: offset = (%d+)%]$')
  if not body then break end
  read, offset = read + #body, tonumber(next_offset)
end
print(string.format('bytes to the model: %d of 10000000 (head %d); the call took %.2f s with the file written',
  #text, from, call_time))
print(string.format('read back: %d pages of at most 4096 bytes in %.2f s (%.0f us a page)',
  pages, mcp.clock() - t0, (mcp.clock() - t0) / pages * 1e6))
many:close()
