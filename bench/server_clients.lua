-- server_clients.lua [CLIENTS] [CALLS] - CLIENTS clients of this module
-- (100 by default), each with its own HTTP session, calling `echo` CALLS
-- times each (20), all at once through call_async and mcp.wait_all,
-- against the echo servers of bench/server.lua over Streamable HTTP: the
-- wall time for all of them and the calls per second, client and server
-- on one CPU each. Needs `make build`, the peers of `make test`, and
-- `make bench` for rmcp's server.
local root = (arg[0]:match('^(.*)/bench/[^/]*$') or '.')
if root:sub(1, 1) ~= '/' then root = os.getenv('PWD') .. '/' .. root end
package.cpath = root .. '/?.so;' .. package.cpath
local clients_n = tonumber(arg[1]) or 100
local calls = tonumber(arg[2]) or 20

local peers = root .. '/spec/peers'
local servers = {
  { 'lua (mcp.server)', 'exec lua5.4 ' .. root .. '/bench/servers/lua_echo.lua --http' },
  { 'typescript sdk', 'exec node ' .. peers .. '/echo_server.mjs http 0' },
  { 'python sdk', 'cd ' .. peers .. ' && exec python/bin/python echo_server.py http 0' },
}
-- rmcp's server as `make bench` builds it, optimised (the suite's own is
-- not, see spec/peers/rmcp_tasks/Cargo.toml).
local rmcp = root .. '/target/bench/rmcp/release/rmcp-tasks-peer'
if io.open(rmcp) then table.insert(servers, { 'rmcp', 'exec ' .. rmcp .. ' --http 0' }) end

local function start(command)
  local log = os.tmpname()
  local p = io.popen(string.format('taskset -c 1 sh -c %q > %s 2>&1 & echo $!', command, log))
  local pid = p:read('*l')
  p:close()
  local port
  for _ = 1, 400 do
    local f = io.open(log)
    local said = f and f:read('*a') or ''
    if f then f:close() end
    port = said:match('listening (%d+)') or said:match('listening on http://[^:]+:(%d+)')
    if port then break end
    os.execute('sleep 0.05')
  end
  return 'http://127.0.0.1:' .. tostring(port) .. '/mcp', function()
    os.execute('kill ' .. pid .. ' 2>/dev/null')
    os.remove(log)
  end
end

-- In a process of its own on CPU 0: the seconds all the calls took.
local function run(url)
  local script = os.tmpname() .. '.lua'
  local f = assert(io.open(script, 'w'))
  f:write(string.format([[
    package.cpath = %q .. package.cpath
    local mcp = require('mcp')
    local clients = {}
    for i = 1, %d do clients[i] = mcp.new({ url = %q }); clients[i]:discover() end
    local t0 = mcp.clock()
    local handles = {}
    for _ = 1, %d do
      for _, c in ipairs(clients) do handles[#handles + 1] = c:call_async('echo', { message = 'x' }) end
      assert(mcp.wait_all(handles, 120))
      handles = {}
    end
    print(mcp.clock() - t0)
    for _, c in ipairs(clients) do c:close() end
  ]], root .. '/?.so;', clients_n, url, calls))
  f:close()
  local p = io.popen('cd /tmp && taskset -c 0 lua5.4 ' .. script)
  local out = p:read('*a')
  p:close()
  os.remove(script)
  return tonumber(out:match('^(%S+)'))
end

print(string.format('%d clients at once, %d rounds of one call each; client on CPU 0, server on CPU 1', clients_n, calls))
local lua_time
for _, s in ipairs(servers) do
  local url, stop = start(s[2])
  local seconds = run(url)
  stop()
  lua_time = lua_time or seconds
  if seconds then
    print(string.format('  %-20s %7.3f s  %8.0f calls/s  %5.2fx the Lua server', s[1], seconds,
      clients_n * calls / seconds, seconds / lua_time))
  else
    print(string.format('  %-20s failed', s[1]))
  end
end
