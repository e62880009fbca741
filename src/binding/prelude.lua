-- The Lua face of the native module. Every public function is a thin
-- wrapper around one Rust function from `native`, which returns
-- `true, ...` on success or `false, err` on failure; the wrapper raises
-- `err` with level 0. This is how errors reach Lua as the plain strings
-- the reference raises: an error returned from Rust would arrive as a
-- userdata printed "runtime error: ..." with a traceback.
local native = ...

local mcp = {}
local Client = {}
Client.__index = Client
-- What call_async and request_async return.
local Handle = {}
Handle.__index = Handle

-- Which module loaded: the pure reference has neither field.
mcp._VERSION = native.version
mcp.native = true

mcp.PROTOCOL_VERSION = "2025-06-18"
-- What the client accepts from a server, newest first; mcp.new{
-- protocol_version = "2025-11-25" } offers the newest.
mcp.SUPPORTED_VERSIONS = native.supported_versions
mcp.CLIENT_INFO = { name = "lua-agent", version = "0.1" }

local function raise_unless(ok, ...)
  if ok then return ... end
  error((...), 0)
end

function mcp.new(opts)
  return raise_unless(native.new(opts))
end

function mcp.json_decode(text, opts)
  return raise_unless(native.json_decode(text, opts))
end

-- JSON types Lua cannot tell apart: `mcp.array(t)` and `mcp.object(t)`
-- mark a table (through its metatable's `__jsontype`, as dkjson reads
-- it), and `mcp.null` is a JSON null that a table can hold.
mcp.null = native.null

local function json_type(name, metatable)
  return function(t)
    if t == nil then t = {} end
    if type(t) ~= "table" then
      error("mcp." .. name .. ": expected a table, got " .. type(t), 2)
    end
    local current = getmetatable(t)
    if current == nil then return setmetatable(t, metatable) end
    if current == metatable or (type(current) == "table" and rawget(current, "__jsontype") == name) then
      return t
    end
    error("mcp." .. name .. ": the table has a metatable already; set __jsontype = \"" .. name
      .. "\" in it instead", 2)
  end
end
mcp.array = json_type("array", native.array_metatable)
mcp.object = json_type("object", native.object_metatable)

function mcp.json_encode(value)
  return raise_unless(native.json_encode(value))
end

-- A W3C traceparent for a request's opts.meta: a new trace, the host's
-- ({trace_id=, span_id=, sampled=}), or a child of one it was given.
function mcp.traceparent(from)
  return raise_unless(native.traceparent(from))
end

-- A client whose server is a recording made with `opts.record`: the same
-- API, answered from the file (see transport/record.rs for the matching).
function mcp.replay(path, opts)
  if type(path) ~= "string" then
    error("mcp.replay: the recording must be a file path, got " .. type(path), 2)
  end
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  o.replay, o.command, o.url, o.transport = path, nil, nil, nil
  return mcp.new(o)
end

function Client:discover()
  return raise_unless(native.discover(self))
end

-- discover without waiting: a handle whose result is client.tools, filled
-- (with server_info and the rest) as discover fills it. opts: on_done,
-- timeout.
function Client:discover_async(opts)
  return raise_unless(native.discover_async(self, opts))
end

