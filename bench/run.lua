-- run.lua - lua-mcp against every alternative, side by side, in one run.
--
--   make bench        (builds what it needs, then runs this)
--
-- Prints a table and writes bench/results/latest.json. Every figure is a
-- median with its spread (25th-75th percentile, or min-max over repeated
-- process runs where noted). Nothing here is asserted: targets are read
-- off the table.
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
package.path = here .. '/../lua/?.lua;' .. here .. '/../spec/?.lua;' .. package.path
local H = require('helpers')
local root = H.absolute(here .. '/..')
local native = assert(package.loadlib(root .. '/mcp.so', 'luaopen_mcp'))()
local trace = require('trace')
local clock = native.clock

local QUICK = os.getenv('BENCH_QUICK') ~= nil
local function reps(n) return QUICK and math.max(1, n // 10) or n end

local ECHO = root .. '/target/bench/echo_server'
local EVERYTHING = { 'node', H.EVERYTHING, 'stdio' }
local function shell_line(argv) return table.concat(argv, ' ') end

-- statistics -------------------------------------------------------------
local function summary(xs)
  local s = {}
  for i, x in ipairs(xs) do s[i] = x end
  table.sort(s)
  local function q(p) return s[math.max(1, math.min(#s, math.floor(p * (#s - 1) + 1.5)))] end
  return { median = q(0.5), p25 = q(0.25), p75 = q(0.75), min = s[1], max = s[#s], n = #s }
end

local rows, results = {}, {}
local function record(section, name, unit, xs, note)
  local s = summary(xs)
  rows[#rows + 1] = { section = section, name = name, unit = unit, s = s, note = note }
  results[#results + 1] = { section = section, name = name, unit = unit, median = s.median,
    p25 = s.p25, p75 = s.p75, min = s.min, max = s.max, samples = s.n, note = note }
  io.stderr:write(string.format('  %-58s %12.3f %s\n', section .. ' / ' .. name, s.median, unit))
  return s.median
end

local function run_cmd(cmd)
  local p = io.popen(cmd)
  local out = p:read('*a')
  p:close()
  return out
end

local function vm_hwm_kb()
  local f = io.open('/proc/self/status')
  local s = f:read('*a')
  f:close()
  return tonumber(s:match('VmHWM:%s*(%d+)'))
end

-- per-call latency ---------------------------------------------------------
local function lua_calls(module, opts, tool, args, n)
  local client = module.new(opts)
  client:discover()
  local xs = {}
  for i = 1, n do
    local t0 = clock()
    client:call(tool, args)
    xs[i] = (clock() - t0) * 1e6
  end
  if client.close then client:close() end
  return xs
end

-- The SDK clients take the same arguments and write the same report:
-- the TypeScript SDK (bench/ts_client.mjs, on node) and rmcp, the Rust
-- SDK (bench/rmcp_client, built by `make bench`).
local SDK_CLIENTS = {
  ts = 'node ' .. root .. '/bench/ts_client.mjs',
  rmcp = root .. '/target/bench/rmcp/release/rmcp-bench-client',
}
local function sdk(which, prefix, mode, target, tool, args, n)
  local out_file = os.tmpname()
  local cmd = string.format("%s%s %s '%s' %s '%s' %d %s 2>&1", prefix, SDK_CLIENTS[which], mode,
    mode == 'stdio' and trace.encode(target) or target, tool, trace.encode(args), n, out_file)
  local said = run_cmd(cmd)
  local out = assert(trace.decode(H.slurp(out_file) or ''), 'the ' .. which .. ' client failed: ' .. cmd .. '\n' .. said)
  os.remove(out_file)
  return out
end
local function ts(mode, target, tool, args, n) return sdk('ts', '', mode, target, tool, args, n) end

local reference = H.reference()

local function per_call(section, server_argv, tool, args, counts)
  local floor_rate = {}
  local xs = lua_calls(native, { command = server_argv }, tool, args, reps(counts.native))
  local m = record(section, 'native', 'us/call', xs)
  floor_rate.native = m
  xs = lua_calls(reference, { command = shell_line(server_argv) }, tool, args, reps(counts.pure))
  floor_rate.pure = record(section, 'pure-Lua reference', 'us/call', xs)
  local out = ts('stdio', server_argv, tool, args, reps(counts.ts))
  floor_rate.ts = record(section, 'TypeScript SDK', 'us/call', out.calls_us)
  out = sdk('rmcp', '', 'stdio', server_argv, tool, args, reps(counts.ts))
  floor_rate.rmcp = record(section, 'rmcp (Rust SDK)', 'us/call', out.calls_us)
  return floor_rate
end

io.stderr:write('stdio, per call\n')
local c_echo = per_call('stdio per call, minimal C server', { ECHO }, 'echo', {}, { native = 5000, pure = 100, ts = 5000 })
local everything = per_call('stdio per call, server-everything echo', EVERYTHING, 'echo', { message = 'hi' },
  { native = 2000, pure = 10, ts = 2000 })

-- the floor ------------------------------------------------------------------
io.stderr:write('pipe floor\n')
local floor = {}
for i = 1, reps(5) do
  floor[i] = tonumber(run_cmd(root .. '/target/bench/pipe_rtt 20000'):match('^(%S+)'))
end
local floor_us = record('floor', 'raw pipe round trip between two processes', 'us', floor)

-- placed races ----------------------------------------------------------------
-- On a small VM a thread wake-up costs ~3 us on the same CPU and 20-150 us
-- on the other, and the scheduler moves between the two regimes from run
-- to run, so unpinned per-call figures move by 4x. Each regime is measured
-- on its own, with its own pipe floor, in this run: everything on CPU 0,
-- then the client on CPU 0 and the server on CPU 1.
io.stderr:write('placed races\n')
local function first_number(text) return tonumber(text:match('^(%S+)')) end
local cpus = tonumber(run_cmd('nproc'):match('%d+')) or 1
local placed = {}
for _, place in ipairs({ { 'one CPU', '0 0', {} }, { 'split CPUs', '0 1', { 'taskset', '-c', '1' } } }) do
  local name, floor_cpus, server_prefix = place[1], place[2], place[3]
  if name == 'split CPUs' and cpus < 2 then break end
  local server = { table.unpack(server_prefix) }
  server[#server + 1] = ECHO
  local section = 'stdio per call, C server, ' .. name
  local xs = {}
  for i = 1, reps(5) do xs[i] = first_number(run_cmd(root .. '/target/bench/pipe_rtt 20000 ' .. floor_cpus)) end
  local r = { floor = record(section, 'raw pipe round trip (floor)', 'us', xs) }
  xs = {}
  for i = 1, reps(5) do
    xs[i] = first_number(run_cmd('taskset -c 0 lua5.4 ' .. root .. '/bench/race.lua ' .. reps(5000) .. ' '
      .. table.concat(server, ' ')))
  end
  r.native = record(section, 'native', 'us/call', xs)
  local out = sdk('ts', 'taskset -c 0 ', 'stdio', server, 'echo', {}, reps(5000))
  r.ts = record(section, 'TypeScript SDK', 'us/call', out.calls_us)
  out = sdk('rmcp', 'taskset -c 0 ', 'stdio', server, 'echo', {}, reps(5000))
  r.rmcp = record(section, 'rmcp (Rust SDK)', 'us/call', out.calls_us)
  placed[name] = r
end

-- server-everything placed: node's own work (~45 us a call) dwarfs a
-- client's, and unpinned its scheduling moves the medians by 20% from
-- run to run, so the clients are compared with the server on CPU 1 and
-- the client on CPU 0, in alternating rounds, a median per round.
local everything_split = { native = {}, ts = {}, rmcp = {} }
do
  local server = { 'taskset', '-c', '1', table.unpack(EVERYTHING) }
  for i = 1, reps(5) do
    everything_split.native[i] = first_number(run_cmd('RACE_MESSAGE=hi taskset -c 0 lua5.4 ' .. root
      .. '/bench/race.lua ' .. reps(2000) .. ' ' .. table.concat(server, ' ')))
    for _, which in ipairs({ 'rmcp', 'ts' }) do
      local out = sdk(which, 'taskset -c 0 ', 'stdio', server, 'echo', { message = 'hi' }, reps(2000))
      everything_split[which][i] = summary(out.calls_us).median
    end
  end
  local section = 'stdio per call, server-everything echo, split CPUs (median of round medians)'
  everything_split.native = record(section, 'native', 'us/call', everything_split.native)
  everything_split.ts = record(section, 'TypeScript SDK', 'us/call', everything_split.ts)
  everything_split.rmcp = record(section, 'rmcp (Rust SDK)', 'us/call', everything_split.rmcp)
end

-- many in flight ---------------------------------------------------------------
io.stderr:write('ten parallel calls\n')
local parallel = {}
do
  local client = native.new({ command = { 'lua5.4', root .. '/lua/servers/sleepy.lua' } })
  client:discover()
  for i = 1, reps(20) do
    local t0 = clock()
    local handles = {}
    for j = 1, 10 do handles[j] = client:call_async('sleep', { ms = 100 }) end
    assert(native.wait_all(handles, 10))
    parallel[i] = (clock() - t0) * 1e3
  end
  client:close()
end
local parallel_ms = record('ten 100 ms tool calls in flight at once', 'native (call_async, wait_all)', 'ms', parallel)

-- HTTP -----------------------------------------------------------------------
-- Each server measured with its own keep-alive floor in this run:
-- bench/http_rtt, a C client that reuses one connection and does nothing
-- with a reply but read it to its end. The minimal C server is measured in
-- both placements, as the stdio races are; server-everything (node, which
-- runs threads of its own) unpinned.
io.stderr:write('HTTP\n')
local HTTP_ECHO = root .. '/target/bench/http_echo_server'
local HTTP_RTT = root .. '/target/bench/http_rtt'
local function http_floor(port, path, prefix)
  local xs = {}
  for i = 1, reps(5) do
    xs[i] = first_number(run_cmd(prefix .. HTTP_RTT .. ' ' .. port .. ' ' .. path .. ' ' .. reps(5000)))
  end
  return xs
end
local function count_lines(path)
  local _, n = (H.slurp(path) or ''):gsub('\n', '')
  return n
end
local function sdk_calls(which, prefix, url, args, n)
  return sdk(which, prefix, 'http', url, 'echo', args, n).calls_us
end

-- Starts `command PORT` on a port of 38000-39999, another when it cannot
-- bind one: that range lies in Linux's ephemeral ports, so a connection of
-- the run (an SDK's, a peer's) may hold the one drawn ("Address already in
-- use" once ended a run here).
-- With `answers`, a server is kept only once a keep-alive POST gets an
-- answer: server-everything has said it was listening and then refused
-- the floor's connections (two runs in four, 2026-12-07).
local function start_on_a_free_port(command, ready, answers)
  for _ = 1, 8 do
    local port = 38000 + math.random(0, 1999)
    local ok, _, stop = pcall(H.start, command(port), ready)
    if ok and answers and not answers(port) then
      io.stderr:write('no answer on port ' .. port .. ' after "' .. ready .. '": trying another\n')
      stop()
      ok = false
    end
    if ok then return port, stop end
  end
  error('no port of 38000-39999 could be bound for: ' .. command('PORT'))
end

local function answers_a_post(port)
  for _ = 1, 20 do
    if os.execute(HTTP_RTT .. ' ' .. port .. ' /mcp 1 >/dev/null 2>&1') then return true end
    os.execute('sleep 0.1')
  end
  return false
end

local http_placed = {}
for _, place in ipairs({ { 'one CPU', 'taskset -c 0 ' }, { 'split CPUs', 'taskset -c 1 ' } }) do
  local name, server_prefix = place[1], place[2]
  if name == 'split CPUs' and cpus < 2 then break end
  local port, stop = start_on_a_free_port(function(p) return server_prefix .. HTTP_ECHO .. ' ' .. p end, 'listening on')
  local url = 'http://127.0.0.1:' .. port .. '/mcp'
  local section = 'HTTP per call, minimal C server, ' .. name
  local r = { floor = record(section, 'keep-alive round trip (floor)', 'us', http_floor(port, '/mcp', 'taskset -c 0 ')) }
  local xs = {}
  for i = 1, reps(5) do
    xs[i] = first_number(run_cmd('taskset -c 0 lua5.4 ' .. root .. '/bench/race.lua ' .. reps(5000) .. ' ' .. url))
  end
  r.native = record(section, 'native', 'us/call', xs)
  r.ts = record(section, 'TypeScript SDK', 'us/call', sdk_calls('ts', 'taskset -c 0 ', url, {}, reps(5000)))
  r.rmcp = record(section, 'rmcp (Rust SDK)', 'us/call', sdk_calls('rmcp', 'taskset -c 0 ', url, {}, reps(5000)))
  stop()
  http_placed[name] = r
end

local connection_log = os.tmpname()
local port, stop_http = start_on_a_free_port(function(p)
  return 'CONNECTION_LOG=' .. connection_log .. ' PORT=' .. p .. ' node --require '
    .. root .. '/spec/servers/loopback.cjs ' .. H.EVERYTHING .. ' streamableHttp'
end, 'listening on port', answers_a_post)
local url = 'http://127.0.0.1:' .. port .. '/mcp'
local http = {}
local section = 'HTTP per call, server-everything echo'
http.floor = record(section, 'keep-alive round trip (floor)', 'us', http_floor(port, '/mcp', ''))
local connections_before = count_lines(connection_log)
http.native = record(section, 'native', 'us/call', lua_calls(native, { url = url }, 'echo', { message = 'hi' }, reps(2000)))
-- The native client's session: its handshake, discover and every call.
http.connections = count_lines(connection_log) - connections_before
record(section, 'native: connections opened for discover + ' .. reps(2000) .. ' calls (and the session\'s DELETE)',
  'connections', { http.connections })
if os.execute('command -v curl >/dev/null') then
  http.pure = record(section, 'pure-Lua reference (curl)', 'us/call',
    lua_calls(reference, { url = url }, 'echo', { message = 'hi' }, reps(100)))
end
http.ts = record(section, 'TypeScript SDK', 'us/call', sdk_calls('ts', '', url, { message = 'hi' }, reps(2000)))
http.rmcp = record(section, 'rmcp (Rust SDK)', 'us/call', sdk_calls('rmcp', '', url, { message = 'hi' }, reps(2000)))
os.remove(connection_log)

-- time to the tool list --------------------------------------------------------
io.stderr:write('time to the tool list\n')
local function to_list(module, opts, n)
  local xs = {}
  for i = 1, n do
    local t0 = clock()
    local c = module.new(opts)
    c:discover()
    xs[i] = (clock() - t0) * 1e3
    if c.close then c:close() end
  end
  return xs
end
record('mcp.new to tool list', 'native, stdio server-everything', 'ms', to_list(native, { command = EVERYTHING }, reps(10)))
record('mcp.new to tool list', 'pure-Lua, stdio server-everything', 'ms', to_list(reference, { command = shell_line(EVERYTHING) }, reps(10)))
do
  local xs = {}
  for i = 1, reps(10) do
    local o = ts('stdio', EVERYTHING, 'echo', { message = 'hi' }, 0)
    xs[i] = o.connect_ms + o.list_ms
  end
  record('mcp.new to tool list', 'TypeScript SDK, stdio server-everything', 'ms', xs)
end
record('mcp.new to tool list', 'native, HTTP server-everything', 'ms', to_list(native, { url = url }, reps(20)))
if http.pure then
  record('mcp.new to tool list', 'pure-Lua (curl), HTTP server-everything', 'ms', to_list(reference, { url = url }, reps(20)))
end
stop_http()

-- whole processes ----------------------------------------------------------------
io.stderr:write('whole processes\n')
local function process_script(which, with_rss)
  local load = which == 'native'
    and string.format('local mcp = assert(package.loadlib(%q, "luaopen_mcp"))()', root .. '/mcp.so')
    or string.format('package.path = %q .. package.path; local mcp = dofile(%q)', root .. '/lua/?.lua;', root .. '/lua/mcp.lua')
  local command = which == 'native' and trace.encode(EVERYTHING):gsub('^%[', '{'):gsub('%]$', '}')
    or string.format('%q', shell_line(EVERYTHING))
  return load .. '\n' .. 'local c = mcp.new({ command = ' .. command .. ' })\n'
    .. 'c:discover()\nfor i = 1, 10 do c:call("echo", { message = "hi" }) end\n'
    .. (with_rss and 'local f = io.open("/proc/self/status"); print(f:read("*a"):match("VmHWM:%s*(%d+)"))\n' or '')
end
local function time_process(source, n)
  local path = os.tmpname() .. '.lua'
  local f = io.open(path, 'w')
  f:write(source)
  f:close()
  local xs, rss = {}, {}
  for i = 1, n do
    local t0 = clock()
    rss[i] = tonumber(run_cmd('lua5.4 ' .. path))
    xs[i] = (clock() - t0) * 1e3
  end
  os.remove(path)
  return xs, rss
end
local nat_ms, nat_rss = time_process(process_script('native', true), reps(5))
record('a process: discover + 10 calls, stdio server-everything', 'native', 'ms', nat_ms, 'min-max over processes')
local pure_ms, pure_rss = time_process(process_script('pure', true), QUICK and 1 or 3)
record('a process: discover + 10 calls, stdio server-everything', 'pure-Lua reference', 'ms', pure_ms, 'min-max over processes')
do
  local xs = {}
  for i = 1, reps(5) do
    local t0 = clock()
    run_cmd(string.format("node %s/bench/ts_client.mjs stdio '%s' echo '{\"message\":\"hi\"}' 10 /dev/null", root, trace.encode(EVERYTHING)))
    xs[i] = (clock() - t0) * 1e3
  end
  record('a process: discover + 10 calls, stdio server-everything', 'TypeScript SDK (node)', 'ms', xs, 'min-max over processes')
end
record('Lua host peak RSS (VmHWM), discover + 10 calls', 'native', 'MB', (function()
  local t = {} for i, v in ipairs(nat_rss) do t[i] = v / 1024 end return t end)())
record('Lua host peak RSS (VmHWM), discover + 10 calls', 'pure-Lua reference', 'MB', (function()
  local t = {} for i, v in ipairs(pure_rss) do t[i] = v / 1024 end return t end)())

-- large results ----------------------------------------------------------------
io.stderr:write('large results\n')
local function large(which, bytes)
  local load = which == 'native'
    and string.format('local mcp = assert(package.loadlib(%q, "luaopen_mcp"))()', root .. '/mcp.so')
    or string.format('package.path = %q .. package.path; local mcp = dofile(%q)', root .. '/lua/?.lua;', root .. '/lua/mcp.lua')
  local clock_src = string.format('local clock = assert(package.loadlib(%q, "luaopen_mcp"))().clock', root .. '/mcp.so')
  local source = load .. '\n' .. clock_src .. '\n'
    .. string.format('local c = mcp.new({ command = %q })\n', ECHO)
    .. 'c:discover()\nlocal t0 = clock()\n'
    .. string.format('local text = c:call("echo", { bytes = %d })\n', bytes)
    .. 'local took = clock() - t0\nassert(#text == ' .. bytes .. ')\n'
    .. 'local f = io.open("/proc/self/status"); print(took * 1000, f:read("*a"):match("VmHWM:%s*(%d+)"))\n'
  local path = os.tmpname() .. '.lua'
  local f = io.open(path, 'w')
  f:write(source)
  f:close()
  local ms, rss = {}, {}
  for i = 1, reps(5) do
    local a, b = run_cmd('lua5.4 ' .. path):match('(%S+)%s+(%S+)')
    ms[i], rss[i] = tonumber(a), tonumber(b) / 1024
  end
  os.remove(path)
  return ms, rss
end
for _, mb in ipairs({ 1, 10, 50 }) do
  for _, which in ipairs({ 'native', 'pure' }) do
    local ms, rss = large(which, mb * 1000 * 1000)
    local label = which == 'native' and 'native' or 'pure-Lua reference'
    record(string.format('a %d MB tool result through call', mb), label .. ', time', 'ms', ms)
    record(string.format('a %d MB tool result through call', mb), label .. ', peak RSS', 'MB', rss)
  end
end

-- the codec: large replies and arguments (bench/codec.lua) --------------------------
io.stderr:write('codec\n')
local codec_rows = dofile(here .. '/codec.lua').run({ native = native, reference = reference, clock = clock,
  reps = reps(9), sizes = { 1, 10 }, record = record })
-- Allocations per small call, counted by tests/allocations.rs (the
-- Makefile's bench target runs it first and keeps its line).
local allocations = H.slurp(root .. '/target/bench/allocations.txt') or ''
local by_client, by_lua = allocations:match('([%d.]+) by the client, ([%d.]+) by Lua')
if by_client then
  record('allocations per small call (stdio, counter.lua)', 'native, by the client', 'allocations', { tonumber(by_client) })
  record('allocations per small call (stdio, counter.lua)', 'native, by Lua', 'allocations', { tonumber(by_lua) })
end

-- The module's bytes: the build `make build` made, stripped (as `make dist`
-- strips) and gzipped (as a download travels); and what `make dist` left in
-- dist/, when it has run (its modules are stripped already).
local function bytes_of(path) return #(H.slurp(path) or '') end
local stripped = os.tmpname()
if os.execute(('strip -o %s %s/mcp.so'):format(stripped, root)) then
  record('module bytes (make build, this machine)', 'stripped', 'bytes', { bytes_of(stripped) })
  local gzipped = tonumber(run_cmd(('gzip -9c %s | wc -c'):format(stripped)))
  record('module bytes (make build, this machine)', 'stripped, gzipped', 'bytes', { gzipped })
end
os.remove(stripped)
for name in run_cmd('ls ' .. root .. '/dist 2>/dev/null'):gmatch('[^\n]+') do
  if name:match('%.so$') or name:match('%.dll$') or name:match('%.rock$') then
    record('module bytes (make dist)', name, 'bytes', { bytes_of(root .. '/dist/' .. name) })
  end
end

-- ratios -----------------------------------------------------------------------------
local ratios = {}
for _, name in ipairs({ 'one CPU', 'split CPUs' }) do
  local r = placed[name]
  if r then
    ratios[#ratios + 1] = { 'native per call / pipe floor, ' .. name, r.native / r.floor,
      name == 'one CPU' and 'target <= 2.0' or '' }
    ratios[#ratios + 1] = { 'TS SDK / native per call, ' .. name, r.ts / r.native, 'target >= 3' }
    ratios[#ratios + 1] = { 'rmcp / native per call, ' .. name, r.rmcp / r.native, 'target > 1' }
  end
end
ratios[#ratios + 1] = { 'ten parallel 100 ms calls / one call', parallel_ms / 100, 'target < 1.5' }
for _, r in ipairs({
  { 'native per call / raw pipe round trip (C server)', c_echo.native / floor_us, 'target <= 3' },
  { 'TS SDK / native per call (C server)', c_echo.ts / c_echo.native, 'target >= 4' },
  { 'pure / native per call (C server)', c_echo.pure / c_echo.native, '' },
  { 'TS SDK / native per call (server-everything)', everything.ts / everything.native, 'target > 1' },
  { 'pure / native per call (server-everything)', everything.pure / everything.native, '' },
  { 'native per call / keep-alive floor (HTTP, server-everything)', http.native / http.floor, '' },
  { 'TS SDK / native per call (HTTP, server-everything)', http.ts / http.native, 'target >= 4' },
  { 'rmcp / native per call (server-everything)', everything.rmcp / everything.native, 'target > 1' },
  { 'rmcp / native per call (server-everything, split CPUs)', everything_split.rmcp / everything_split.native,
    'target > 1' },
  { 'TS SDK / native per call (server-everything, split CPUs)', everything_split.ts / everything_split.native, '' },
  { 'rmcp / native per call (HTTP, server-everything)', http.rmcp / http.native, 'target > 1' },
}) do ratios[#ratios + 1] = r end
for _, name in ipairs({ 'one CPU', 'split CPUs' }) do
  local r = http_placed[name]
  if r then
    ratios[#ratios + 1] = { 'native per call / keep-alive floor (HTTP, C server), ' .. name, r.native / r.floor,
      'target <= 2' }
    ratios[#ratios + 1] = { 'TS SDK / native per call (HTTP, C server), ' .. name, r.ts / r.native, '' }
    ratios[#ratios + 1] = { 'rmcp / native per call (HTTP, C server), ' .. name, r.rmcp / r.native, 'target > 1' }
  end
end
if http.pure then ratios[#ratios + 1] = { 'pure / native per call (HTTP)', http.pure / http.native, 'target >= 5' } end
for _, r in ipairs(codec_rows) do
  ratios[#ratios + 1] = { 'pure / native, ' .. r[1], r[4], r[1] == 'discover: a 1 MB tool list' and 'target >= 20' or '' }
end

-- output -----------------------------------------------------------------------------
local out = {}
out[#out + 1] = '| section | client | median | spread (p25-p75) | unit |'
out[#out + 1] = '|---|---|---:|---|---|'
local function fmt(x)
  if x >= 100 then return string.format('%.0f', x) end
  if x >= 10 then return string.format('%.1f', x) end
  return string.format('%.2f', x)
end
for _, r in ipairs(rows) do
  local spread = r.note and string.format('%s-%s (min-max)', fmt(r.s.min), fmt(r.s.max))
    or string.format('%s-%s', fmt(r.s.p25), fmt(r.s.p75))
  out[#out + 1] = string.format('| %s | %s | %s | %s | %s |', r.section, r.name, fmt(r.s.median), spread, r.unit)
end
out[#out + 1] = ''
out[#out + 1] = '| ratio | value | |'
out[#out + 1] = '|---|---:|---|'
for _, r in ipairs(ratios) do
  out[#out + 1] = string.format('| %s | %.1f | %s |', r[1], r[2], r[3])
end
local calls_per_s = {}
for _, r in ipairs(rows) do
  if r.unit == 'us/call' then
    calls_per_s[#calls_per_s + 1] = string.format('%s / %s: %.0f calls/s', r.section, r.name, 1e6 / r.s.median)
  end
end
print(table.concat(out, '\n'))
print('\ncalls per second (1 / median):\n  ' .. table.concat(calls_per_s, '\n  '))

os.execute('mkdir -p ' .. root .. '/bench/results')
local f = assert(io.open(root .. '/bench/results/latest.json', 'w'))
local ratio_out = {}
for i, r in ipairs(ratios) do ratio_out[i] = { name = r[1], value = r[2], target = r[3] } end
f:write(trace.encode({ date = os.date('!%Y-%m-%dT%H:%M:%SZ'), results = results, ratios = ratio_out }), '\n')
f:close()
