-- The server lists MCP hosts already keep, read as `mcp.new` options, and
-- many servers connected and mounted at once. Two shapes are in use:
--
--   {"mcpServers": {NAME: {...}}}   Claude Desktop and Code, Cursor, Cline,
--                                   Windsurf, the Inspector
--   {"servers": {NAME: {...}}, "inputs": [...]}   VS Code (.vscode/mcp.json)
--
-- VS Code's files may hold comments and trailing commas; both are taken
-- out before decoding, outside strings only.
local mcp = ...

local function fail(message)
  error("mcp.load_config: " .. message, 0)
end

local function read_file(path, what)
  local f, why = io.open(path, "rb")
  if not f then fail("cannot read " .. what .. " " .. path .. ": " .. tostring(why)) end
  local text = f:read("*a")
  f:close()
  return text
end

-- JSON with comments (// and /* */) and trailing commas, as plain JSON.
local function strip_jsonc(text)
  local out, i, n = {}, 1, #text
  local in_string = false
  while i <= n do
    local c = text:sub(i, i)
    if in_string then
      out[#out + 1] = c
      if c == "\\" then
        out[#out + 1] = text:sub(i + 1, i + 1)
        i = i + 1
      elseif c == '"' then
        in_string = false
      end
      i = i + 1
    elseif c == '"' then
      in_string = true
      out[#out + 1] = c
      i = i + 1
    elseif text:sub(i, i + 1) == "//" then
      i = (text:find("\n", i, true) or n + 1)
    elseif text:sub(i, i + 1) == "/*" then
      local close = text:find("*/", i + 2, true)
      if not close then fail("a comment is never closed") end
      i = close + 2
    elseif c == "," then
      -- A comma followed only by blanks (or comments) and a closing
      -- bracket is a trailing one.
      local j = i + 1
      while j <= n do
        local rest = text:sub(j, j + 1)
        if text:sub(j, j):match("%s") then
          j = j + 1
        elseif rest == "//" then
          j = (text:find("\n", j, true) or n + 1)
        elseif rest == "/*" then
          j = (text:find("*/", j + 2, true) or n) + 2
        else
          break
        end
      end
      local next_char = text:sub(j, j)
      if next_char ~= "}" and next_char ~= "]" then out[#out + 1] = c end
      i = i + 1
    else
      out[#out + 1] = c
      i = i + 1
    end
  end
  return table.concat(out)
end

-- ${VAR}, ${VAR:-default}, ${env:VAR}, ${workspaceFolder}, ${userHome}
-- and ${input:ID} in one string; `where` names the server and field.
local function expand(value, ctx, where)
  return (value:gsub("%${([^}]*)}", function(expr)
    local input = expr:match("^input:(.+)$")
    if input then
      if ctx.inputs_seen[input] ~= nil then return ctx.inputs_seen[input] end
      if not ctx.input then
        fail(where .. " uses ${input:" .. input .. "}; pass opts.input = function(id, spec) return value end to supply it")
      end
      local got = ctx.input(input, ctx.inputs[input])
      if type(got) ~= "string" then
        fail(where .. ": opts.input gave no string for ${input:" .. input .. "}")
      end
      ctx.inputs_seen[input] = got
      return got
    end
    if expr == "workspaceFolder" then
      if not ctx.workspace then fail(where .. " uses ${workspaceFolder}; pass opts.workspace") end
      return ctx.workspace
    end
    if expr == "userHome" then
      -- HOME, else USERPROFILE: Windows sets only the second.
      local home = os.getenv("HOME") or os.getenv("USERPROFILE")
      if not home then fail(where .. " uses ${userHome}, and HOME is not set") end
      return home
    end
    local variable = expr:match("^env:(.*)$") or expr
    local name, default = variable:match("^([%w_]+):%-(.*)$")
    name = name or variable:match("^([%w_]+)$")
    if not name then fail(where .. ": ${" .. expr .. "} is not a variable this client knows") end
    -- `:-` as the shells read it: the default stands in for a variable
    -- that is unset or empty.
    local set = ctx.env(name)
    if set ~= nil and (set ~= "" or not default) then return set end
    if default then return default end
    fail(where .. ": ${" .. expr .. "} is not set and has no default")
  end))
end

-- Every string in a value, expanded; tables copied.
local function expand_all(value, ctx, where)
  if type(value) == "string" then return expand(value, ctx, where) end
  if type(value) ~= "table" then return value end
  local out = {}
  for k, v in pairs(value) do
    out[k] = expand_all(v, ctx, type(k) == "number" and (where .. "[" .. k .. "]") or (where .. "." .. tostring(k)))
  end
  return out
end

-- KEY=VALUE lines (blank lines and # comments skipped; quotes taken off).
local function read_env_file(path)
  local env = {}
  for line in (read_file(path, "envFile") .. "\n"):gmatch("([^\n]*)\n") do
    local key, value = line:match("^%s*export%s+([%w_]+)%s*=%s*(.-)%s*$")
    if not key then key, value = line:match("^%s*([%w_]+)%s*=%s*(.-)%s*$") end
    if key then
      local quoted = value:match('^"(.*)"$') or value:match("^'(.*)'$")
      env[key] = quoted or value
    end
  end
  return env
end

local function string_list(value, where)
  if value == nil then return {} end
  if type(value) ~= "table" then fail(where .. " must be a list of strings") end
  for i, v in ipairs(value) do
    if type(v) ~= "string" then fail(where .. "[" .. i .. "] must be a string") end
  end
  return value
end

local HTTP_TYPES = { http = true, ["streamable-http"] = true, streamableHttp = true }

-- A relative path in an entry (cwd, envFile) is read from the config
-- file's directory, so that one file means the same servers whichever
-- directory the host was started in, and cwd and envFile in one entry
-- point at the same place. A config given as a table has no directory:
-- opts.workspace stands in for it, else the path is left relative (to the
-- process's directory when the server starts).
local function resolve(path, ctx)
  -- Absolute: "/x", and on Windows "C:\x", "C:/x" and "\\server\x".
  if path:match("^[/\\]") or path:match("^%a:[/\\]") or not ctx.base then return path end
  return ctx.base .. "/" .. path
end

-- errno values, the same on Linux and the BSDs (macOS included).
local ENOENT, ENOTDIR = 2, 20

-- A cwd that is not there fails here, by name: at the spawn, chdir's
-- ENOENT reads as if the command were missing ("MCP server produced no
-- output (CMD): No such file or directory"). Only a definite no fails:
-- a directory we may enter but not list (EACCES) is the spawn's to judge.
local function check_cwd(dir, given, where, ctx)
  local f, _, errno = io.open(dir .. "/.", "r")
  if f then
    f:close()
    return
  end
  if errno ~= ENOENT and errno ~= ENOTDIR then return end
  local message = where .. ".cwd" .. (ctx.path and " in " .. ctx.path or "") .. ": there is no directory " .. dir
  if given ~= dir then
    message = message .. ' (cwd "' .. given .. '", read from '
      .. (ctx.path and "the config file's directory" or "opts.workspace") .. ")"
  end
  fail(message)
end

-- One server's entry as mcp.new options, plus `name`, `disabled` and
-- `auto_approve`.
local function server_spec(name, entry, ctx)
  local where = "server " .. name
  if type(entry) ~= "table" then fail(where .. " must be an object") end
  if entry.disabled == true then
    -- Never started: its variables are not looked up, nor its inputs asked.
    return { name = name, disabled = true, auto_approve = {} }
  end
  -- Windsurf names a remote server's address serverUrl.
  if entry.url == nil and entry.serverUrl ~= nil then entry.url = entry.serverUrl end
  entry = expand_all(entry, ctx, where)
  local spec = { name = name, disabled = false }
  local kind = entry.type
  if entry.url ~= nil then
    -- The 2024-11-05 HTTP+SSE transport, spoken when named (a URL of
    -- another type falls back to it by itself where the server needs it).
    if kind == "sse" then spec.transport_kind = "sse" end
    if kind ~= nil and kind ~= "sse" and not HTTP_TYPES[kind] then
      fail(where .. ": type " .. tostring(kind) .. " does not go with a url (use http)")
    end
    if type(entry.url) ~= "string" then fail(where .. ".url must be a string") end
    spec.url = entry.url
    spec.headers = entry.headers
  elseif entry.command ~= nil then
    if kind ~= nil and kind ~= "stdio" then
      fail(where .. ": type " .. tostring(kind) .. " does not go with a command (use stdio)")
    end
    if type(entry.command) ~= "string" then fail(where .. ".command must be a string") end
    local argv = { entry.command }
    for _, a in ipairs(string_list(entry.args, where .. ".args")) do argv[#argv + 1] = a end
    spec.command = argv
    local env = {}
    if entry.envFile ~= nil then
      local path = entry.envFile
      if type(path) ~= "string" then fail(where .. ".envFile must be a path") end
      for k, v in pairs(read_env_file(resolve(path, ctx))) do env[k] = v end
    end
    if entry.env ~= nil and type(entry.env) ~= "table" then fail(where .. ".env must be an object") end
    for k, v in pairs(entry.env or {}) do env[k] = tostring(v) end
    if next(env) then spec.env = env end
    if entry.cwd ~= nil then
      if type(entry.cwd) ~= "string" then fail(where .. ".cwd must be a path") end
      spec.cwd = resolve(entry.cwd, ctx)
      check_cwd(spec.cwd, entry.cwd, where, ctx)
    end
  else
    fail(where .. " has neither a command nor a url")
  end
  if entry.timeout ~= nil then
    if type(entry.timeout) ~= "number" then fail(where .. ".timeout must be a number of seconds") end
    spec.timeout = entry.timeout
  end
  local approved = {}
  for _, field in ipairs({ "autoApprove", "alwaysAllow" }) do
    for _, tool in ipairs(string_list(entry[field], where .. "." .. field)) do approved[#approved + 1] = tool end
  end
  spec.auto_approve = approved
  return spec
end

-- A list of configs, in order (the user's file, then a project's): a
-- later one's server of a name replaces an earlier one's, whole, so a
-- project can change a server or disable it (`"disabled": true`) as hosts
-- let it. A file of the list that is not there is skipped: most projects
-- have none.
local function load_in_order(sources, opts)
  local merged = {}
  for i, source in ipairs(sources) do
    local missing = false
    if type(source) == "string" then
      local f, why = io.open(source, "rb")
      if f then f:close() else missing = tostring(why):find("No such file", 1, true) ~= nil end
    elseif type(source) ~= "table" then
      fail("the configs must be paths or tables, got " .. type(source) .. " at " .. i)
    end
    if not missing then
      for name, spec in pairs(mcp.load_config(source, opts)) do merged[name] = spec end
    end
  end
  return merged
end

function mcp.load_config(source, opts)
  opts = opts or {}
  if type(source) == "table" and source[1] ~= nil then return load_in_order(source, opts) end
  local config, base = source, nil
  if type(source) == "string" then
    base = source:match("^(.*)[/\\][^/\\]*$") or "."
    local text = read_file(source, "the config")
    local ok, decoded = pcall(function() return mcp.json_decode(strip_jsonc(text)) end)
    if not ok then
      fail(source .. " is not JSON: " .. tostring(decoded):gsub("^mcp%.load_config: ", ""))
    end
    config = decoded
  elseif type(source) ~= "table" then
    fail("the config must be a path or a table, got " .. type(source))
  end
  if type(config) ~= "table" then fail("the config must be an object") end
  local servers = config.mcpServers or config.servers
  if type(servers) ~= "table" then
    fail("the config has no servers (an object under mcpServers, or under servers as VS Code writes it)")
  end
  local ctx = {
    workspace = opts.workspace,
    input = opts.input,
    inputs = {},
    inputs_seen = {},
    path = type(source) == "string" and source or nil,
    base = base or opts.workspace,
    env = opts.env and function(name) return opts.env[name] end or os.getenv,
  }
  for _, spec in ipairs(config.inputs or {}) do
    if type(spec) == "table" and spec.id then ctx.inputs[spec.id] = spec end
  end
  local specs = {}
  for name, entry in pairs(servers) do
    specs[name] = server_spec(name, entry, ctx)
    -- Which file it came from (nil for a table).
    specs[name].config_file = ctx.path
  end
  return specs
end

local function sorted_names(t)
  local names = {}
  for name in pairs(t) do names[#names + 1] = name end
  table.sort(names)
  return names
end

-- Clients by name, for the enabled servers; nothing starts until a client
-- is used. `opts` (on_notification, handlers, ...) goes to every client,
-- under each server's own options; `opts.auth` (a login, a token store)
-- only to the HTTP servers, the only ones that can ask for it.
function mcp.connect(specs, opts)
  if type(specs) ~= "table" then error("mcp.connect: specs must be a table of server specs by name", 2) end
  local clients = {}
  for _, name in ipairs(sorted_names(specs)) do
    local spec = specs[name]
    if not spec.disabled then
      local o = {}
      for k, v in pairs(opts or {}) do
        if k ~= "auth" or spec.url then o[k] = v end
      end
      for k, v in pairs(spec) do o[k] = v end
      local client = mcp.new(o)
      client.server_name, client.auto_approve = name, spec.auto_approve
      clients[name] = client
    end
  end
  return clients
end

-- The names a server's tools were mounted under, added to `mounted`; a
-- tool the config auto-approves needs no approval.
local function note_mounted(registry, client, prefix, names, mounted)
  local approved = {}
  for _, tool in ipairs(client.auto_approve or {}) do approved[prefix .. tool] = true end
  for _, n in ipairs(names) do
    mounted[#mounted + 1] = n
    local entry = approved[n] and registry:get(n)
    if entry then entry.requires_approval = false end
  end
end

-- What mount_all passes to each mount: the host's choices, and the
-- server's prefix.
local function mount_options(opts, prefix)
  return { prefix = prefix, trust = opts.trust, approve = opts.approve, include = opts.include,
           exclude = opts.exclude, search = opts.search, max_output = opts.max_output,
           code = opts.code }
end

-- Mounts every client's tools under NAME_ (or opts.prefix(name)); a tool
-- the config auto-approves is mounted with requires_approval = false
-- (behind search, where no entry of its own exists, approve decides).
-- A server that fails (it does not start, its tool list fails) is skipped:
-- its error is returned by name, and the others are mounted.

function mcp.mount_all(registry, clients, opts)
  opts = opts or {}
  local mounted, failed = {}, {}
  for _, name in ipairs(sorted_names(clients)) do
    local client = clients[name]
    local prefix = opts.prefix and opts.prefix(name) or (name .. "_")
    local ok, names = pcall(mcp.mount, registry, client, mount_options(opts, prefix))
    if ok then
      note_mounted(registry, client, prefix, names, mounted)
    else
      failed[name] = tostring(names)
    end
  end
  return mounted, failed
end

-- mcp.mount without waiting: the tools are listed by discover_async and
-- mounted by mcp.mount's rules once the list is in. opts as mcp.mount's,
-- plus on_done(names) when mounted, on_done(nil, err) when not, and
-- timeout. Returns the listing's handle.
function mcp.mount_async(registry, client, opts)
  opts = opts or {}
  local mount_opts = {}
  for k, v in pairs(opts) do
    if k ~= "on_done" and k ~= "timeout" then mount_opts[k] = v end
  end
  local on_done = opts.on_done or function() end
  return client:discover_async({ timeout = opts.timeout, on_done = function(ok, err)
    if not ok then return on_done(nil, err) end
    local ok, names = pcall(mcp.mount, registry, client, mount_opts)
    if ok then return on_done(names) end
    return on_done(nil, names)
  end })
end

-- mcp.mount_all without waiting: every server starts and lists its tools
-- at once, and each is mounted as soon as its list is in, so a slow or
-- failing server holds none of the others. opts as mount_all's, plus
-- on_server(name, names, err) after each server and on_done(mounted,
-- failed) once all have settled (mount_all's returns; mounted in the order
-- the servers answered). Returns the listings' handles by name.
function mcp.mount_all_async(registry, clients, opts)
  opts = opts or {}
  local mounted, failed, handles = {}, {}, {}
  local names = sorted_names(clients)
  local pending = #names
  -- Each server on its own: one that fails to start stops none of the
  -- others. An error of on_server's (Ctrl-C's included) is the caller's,
  -- raised once on_done has had its turn.
  local function settled(name, got, err)
    pending = pending - 1
    local ok, raised = true, nil
    if opts.on_server then ok, raised = pcall(opts.on_server, name, got, err) end
    if pending == 0 and opts.on_done then opts.on_done(mounted, failed) end
    if not ok then error(raised, 0) end
  end
  local raised_at_start
  if pending == 0 and opts.on_done then opts.on_done(mounted, failed) end
  for _, name in ipairs(names) do
    local client = clients[name]
    local prefix = opts.prefix and opts.prefix(name) or (name .. "_")
    local each = mount_options(opts, prefix)
    each.on_done = function(got, err)
      if got then
        note_mounted(registry, client, prefix, got, mounted)
      else
        failed[name] = tostring(err)
      end
      settled(name, got, err)
    end
    local ok, handle = pcall(mcp.mount_async, registry, client, each)
    if ok then
      handles[name] = handle
    else
      failed[name] = tostring(handle)
      -- Raised after the other servers have started.
      local ok_settled, raised = pcall(settled, name, nil, handle)
      if not ok_settled and raised_at_start == nil then raised_at_start = raised end
    end
  end
  if raised_at_start ~= nil then error(raised_at_start, 0) end
  return handles
end