-- opts (live clients): timeout, on_progress, max_total_timeout.
-- (self.transport is read here, where Lua reads a field for little; and
-- the returns are taken as four locals, not through raise_unless's
-- varargs: on the call an agent makes most, the vararg call cost about 600
-- of a small call's 34,000 instructions.)
function Client:call(name, args, opts)
  local ok, text, is_error, whole = native.call(self, name, args, opts, self.transport)
  if ok then return text, is_error, whole end
  error(text, 0)
end

-- Ends the client's session: the server process is stopped (stdio) or the
-- session deleted (HTTP). A later call starts a new one.
function Client:close()
  return raise_unless(native.close(self))
end

-- Any request: the reply's result table.
function Client:request(method, params, opts)
  return raise_unless(native.request(self, method, params, opts))
end

-- The async API: a handle at once, the request already sent.
function Client:call_async(name, args, opts)
  return raise_unless(native.call_async(self, name, args, opts))
end

-- call_async that lets the server run the tool as a task (opts.task).
function Client:call_task(name, args, opts)
  if opts ~= nil and type(opts) ~= "table" then
    error("client:call_task: opts must be a table", 0)
  end
  local task_opts = { task = true }
  for k, v in pairs(opts or {}) do task_opts[k] = v end
  return raise_unless(native.call_async(self, name, args, task_opts))
end

function Client:request_async(method, params, opts)
  return raise_unless(native.request_async(self, method, params, opts))
end

-- For event loops: readable whenever dispatch has something to run.
function Client:fd()
  return raise_unless(native.fd(self))
end

function Client:dispatch()
  return raise_unless(native.dispatch(self))
end

function Handle:wait(timeout)
  return raise_unless(native.wait(self, timeout))
end

function Handle:done()
  return raise_unless(native.done(self))
end

function Handle:cancel(reason)
  return raise_unless(native.cancel(self, reason))
end

-- The task the server made of a call, as it last said (nil: none).
function Handle:status()
  return raise_unless(native.status(self))
end

-- The rest of the surface. Each request has an _async form returning a
-- handle whose wait returns what the blocking form does.
function Client:notify(method, params)
  return raise_unless(native.notify(self, method, params))
end

-- The roots a roots/list handler gives changed: the server lists them
-- again. (Declare it: opts.capabilities = {roots = {listChanged = true}}.)
function Client:roots_changed()
  return raise_unless(native.notify(self, "notifications/roots/list_changed"))
end

function Client:ping(opts)
  raise_unless(native.request(self, "ping", nil, opts))
  return true
end

function Client:ping_async(opts)
  return raise_unless(native.request_async(self, "ping", nil, opts))
end

-- Lists follow every page; their _async forms do too, one request a page.
local lists = {
  list_tools = "tools/list",
  list_resources = "resources/list",
  list_resource_templates = "resources/templates/list",
  list_prompts = "prompts/list",
  -- Skills (SEP-2640): what each skill is, its files' digests and sizes;
  -- nothing is read until get_skill.
  list_skills = "skills/list",
}
for name, method in pairs(lists) do
  Client[name] = function(self, opts)
    return raise_unless(native.list(self, method, opts))
  end
  Client[name .. "_async"] = function(self, opts)
    return raise_unless(native.request_async(self, method, nil, opts, "pages"))
  end
end

-- Requests with fixed params; `field` names the part of the result they
-- return (nil: all of it).
local function define(name, method, field, params_of)
  Client[name] = function(self, ...)
    local params, opts = params_of(...)
    local result = raise_unless(native.request(self, method, params, opts))
    if field then return result[field] end
    return result
  end
  Client[name .. "_async"] = function(self, ...)
    local params, opts = params_of(...)
    return raise_unless(native.request_async(self, method, params, opts, field))
  end
end

local function needs_string(what, value)
  if type(value) ~= "string" then
    error(string.format("client:%s must be a string, got %s", what, type(value)), 0)
  end
end

-- A skill's folder, where the server offers resources/directory/read.
function Client:list_skill_directory(uri, opts)
  needs_string("list_skill_directory: the uri", uri)
  return raise_unless(native.list(self, "resources/directory/read", opts, { uri = uri }))
end

function Client:list_skill_directory_async(uri, opts)
  needs_string("list_skill_directory_async: the uri", uri)
  return raise_unless(native.request_async(self, "resources/directory/read", { uri = uri }, opts, "pages"))
end

-- A skill the last list_skills listed, loaded: its SKILL.md read and
-- checked against the listing (size, digest, frontmatter) before anything
-- of it is returned; then its other files, one at a time, checked the same.
function Client:get_skill(name, opts)
  return raise_unless(native.skill(self, name, nil, opts))
end

function Client:get_skill_async(name, opts)
  return raise_unless(native.skill_async(self, name, nil, opts))
end

function Client:read_skill_file(name, path, opts)
  needs_string("read_skill_file: the path", path)
  return raise_unless(native.skill(self, name, path, opts))
end

function Client:read_skill_file_async(name, path, opts)
  needs_string("read_skill_file_async: the path", path)
  return raise_unless(native.skill_async(self, name, path, opts))
end

define("read_resource", "resources/read", "contents", function(uri, opts)
  needs_string("read_resource: the uri", uri)
  return { uri = uri }, opts
end)
define("subscribe", "resources/subscribe", nil, function(uri, opts)
  needs_string("subscribe: the uri", uri)
  return { uri = uri }, opts
end)
define("unsubscribe", "resources/unsubscribe", nil, function(uri, opts)
  needs_string("unsubscribe: the uri", uri)
  return { uri = uri }, opts
end)
define("get_prompt", "prompts/get", nil, function(name, args, opts)
  needs_string("get_prompt: the name", name)
  return { name = name, arguments = args }, opts
end)
define("complete", "completion/complete", "completion", function(ref, argument, context, opts)
  return { ref = ref, argument = argument, context = context }, opts
end)
define("set_log_level", "logging/setLevel", nil, function(level, opts)
  needs_string("set_log_level: the level", level)
  return { level = level }, opts
end)

-- The reference's low-level methods.
function Client:id()
  return raise_unless(native.id(self))
end

function Client:initialize_msg()
  return raise_unless(native.initialize_msg(self))
end

function Client:handshake()
  return raise_unless(native.handshake(self))
end

function Client:exchange(messages)
  return raise_unless(native.exchange(self, messages))
end

function mcp.wait_any(handles, timeout)
  return raise_unless(native.wait_any(handles, timeout))
end

function mcp.wait_all(handles, timeout)
  return raise_unless(native.wait_all(handles, timeout))
end

function mcp.mount(registry, client, opts)
  return raise_unless(native.mount(registry, client, opts))
end

-- Seconds on a monotonic clock, for timing calls: os.clock counts only
-- this process's CPU time, which leaves out every wait on a server.
mcp.clock = native.clock

-- A mounted tool's `run`: the tool's own failure text is raised as is,
-- so the agent loop hands it to the model as an observation. With
-- mount's `approve`, the host is asked first, with the tool as the client
-- last heard of it at this moment (a tool re-listed as destructive is
-- judged as destructive), or as it was mounted if the server no longer
-- lists it; a refusal is raised the same way, so the agent reads why.
-- For mount's code = true (`structured`), a tool answers a chunk with its
-- structured content where it has some.
local function runner(client, tool_name, approve, tool, outputs, max_output, structured)
  return function(args)
    if approve then
      local now = raise_unless(native.current_tool(client, tool_name)) or tool
      local allowed, reason = approve(now, args, now.annotations, client)
      if allowed ~= true then
        error(reason ~= nil and tostring(reason) or ("refused: the host did not approve " .. tostring(tool_name)), 0)
      end
    end
    local text, is_error, result = client:call(tool_name, args)
    -- mount's max_output: past it, the head and tail and where the rest is.
    if outputs then text = raise_unless(native.cap_output(outputs, max_output, client, text, result)) end
    if is_error then error(text, 0) end
    if structured and type(result) == "table" and result.structuredContent ~= nil then
      return result.structuredContent
    end
    return text
  end
end

-- mount's code = true: the run of mcp_run_lua over the registry's record
-- (the tools by mounted name; the output cap, if a mount set one).
local function code_runner(record)
  return function(args)
    local code = type(args) == "table" and args.code
    if type(code) ~= "string" then error("mcp_run_lua needs code: a Lua chunk, as text", 0) end
    local text = raise_unless(native.run_lua(record, code))
    if record.outputs then text = raise_unless(native.cap_output(record.outputs, record.max_output, record, text)) end
    return text
  end
end

-- mount's max_output: the run of mcp_read_output, over the registry's
-- outputs record.
local function output_reader(record)
  return function(args)
    if type(args) ~= "table" or type(args.id) ~= "string" then
      error("mcp_read_output needs the id of a cut output (out-N, as the cut output names it)", 0)
    end
    return raise_unless(native.read_output(record, args.id, tonumber(args.offset), tonumber(args.length)))
  end
end

-- mount's search = true: the runs of the two entries a registry gets in
-- place of every tool, over its record (the index, the tools by mounted
-- name). A tool's own failure is raised as its run raises it.
local function search_runs(record)
  local function search(args)
    local query = type(args) == "table" and args.query
    if type(query) ~= "string" or not query:find("%S") then
      error("mcp_search_tools needs a query: words for what you want done", 0)
    end
    return raise_unless(native.search_tools(record, query, tonumber(args.limit)))
  end
  local function call(args)
    local name = type(args) == "table" and args.name
    local held = type(name) == "string" and record.tools[name]
    if not held then error(raise_unless(native.search_miss(record, name)), 0) end
    local arguments = args.arguments
    if type(arguments) == "string" then
      local ok, decoded = pcall(mcp.json_decode, arguments)
      if not ok or type(decoded) ~= "table" then
        error("mcp_call_tool: arguments must be a JSON object, as the tool's input_schema describes", 0)
      end
      arguments = decoded
    end
    return held.run(arguments or {})
  end
  return search, call
end

-- The server side (docs/server.md): Lua functions served as tools,
-- resources and prompts. The protocol is the native core's; these are
-- the names a Lua program calls.
local Server = {}
Server.__index = Server

function mcp.server(opts)
  return raise_unless(native.server(opts, Server))
end

function Server:tool(def, fn) return raise_unless(native.server_add(self, 'tool', def, fn)) end
function Server:resource(def, fn) return raise_unless(native.server_add(self, 'resource', def, fn)) end
function Server:resource_template(def, fn)
  return raise_unless(native.server_add(self, 'resource_template', def, fn))
end
function Server:prompt(def, fn) return raise_unless(native.server_add(self, 'prompt', def, fn)) end
function Server:skill(def) return raise_unless(native.server_skill(self, def)) end
function Server:remove(kind, name) return raise_unless(native.server_remove(self, kind, name)) end
function Server:resource_updated(uri) return raise_unless(native.server_resource_updated(self, uri)) end
function Server:close() return raise_unless(native.server_close(self)) end
function Server:listen(opts) return raise_unless(native.server_listen(self, opts)) end
function Server:fd() return raise_unless(native.server_fd(self)) end
function Server:dispatch() return raise_unless(native.server_dispatch(self)) end
function Server:run(seconds) return raise_unless(native.server_run(self, seconds)) end

-- Stdout carries the protocol alone while serving: what the program
-- itself writes there goes to stderr (the native side points descriptor 1
-- at it); Lua's own buffer is flushed first, so nothing written before
-- serving began lands in the stream.
function Server:serve_stdio()
  io.stdout:flush()
  return raise_unless(native.serve_stdio(self))
end

-- What a handler gets as `ctx`: the request's `meta`, `request_id`, and
-- ways to talk to the client while it runs.
local Context = {}
Context.__index = Context
mcp._Context = Context

function Context:progress(done, total, message)
  if self.progress_token == nil then return end
  raise_unless(native.ctx_notify(self, 'notifications/progress', {
    progressToken = self.progress_token, progress = done, total = total, message = message,
  }))
end

function Context:log(level, data, logger)
  raise_unless(native.ctx_notify(self, 'notifications/message', { level = level, data = data, logger = logger }))
end

-- Over HTTP: ends this request's event stream before its reply, so that
-- a long call holds no connection; the client comes back for the rest.
function Context:close_stream()
  return raise_unless(native.ctx_close_stream(self))
end

function Context:cancelled()
  return raise_unless(native.ctx_cancelled(self, self.request_id))
end

-- A handler whose 2026-07-28 client must give input first ends here: the
-- request is answered input_required, and runs again with the answers.
local INPUT_REQUIRED = setmetatable({}, { __tostring = function() return 'mcp: input required' end })

-- Requests to the client by key, all answered before it returns: the
-- answers by key, or nil and why.
function Context:ask(requests)
  local answers, why = raise_unless(native.ctx_ask(self, requests))
  if answers == true then error(INPUT_REQUIRED, 0) end
  return answers, why
end

function Context:client_can(capability)
  return raise_unless(native.ctx_client_can(self, capability))
end

-- With a callback the request is sent and this returns at once; the
-- callback gets the result (or nil and why) from dispatch or run, so an
-- event loop never waits on the client. Of a 2026-07-28 client it is a
-- round of input (see Context:ask), keyed by its place in the handler.
function Context:request(method, params, callback)
  if self._modern then
    self._asked = (self._asked or 0) + 1
    local key = 'input-' .. self._asked
    -- A task's question waits in the task, for tasks/update.
    if self._task and callback then
      return raise_unless(native.ctx_task_ask(self, key, method, params, callback))
    end
    local answers, why = self:ask({ [key] = { method = method, params = params } })
    local result = answers and answers[key]
    if callback then return callback(result, why) end
    return result, why
  end
  return raise_unless(native.ctx_request(self, method, params, callback))
end

function Context:elicit(params, callback) return self:request('elicitation/create', params, callback) end
function Context:sample(params, callback) return self:request('sampling/createMessage', params, callback) end
function Context:roots(callback)
  if callback then
    return self:request('roots/list', nil, function(result, why)
      if result == nil then return callback(nil, why) end
      return callback(result.roots)
    end)
  end
  local result, why = self:request('roots/list')
  if result == nil then return nil, why end
  return result.roots
end

-- A handler that returns ctx:later() answers when it calls ctx:finish
-- (with what it would have returned, or nil and a message), from any
-- callback: the request stays open meanwhile and others are served.
local LATER = setmetatable({}, { __tostring = function() return 'mcp: answered later' end })
mcp._later = LATER

function Context:later()
  return LATER
end

function Context:finish(value, message)
  if self._finished then error('ctx:finish: this request was answered already', 2) end
  self._finished = true
  return raise_unless(native.ctx_finish(self, value, message))
end

native.setup(mcp, Client, Handle, runner,
  { pcall = pcall, tostring = tostring, pairs = pairs, search_runs = search_runs, output_reader = output_reader,
    code_runner = code_runner })
return mcp
