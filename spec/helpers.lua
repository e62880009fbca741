-- Shared by the specs: where things are, how to load the two modules side
-- by side, a scripted fixture server, a registry like an agent's, and
-- process checks for the stdio specs.
local trace = require('trace')

local H = {}

-- Whether the suite runs on Windows (the Windows pass, under Wine here).
H.WINDOWS = package.config:sub(1, 1) == '\\'
-- The native module's file: ./mcp.so, or ./mcp.dll on Windows.
H.MODULE_FILE = H.WINDOWS and 'mcp.dll' or 'mcp.so'

-- The interpreter running the suite (the Makefile sets it for each
-- runtime): servers and helper processes run under the same one.
H.LUA = os.getenv('MCP_LUA') or 'lua5.4'

-- What Lua 5.1 and LuaJIT lack, for the specs' own use. There every number
-- is a float; integral values stand in for integers.
H.unpack = table.unpack or unpack
H.MAXINT = math.maxinteger or 2 ^ 63
-- Whether the reference can read a command's exit status: os.execute and
-- io.popen's close give none on 5.1 and LuaJIT, so its transport errors
-- there say "(nil)" where the native module gives the real code.
H.REFERENCE_SEES_STATUS = _VERSION ~= 'Lua 5.1'
H.MININT = math.mininteger or -2 ^ 63
function H.int(n)
  if math.tointeger then return math.tointeger(n) end
  return (type(n) == 'number' and n == math.floor(n)) and n or nil
end
function H.is_integer(n)
  if math.type then return math.type(n) == 'integer' end
  return type(n) == 'number' and n == math.floor(n) and n >= -2 ^ 63 and n < 2 ^ 63
end
-- Whether s is valid UTF-8: no surrogates, nothing past U+10FFFF,
-- shortest forms only. (5.4's utf8.len says the same; 5.3's lets
-- surrogates through, and 5.1 has none.)
function H.is_utf8(s)
  if _VERSION == 'Lua 5.4' then return utf8.len(s) ~= nil end
  local i, n = 1, #s
  while i <= n do
    local c = s:byte(i)
    local len, min
    if c < 0x80 then len, min = 1, 0
    elseif c >= 0xC2 and c < 0xE0 then len, min = 2, 0x80
    elseif c >= 0xE0 and c < 0xF0 then len, min = 3, 0x800
    elseif c >= 0xF0 and c < 0xF5 then len, min = 4, 0x10000
    else return false end
    local cp = len == 1 and c or c % (2 ^ (7 - len))
    for j = i + 1, i + len - 1 do
      local b = s:byte(j)
      if not b or b < 0x80 or b > 0xBF then return false end
      cp = cp * 64 + b % 64
    end
    if cp < min or cp > 0x10FFFF or (cp >= 0xD800 and cp <= 0xDFFF) then return false end
    i = i + len
  end
  return true
