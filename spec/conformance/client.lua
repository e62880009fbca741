-- client.lua URL - the client the official conformance suite drives
-- (`conformance client --command "lua5.4 spec/conformance/client.lua"`):
-- the native module doing what an agent does. The scenario name comes in
-- MCP_CONFORMANCE_SCENARIO; every scenario gets the same honest behaviour:
-- discover, call each tool with arguments its schema asks for, close.
local root = (arg[0]:match('^(.*)/[^/]*$') or '.') .. '/../..'
local mcp = assert(package.loadlib(root .. '/mcp.so', 'luaopen_mcp'))()

local url = assert(arg[#arg], 'usage: client.lua URL')

-- An agent with no user at hand accepts an elicitation with the defaults
-- the server's schema offers (SEP-1034).
local function accept_defaults(params)
  local content = {}
  local schema = params.requestedSchema or {}
  for name, prop in pairs(schema.properties or {}) do
    if prop.default ~= nil then content[name] = prop.default end
  end
  return { action = 'accept', content = content }
end

local client = mcp.new({ url = url, timeout = 20, handlers = { ['elicitation/create'] = accept_defaults } })

local samples = { number = 2, integer = 3, string = 'conformance', boolean = true }
local tools = client:discover()
for _, tool in ipairs(tools) do
  local args = {}
  local schema = tool.inputSchema or {}
  for name, prop in pairs(schema.properties or {}) do
    args[name] = samples[prop.type] or 'x'
  end
  local ok, text, is_error = pcall(client.call, client, tool.name, args)
  io.stderr:write(string.format('%s -> %s %s\n', tool.name, tostring(ok), tostring(text)))
end
client:close()
