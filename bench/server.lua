-- server.lua [CALLS] [ROUNDS] - a trivial tool (`echo`) called CALLS times
-- by this module's client, over stdio and over Streamable HTTP, against a
-- server on mcp.server (bench/servers/lua_echo.lua, its handler in Lua),
-- the TypeScript SDK's (v1), the Python SDK's (2.3) and rmcp's (3.11)
-- servers, and the C echo server as the stdio floor; for each placement
-- (client and server on one CPU; on two), the median per call in
-- microseconds of each round's median, and its multiple of the Lua
-- server's. Rounds alternate the servers, so a drift of the machine lands
-- on all of them. Needs `make build` (or MCP_SO), `make test` once for
-- the SDK peers, and `make bench` for the C server and rmcp's.
local root = (arg[0]:match('^(.*)/bench/[^/]*$') or '.')
-- Absolute: the races run from /tmp (a Python server started in the
-- checkout would import ./mcp.so as its `mcp` package).
if root:sub(1, 1) ~= '/' then root = os.getenv('PWD') .. '/' .. root end
local calls = tonumber(arg[1]) or 10000
local rounds = tonumber(arg[2]) or 3

local peers = root .. '/spec/peers'
-- rmcp's server as `make bench` builds it, optimised (the suite's own is
-- not, see spec/peers/rmcp_tasks/Cargo.toml).
local rmcp = root .. '/target/bench/rmcp/release/rmcp-tasks-peer'
-- Each: its name, its stdio command, and the shell command that serves it
-- over HTTP (printing `listening PORT`).
local servers = {
  { 'lua (mcp.server)', 'lua5.4 ' .. root .. '/bench/servers/lua_echo.lua',
    'exec lua5.4 ' .. root .. '/bench/servers/lua_echo.lua --http' },
  { 'typescript sdk', 'node ' .. peers .. '/echo_server.mjs', 'exec node ' .. peers .. '/echo_server.mjs http 0' },
  { 'python sdk', peers .. '/python/bin/python ' .. peers .. '/echo_server.py',
    'cd ' .. peers .. ' && exec python/bin/python echo_server.py http 0' },
}
if io.open(rmcp) then table.insert(servers, { 'rmcp', nil, 'exec ' .. rmcp .. ' --http 0' }) end
local floor = root .. '/target/bench/echo_server'
if io.open(floor) then table.insert(servers, 1, { 'C echo server (floor)', floor }) end

-- One race: bench/race.lua pinned as the placement says, its median.
local function race(placement, command)
  local client, server = placement[2], placement[3]
  -- The server inherits the client's CPU unless told otherwise: a
  -- wrapper pins it.
  local pinned = server == client and command or ('taskset -c ' .. server .. ' ' .. command)
  local p = io.popen(string.format('cd /tmp && taskset -c %s lua5.4 %s/bench/race.lua %d %s', client, root, calls, pinned))
  local out = p:read('*a')
  p:close()
  return tonumber(out:match('^(%S+)'))
end

-- An HTTP server started on the placement's server CPU: its URL and a
-- stop function.
local function http_server(placement, command)
  local log = os.tmpname()
  local p = io.popen(string.format('taskset -c %s sh -c %q > %s 2>&1 & echo $!', placement[3], command, log))
  local pid = p:read('*l')
  p:close()
  local port
  for _ = 1, 400 do
    local f = io.open(log)
    local said = f and f:read('*a') or ''
    -- `listening PORT`, or rmcp's `listening on http://127.0.0.1:PORT/mcp`
    port = said:match('listening (%d+)') or said:match('listening on http://[^:]+:(%d+)')
    if f then f:close() end
    if port then break end
    os.execute('sleep 0.05')
  end
  return port and ('http://127.0.0.1:' .. port .. '/mcp'), function()
    os.execute('kill ' .. pid .. ' 2>/dev/null')
    os.remove(log)
  end
end

local function http_race(placement, s)
  local url, stop = http_server(placement, s[3])
  if not url then stop() return nil end
  local p = io.popen(string.format('cd /tmp && taskset -c %s lua5.4 %s/bench/race.lua %d %s', placement[2], root,
    calls, url))
  local out = p:read('*a')
  p:close()
  stop()
  return tonumber(out:match('^(%S+)'))
end

local function median(xs)
  table.sort(xs)
  return xs[math.floor((#xs + 1) / 2)]
end

local placements = { { 'one CPU', '0', '0' }, { 'split CPUs', '0', '1' } }
print(string.format('%d calls of echo, %d rounds; median of round medians, us per call', calls, rounds))
for _, transport in ipairs({ 'stdio', 'http' }) do
for _, placement in ipairs(placements) do
  local times = {}
  for _ = 1, rounds do
    for i, s in ipairs(servers) do
      times[i] = times[i] or {}
      local t
      if transport == 'stdio' then
        t = s[2] and race(placement, s[2]) or nil
      elseif s[3] then
        t = http_race(placement, s)
      end
      if t then table.insert(times[i], t) end
    end
  end
  local lua_median
  for i, s in ipairs(servers) do
    if s[1]:find('^lua') then lua_median = median(times[i]) end
  end
  print('\n' .. transport .. ', ' .. placement[1])
  for i, s in ipairs(servers) do
    local m = median(times[i])
    if m then print(string.format('  %-24s %9.1f   %5.2fx the Lua server', s[1], m, m / lua_median)) end
  end
end
end
