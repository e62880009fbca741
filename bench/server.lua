-- server.lua [CALLS] [ROUNDS] - a trivial tool (`echo`) called CALLS times
-- over stdio by this module's client, against a server on mcp.server
-- (bench/servers/lua_echo.lua, its handler in Lua), the TypeScript SDK's
-- (v1) and the Python SDK's (2.3) smallest servers, and the C echo server
-- as the floor; for each placement (client and server on one CPU; on
-- two), the median per call in microseconds of each round's median, and
-- its multiple of the Lua server's. Rounds alternate the servers, so a
-- drift of the machine lands on all of them. Needs `make build` (or
-- MCP_SO), `make test` once for the SDK peers, and `make bench` for the
-- C server.
local root = (arg[0]:match('^(.*)/bench/[^/]*$') or '.')
-- Absolute: the races run from /tmp (a Python server started in the
-- checkout would import ./mcp.so as its `mcp` package).
if root:sub(1, 1) ~= '/' then root = os.getenv('PWD') .. '/' .. root end
local calls = tonumber(arg[1]) or 10000
local rounds = tonumber(arg[2]) or 3

local peers = root .. '/spec/peers'
local servers = {
  { 'lua (mcp.server)', 'lua5.4 ' .. root .. '/bench/servers/lua_echo.lua' },
  { 'typescript sdk', 'node ' .. peers .. '/echo_server.mjs' },
  { 'python sdk', peers .. '/python/bin/python ' .. peers .. '/echo_server.py' },
}
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

local function median(xs)
  table.sort(xs)
  return xs[math.floor((#xs + 1) / 2)]
end

local placements = { { 'one CPU', '0', '0' }, { 'split CPUs', '0', '1' } }
print(string.format('%d calls of echo, %d rounds; median of round medians, us per call', calls, rounds))
for _, placement in ipairs(placements) do
  local times = {}
  for _ = 1, rounds do
    for i, s in ipairs(servers) do
      times[i] = times[i] or {}
      local t = race(placement, s[2])
      if t then table.insert(times[i], t) end
    end
  end
  local lua_median
  for i, s in ipairs(servers) do
    if s[1]:find('^lua') then lua_median = median(times[i]) end
  end
  print('\n' .. placement[1])
  for i, s in ipairs(servers) do
    local m = median(times[i])
    if m then print(string.format('  %-24s %9.1f   %5.2fx the Lua server', s[1], m, m / lua_median)) end
  end
end
