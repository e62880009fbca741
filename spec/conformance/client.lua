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

-- A headless login: the suite's authorization server sends the browser
-- straight back to the redirect URI, so GETting the authorization URL
-- without following the redirect gives the URL a browser would have
-- come back to.
local function follow_once(authorization_url)
  local quoted = "'" .. authorization_url:gsub("'", "'\\''") .. "'"
  local curl = assert(io.popen("curl -s -o /dev/null -w '%{redirect_url}' " .. quoted))
  local location = curl:read('*a')
  curl:close()
  return location ~= '' and location or nil
end

-- Credentials the scenario hands out (pre-registered clients, machine
-- credentials) come in MCP_CONFORMANCE_CONTEXT.
local context = {}
if os.getenv('MCP_CONFORMANCE_CONTEXT') then
  context = mcp.json_decode(os.getenv('MCP_CONFORMANCE_CONTEXT'))
end
local auth = {
  authorize = follow_once,
  -- The suite's stand-in for a client that publishes its metadata.
  client_metadata_url = 'https://conformance-test.local/client-metadata.json',
}
local machine = (context.name or ''):match('^auth/client%-credentials') ~= nil
if context.name == 'auth/cross-app-access-complete-flow' then
  -- The user logged in to the enterprise identity provider already; its
  -- ID token stands for them.
  auth = { grant = 'identity_assertion', client_id = context.client_id, client_secret = context.client_secret,
           idp = { token_endpoint = context.idp_token_endpoint, id_token = context.idp_id_token,
                   client_id = context.idp_client_id } }
elseif machine then
  auth = { grant = 'client_credentials', client_id = context.client_id,
           client_secret = context.client_secret, private_key_pem = context.private_key_pem }
elseif context.client_id then
  auth.client_id, auth.client_secret = context.client_id, context.client_secret
end

local client = mcp.new({ url = url, timeout = 20, auth = auth,
                         handlers = { ['elicitation/create'] = accept_defaults } })

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