end
-- Runs a shell command; returns its output (stdout and stderr) and exit
-- status. (io.popen's close gives the status on 5.2+ only.)
function H.command(cmd)
  local p = io.popen('(' .. cmd .. ') 2>&1; echo "exit status $?"')
  local out = p:read('*a')
  p:close()
  local body, status = out:match('^(.-)exit status (%d+)\n$')
  return body or out, tonumber(status)
end

-- os.execute's success: true on 5.2+, the status 0 on 5.1 and LuaJIT.
function H.succeeded(ok, _, code)
  if type(ok) == 'number' then return ok == 0 end
  return ok == true and (code == nil or code == 0)
end
function H.utf8_char(cp)
  if utf8 and utf8.char then return utf8.char(cp) end
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64) end
  if cp < 0x10000 then
    return string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  return string.char(0xF0 + math.floor(cp / 262144), 0x80 + math.floor(cp / 4096) % 64,
    0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
end

-- A directory as an absolute path.
function H.absolute(dir)
  local p = io.popen('cd ' .. dir .. ' && pwd')
  local out = p:read('*l')
  p:close()
  return out
end

-- The repository, found from this file's own place and made absolute, so
-- that servers started with another cwd (and scripts run from elsewhere)
-- still find things.
local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or '.'
H.ROOT = os.getenv('MCP_ROOT') or H.absolute(here .. '/..')

-- The reference module: lua/mcp.lua, or the file named by MCP_REFERENCE,
-- so the whole comparison can run against a user's own copy. Loaded fresh
-- each time, so a case that mutates mcp.CLIENT_INFO cannot leak.
function H.reference()
  local path = os.getenv('MCP_REFERENCE') or (H.ROOT .. '/lua/mcp.lua')
  return assert(loadfile(path))()
end

-- The native module, also fresh: each load has its own glue.
function H.native()
  local open = assert(package.loadlib(H.ROOT .. '/' .. H.MODULE_FILE, 'luaopen_mcp'))
  return open()
end

H.modules = { reference = H.reference, native = H.native }

-- A registry with the interface agents give mcp.mount: get(name), add(t).
local Registry = {}
Registry.__index = Registry
function H.registry(preset)
  local r = setmetatable({ tools = {}, order = {} }, Registry)
  for _, name in ipairs(preset or {}) do
    r:add({ name = name, description = 'built in', args = {}, run = function() return 'builtin' end })
  end
  return r
end
function Registry:get(name) return self.tools[name] end
function Registry:add(t)
  self.tools[t.name] = t
  self.order[#self.order + 1] = t.name
end

-- The registry as comparable data: everything but `run`, which is a fresh
-- closure in each module and is compared by calling it instead.
function Registry:snapshot()
  local out = {}
  for _, name in ipairs(self.order) do
    local t = self.tools[name]
    out[#out + 1] = {
      name = t.name, description = t.description, args = t.args,
      requires_approval = t.requires_approval, run = type(t.run),
    }
  end
  return out
end

-- Deep copy for snapshots; functions become their type name.
local function copy(v, seen)
  if type(v) == 'function' then return 'function' end
  if type(v) ~= 'table' then return v end
  seen = seen or {}
  if seen[v] then return seen[v] end
  local out = {}
  seen[v] = out
  for k, x in pairs(v) do out[copy(k, seen)] = copy(x, seen) end
  return out
end
H.copy = copy

-- The client's own fields (rawly: methods live in the metatable).
function H.fields(client)
  local out = {}
  for k, v in next, client do out[k] = copy(v) end
  return out
end

-----------------------------------------------------------------------
-- A scripted server behind a fixture transport
-----------------------------------------------------------------------

H.default_tools = {
  { name = 'echo', description = 'Echoes back the input',
    inputSchema = { type = 'object', properties = { message = { type = 'string' } }, required = { 'message' } } },
  { name = 'add', description = 'Adds two numbers',
    inputSchema = { type = 'object', properties = { a = { type = 'number' }, b = { type = 'integer' } }, required = { 'a', 'b' } } },
}

-- Default answers by method. `call` gets the tools/call params.
local function default_call(params)
  local args = params.arguments or {}
  if params.name == 'echo' then
    return { content = { { type = 'text', text = 'Echo: ' .. tostring(args.message) } } }
  end
  return { content = { { type = 'text', text = trace.encode(args) } } }
end

-- spec: tools, call(params, msg) -> result | nil, error_object,
-- init(params) -> result, list() -> result, frame = 'ndjson' | 'sse',
-- reverse = bool, before = { raw lines }, between = { raw lines },
-- drop = { [method] = true }, fail = function(n, text) -> ok, raw, code.
-- Returns transport(text), log: what each module sent, in order.
function H.server(spec)
  spec = spec or {}
  local log = {}
  local function reply(msg)
    local m = msg.method
    if spec.drop and spec.drop[m] then return nil end
    if m == 'initialize' then
      local result = spec.init and spec.init(msg.params) or {
        protocolVersion = '2025-06-18',
        capabilities = { tools = { listChanged = true } },
        serverInfo = { name = 'scripted', version = '1.2.3' },
      }
      return { jsonrpc = '2.0', id = msg.id, result = result }
    elseif m == 'tools/list' then
      local result = spec.list and spec.list(msg.params) or { tools = spec.tools or H.default_tools }
      return { jsonrpc = '2.0', id = msg.id, result = result }
    elseif m == 'tools/call' then
      local result, err = (spec.call or default_call)(msg.params, msg)
      if err then return { jsonrpc = '2.0', id = msg.id, error = err } end
      return { jsonrpc = '2.0', id = msg.id, result = result }
    end
  end
  local function transport(text)
    log[#log + 1] = text
    if spec.fail then
      local ok, raw, code = spec.fail(#log, text)
      if ok ~= nil or raw ~= nil then return ok, raw, code end
    end
    local out = {}
    for _, line in ipairs(spec.before or {}) do out[#out + 1] = line end
    local replies = {}
    for line in text:gmatch('[^\n]+') do
      local msg = trace.decode(line)
      if type(msg) == 'table' and msg.id ~= nil then
        local r = reply(msg)
        if r then replies[#replies + 1] = spec.raw and spec.raw(r) or trace.encode(r) end
      end
    end
    if spec.reverse then
      for i = #replies, 1, -1 do out[#out + 1] = replies[i] end
    else
      for _, r in ipairs(replies) do
        out[#out + 1] = r
        for _, line in ipairs(spec.between or {}) do out[#out + 1] = line end
      end
    end
    if spec.frame == 'sse' then
      for i, line in ipairs(out) do out[i] = 'event: message\nid: ' .. i .. '\ndata: ' .. line .. '\n' end
    end
    return true, table.concat(out, spec.eol or '\n') .. (spec.eol or '\n'), 200
  end
  return transport, log
end

-- The first two of a call's returns (text, is_error), for comparing
-- with the reference's two.
function H.pair(a, b) return a, b end

-- The native call returns a third value the reference does not: the whole
-- result table. Two-value callers never see it; the comparisons leave it
-- out (spec/surface_spec.lua pins what it holds).
function H.without_whole_result(mcp, out)
  if mcp.native and out[1] and out.n == 4 and type(out[2]) == 'string' and type(out[3]) == 'boolean' then
    out[4], out.n = nil, 3
  end
  return out
end

-- Runs `steps(ctx)` through one module and records everything observable:
-- each step's returns or error, the client's fields after it, the
-- registry, and the bytes the transport received.
function H.record(load_module, case)
  local mcp = load_module()
  local transport, log = H.server(case.server)
  local record = { steps = {} }
  local ctx = { mcp = mcp, registry = H.registry(case.builtins), transport = transport }
  function ctx.new(given)
    local opts = {}
    for k, v in pairs(given or {}) do opts[k] = v end
    if opts.transport == nil then opts.transport = transport end
    if opts.transport == false then opts.transport = nil end
    ctx.client = mcp.new(opts)
    return ctx.client
  end
  function ctx.step(label, fn)
    local out = H.without_whole_result(mcp, table.pack(pcall(fn)))
    local entry = { label = label, ok = out[1] }
    if out[1] then
      entry.returns = {}
      for i = 2, out.n do entry.returns[i - 1] = copy(out[i]) end
    else
      entry.error = out[2]
      entry.error_type = type(out[2])
    end
    entry.fields = ctx.client and H.fields(ctx.client) or nil
    entry.registry = ctx.registry:snapshot()
    record.steps[#record.steps + 1] = entry
    return H.unpack(out, 2, out.n)
  end
  case.run(ctx)
  record.sent = log
  return record
end

-----------------------------------------------------------------------
-- Processes
-----------------------------------------------------------------------

function H.alive(pid)
  return H.succeeded(os.execute(string.format('kill -0 %d 2>/dev/null', pid)))
end

-- Polls until `pid` is gone or `seconds` pass; true when it is gone.
function H.gone_within(pid, seconds)
  local deadline = os.time() + seconds
  repeat
    if not H.alive(pid) then return true end
    os.execute('sleep 0.05')
  until os.time() > deadline
  return not H.alive(pid)
end

-- The reference's helper does this already.
H.slurp = require('tmpfile').slurp

-----------------------------------------------------------------------
-- Servers
-----------------------------------------------------------------------

H.EVERYTHING = H.ROOT .. '/spec/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js'

-- server-everything over stdio, started with node directly (npx would add
-- a second or more to every spawn).
function H.everything_argv()
  return { 'node', H.EVERYTHING, 'stdio' }
end

function H.faulty(mode)
  return { H.LUA, H.ROOT .. '/spec/servers/faulty.lua', mode }
end

function H.faulty_line(mode)
  return H.LUA .. ' ' .. H.ROOT .. '/spec/servers/faulty.lua ' .. mode
end

H.COUNTER = H.LUA .. ' ' .. H.ROOT .. '/lua/servers/counter.lua'

-- server-everything in streamableHttp mode on 127.0.0.1 (a --require
-- preload keeps it off other interfaces): its /mcp URL and a stop function.
-- With `connection_log`, the server writes a line there for every
-- connection it accepts.
function H.everything_http(connection_log)
  local port = H.port()
  local env = connection_log and ('CONNECTION_LOG=' .. connection_log .. ' ') or ''
  local _, stop = H.start(env .. 'PORT=' .. port .. ' node --require ' .. H.ROOT .. '/spec/servers/loopback.cjs '
    .. H.EVERYTHING .. ' streamableHttp', 'listening on port')
  return 'http://127.0.0.1:' .. port .. '/mcp', stop
end

-- spec/servers/http_faults.js, the specs' own HTTP server (its misbehaving
-- MCP servers, the MCP server behind OAuth and the SDK's /host-check, by
-- path), on a free port: its base URL, a stop function and the port. With
-- `tls` ({ cert = PEM file, key = PEM file }) it speaks HTTPS.
function H.fault_server(tls)
  local port = H.port()
  local certificate = tls and (' ' .. tls.cert .. ' ' .. tls.key) or ''
  local _, stop = H.start('node ' .. H.ROOT .. '/spec/servers/http_faults.js ' .. port .. certificate, 'listening on')
  return (tls and 'https' or 'http') .. '://127.0.0.1:' .. port, stop, port
end

-- GET url with curl (never our client), decoded as JSON: what a spec reads
-- back from its own servers. (Through node's fetch each read started a
-- node process, about 0.15 s of processor time; oauth_spec reads 58
-- times, in each runtime's pass.)
function H.get_json(url)
  local p = io.popen("curl -s --max-time 10 '" .. url:gsub("'", '') .. "'")
  local text = p:read('*a')
  p:close()
  return assert(require('trace').decode(text), 'not JSON from ' .. url .. ': ' .. tostring(text))
end

-- The bundled server that works on many requests at once (luv). With a
-- `cancel_log` path, it writes every cancellation it hears there.
function H.sleepy(cancel_log)
  return { command = { H.LUA, H.ROOT .. '/lua/servers/sleepy.lua' }, env = { CANCEL_LOG = cancel_log } }
end

-- For the benchmarks that compare builds: the middle of a list of figures,
-- and a directory of its own holding the build at `so` as mcp.so, to put
-- on a child's package.cpath.
function H.median(xs)
  local s = {}
  for i, x in ipairs(xs) do s[i] = x end
  table.sort(s)
  return s[math.floor((#s + 1) / 2)]
end

function H.module_dir(so)
  local dir = H.tmpname()
  assert(H.succeeded(os.execute(string.format('mkdir -p %s && cp %s %s/mcp.so', dir, so, dir))), 'cannot copy ' .. so)
  return dir
end

function H.tmpname()
  local name = os.tmpname()
  os.remove(name)
  return name
end

-- Runs a Lua snippet in a separate process of the suite's interpreter
-- (H.LUA), for what must not
-- happen to the test runner itself: a signal, a state close, an exit) and
-- returns its stdout and exit status. The process gets 60 s: a hang ends
-- it with status 124 rather than hanging the suite.
function H.run_lua(source)
  local path = H.tmpname() .. '.lua'
  local f = assert(io.open(path, 'w'))
  f:write('package.cpath = ' .. string.format('%q', H.ROOT .. '/?.so;') .. ' .. package.cpath\n')
  f:write(string.format("assert(io.open(%q), 'mcp.so not built')\n", H.ROOT .. '/mcp.so'))
  -- Only the native module is on the path: `require('mcp')` must not find
  -- the reference.
  f:write(source)
  f:close()
  local out, status = H.command('cd ' .. H.ROOT .. ' && timeout 60 ' .. H.LUA .. ' ' .. path)
  os.remove(path)
  return out, status
end

-- Runs, in a process of its own, one `client:call(tool, {})` that receives
-- SIGINT 0.5 s after it starts, as Ctrl-C in lua5.4 would deliver it.
-- `opts` is the Lua source of mcp.new's options, `before` Lua source run
-- with the client `c` first (or nil). Returns the seconds the call took,
-- what it raised, and the process's output and exit status.
function H.interrupted_call(opts, tool, before)
  local out, status = H.run_lua(string.format([[
    local mcp = require('mcp')
    local f = io.open('/proc/self/stat')
    local self_pid = f:read('*n')
    f:close()
    local c = mcp.new(%s)
    %s
    os.execute(string.format('(sleep 0.5; kill -INT %%d) &', self_pid))
    local t0 = mcp.clock()
    local ok, err = pcall(c.call, c, %q, {})
    print(string.format('returned after %%.2f s: %%s %%s', mcp.clock() - t0, tostring(ok), tostring(err)))
    -- time for the server to record the cancellation
    os.execute('sleep 0.3')
    c:close()
  ]], opts, before or '', tool))
  return tonumber(out:match('returned after (%S+) s')), out:match(' s: false ([^\n]*)'), out, status
end

-- Starts a background server and waits for `ready` (a Lua pattern) in its
-- output. Returns its pid and a stop function.
function H.start(command, ready, seconds)
  local log = H.tmpname()
  local p = io.popen(command .. ' > ' .. log .. ' 2>&1 & echo $!')
  local pid = H.int(tonumber(p:read('*l')))
  p:close()
  local deadline = os.time() + (seconds or 15)
  local out = ''
  repeat
    out = H.slurp(log) or ''
    if out:find(ready) then break end
    os.execute('sleep 0.05')
  until os.time() > deadline
  assert(out:find(ready), 'server did not start: ' .. command .. '\n' .. out)
  local function stop()
    os.execute('kill ' .. pid .. ' 2>/dev/null')
    os.remove(log)
  end
  return pid, stop, out
end

-- A private CA and a certificate it signed for 127.0.0.1, made with
-- openssl in a fresh directory. Returns the directory.
function H.make_certificates()
  local dir = H.tmpname()
  local steps = {
    'mkdir -p ' .. dir,
    'cd ' .. dir .. ' && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=lua-mcp-test-ca'
      .. ' -keyout ca.key -out ca.pem',
    'cd ' .. dir .. ' && openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key -out server.csr',
    'cd ' .. dir .. " && printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > ext.cnf"
      .. ' && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2'
      .. ' -extfile ext.cnf -out server.pem',
  }
  for _, step in ipairs(steps) do
    assert(H.succeeded(os.execute(step .. ' >/dev/null 2>&1')), 'failed: ' .. step)
  end
  return dir
end

-- A port for a test server, free when asked: the kernel's choice, so that
-- the passes of two runtimes, which run side by side, never pick the same.
function H.port()
  local p = io.popen([[python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])']])
  local port = tonumber(p:read('*l'))
  p:close()
  return assert(port, 'no free port')
end

return H
