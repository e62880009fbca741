-- client.lua URL - the client the official conformance suite drives
-- (`conformance client --command "lua5.4 spec/conformance/client.lua"`):
-- the native module doing what an agent does. It never reads the
-- scenario's name (MCP_CONFORMANCE_SCENARIO, or `name` in the context)
-- nor the protocol version the suite runs at
-- (MCP_CONFORMANCE_PROTOCOL_VERSION): the module finds the server's era
-- itself, and every scenario gets the same behaviour. Log in with the
-- credentials MCP_CONFORMANCE_CONTEXT carries, by the grant they are for
-- (none: the browser flow, registering as it can), discover, make the
-- calls the context asks for (toolCalls) or else call each tool with
-- arguments its schema asks for, close. DPoP where the authorization
-- server offers it; skills listed where the server offers them, and
-- loaded when the runner says the task calls for them (--use-skills).
local root = (arg[0]:match('^(.*)/[^/]*$') or '.') .. '/../..'
local mcp = assert(package.loadlib(root .. '/mcp.so', 'luaopen_mcp'))()

local url = assert(arg[#arg], 'usage: client.lua [--use-skills] URL')
-- The task the runner gives: whether it calls for the server's skills
-- (the suite's skills scenarios serve the same listing whether or not
-- the host's task needs a skill; only the task says whether to load one).
local use_skills = arg[1] == '--use-skills'

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

local function quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- A headless login: the suite's authorization server sends the browser
-- straight back to the redirect URI, so GETting the authorization URL
-- without following the redirect gives the URL a browser would have
-- come back to.
local function follow_once(authorization_url)
  local curl = assert(io.popen("curl -s -o /dev/null -w '%{redirect_url}' " .. quote(authorization_url)))
  local location = curl:read('*a')
  curl:close()
  return location ~= '' and location or nil
end

-- A JSON document, or nil where there is none (or none within `seconds`:
-- some of the suite's servers answer every GET with an endless stream).
local function get_json(url, seconds)
  local curl = assert(io.popen('curl -s -f --max-time ' .. (seconds or 10) .. ' ' .. quote(url)))
  local body = curl:read('*a')
  curl:close()
  local ok, value = pcall(mcp.json_decode, body)
  return ok and type(value) == 'table' and value or nil
end

-- RFC 9728 and RFC 8414 keep metadata at /.well-known/NAME inserted
-- between the host and the path of what it describes.
local function well_known(url, name)
  local origin, path = url:match('^(https?://[^/?#]+)([^?#]*)')
  return origin .. '/.well-known/' .. name .. (path:gsub('/$', ''))
end

-- The MCP server's authorization server's metadata, found the way any
-- client finds it: the resource's metadata names the server.
local function issuer_metadata(resource, seconds)
  local prm = get_json(well_known(resource, 'oauth-protected-resource'), seconds)
    or get_json(well_known(resource:match('^https?://[^/?#]+'), 'oauth-protected-resource'), seconds)
  local issuer = prm and type(prm.authorization_servers) == 'table' and prm.authorization_servers[1]
  return type(issuer) == 'string' and (get_json(well_known(issuer, 'oauth-authorization-server'), seconds)
    or get_json(well_known(issuer, 'openid-configuration'), seconds)) or {}
end

-- The grants it offers (RFC 8414's default when it names none: the code flow).
local function offered_grants(resource)
  local metadata = issuer_metadata(resource)
  local grants = {}
  for _, grant in ipairs(metadata.grant_types_supported or { 'authorization_code' }) do grants[grant] = true end
  return grants
end

-- Credentials the scenario hands out (a pre-registered client, a machine's
-- secret or key, a user's ID token at an identity provider) come in
-- MCP_CONFORMANCE_CONTEXT, as an agent's configuration would give them.
local context = {}
if os.getenv('MCP_CONFORMANCE_CONTEXT') then
  context = mcp.json_decode(os.getenv('MCP_CONFORMANCE_CONTEXT'))
end
local auth = {
  authorize = follow_once,
  -- The suite's stand-in for a client that publishes its metadata.
  client_metadata_url = 'https://conformance-test.local/client-metadata.json',
}
local machine = { grant = 'client_credentials', client_id = context.client_id,
                  client_secret = context.client_secret, private_key_pem = context.private_key_pem }
if context.valid_jwt and context.client_id then
  -- A workload: the identity token its platform gave it is the grant.
  auth = { grant = 'jwt_bearer', client_id = context.client_id, assertion = context.valid_jwt }
elseif context.idp_id_token and context.idp_token_endpoint then
  -- The user logged in to the enterprise identity provider already; its
  -- ID token stands for them.
  auth = { grant = 'identity_assertion', client_id = context.client_id, client_secret = context.client_secret,
           idp = { token_endpoint = context.idp_token_endpoint, id_token = context.idp_id_token,
                   client_id = context.idp_client_id } }
elseif context.client_id and context.private_key_pem then
  -- The module signs client assertions for client_credentials only.
  auth = machine
elseif context.client_id and context.client_secret then
  -- An id and secret serve a machine and a pre-registered client of the
  -- browser flow alike; the authorization server says which it is to
  -- be: the code flow where it offers one, else client_credentials.
  local grants = offered_grants(url)
  if grants.client_credentials and not grants.authorization_code then
    auth = machine
  else
    auth.client_id, auth.client_secret = context.client_id, context.client_secret
  end
elseif context.client_id then
  auth.client_id = context.client_id
end

-- DPoP-bound tokens where the authorization server signs them with a key
-- this client can make (ES256), as an agent that opts in would ask.
-- (Asked briefly: on localhost an answer takes milliseconds.)
for _, alg in ipairs(issuer_metadata(url, 2).dpop_signing_alg_values_supported or {}) do
  if alg == 'ES256' then auth.dpop = true end
end

local client = mcp.new({ url = url, timeout = 20, auth = auth, skills = true,
                         handlers = { ['elicitation/create'] = accept_defaults } })

local samples = { number = 2, integer = 3, string = 'conformance', boolean = true }

-- What an agent puts in an argument, from what the tool's schema says of
-- it: a sample of its type, or, where its description asks for the
-- inputSchema of another listed tool, that schema as it was received.
local function argument(prop, tools)
  local wants = type(prop.description) == 'string' and prop.description
  if prop.type == 'object' and wants and wants:find('inputSchema', 1, true) then
    for _, other in ipairs(tools) do
      if wants:find(other.name, 1, true) then return other.inputSchema end
    end
  end
  if prop.type == 'object' then return {} end
  return samples[prop.type] or 'x'
end

local function call(name, args)
  local ok, text = pcall(client.call, client, name, args)
  io.stderr:write(string.format('%s -> %s %s\n', name, tostring(ok), tostring(text)))
end

local tools = client:discover()
-- Skills: listed for the model to choose from; loaded (SKILL.md, then
-- its files) only where the task calls for them.
local extensions = (client.server_capabilities or {}).extensions or {}
if extensions['io.modelcontextprotocol/skills'] then
  for _, skill in ipairs(client:list_skills()) do
    local name = skill.frontmatter and skill.frontmatter.name
    if use_skills and name then
      local ok, loaded = pcall(client.get_skill, client, name)
      io.stderr:write(string.format('skill %s -> %s %s\n', name, tostring(ok), ok and loaded.uri or tostring(loaded)))
      for _, file in ipairs(ok and loaded.files or {}) do
        io.stderr:write(string.format('  %s -> %s\n', file.path, tostring(pcall(client.read_skill_file, client, name, file.path))))
      end
    end
  end
end
if type(context.toolCalls) == 'table' then
  for _, planned in ipairs(context.toolCalls) do call(planned.name, planned.arguments or {}) end
else
  for _, tool in ipairs(tools) do
    local args = {}
    local schema = tool.inputSchema or {}
    for name, prop in pairs(schema.properties or {}) do args[name] = argument(prop, tools) end
    call(tool.name, args)
  end
end
client:close()
