-- lifecycle.lua - two builds of the module, side by side, on what happens
-- around the calls rather than in them: closing a client, noticing a
-- server's death, and answering Ctrl-C.
--
--   lua5.4 bench/lifecycle.lua OLD.so NEW.so [ROUNDS]   (after make bench
--                                                       once, for the C server)
--
-- Printed for each placement (everything on one CPU; the client on one and
-- the server on the other), the median over rounds of each build's median:
--   close   client:close() after one call against the C echo server, which
--           exits at stdin's EOF (20 clients a round);
--   death   a call whose server exits while a helper it started keeps its
--           stdout open (faulty.lua's orphan_exit): no EOF comes, so only
--           the exit notice (a pidfd, or the portable waiter thread) ends
--           the call; the server's own work is in the figure, the same for
--           both builds;
--   ctrl-c  from SIGINT, sent 300 ms into a call that would take 10 s, to
--           the call returning to Lua with "interrupted!".
-- The builds alternate within each round, so a drift lands on both.
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
package.path = here .. '/../lua/?.lua;' .. here .. '/../spec/?.lua;' .. package.path
local H = require('helpers')
local root = H.absolute(here .. '/..')

local usage = 'usage: lifecycle.lua OLD.so NEW.so [ROUNDS]'
local builds = { { name = 'old', so = assert(arg[1], usage) }, { name = 'new', so = assert(arg[2], usage) } }
local rounds = tonumber(arg[3]) or 5
local ECHO = root .. '/target/bench/echo_server'
assert(io.open(ECHO), 'build the C servers first: make bench (or the gcc lines of its recipe)')
local FAULTY = root .. '/spec/servers/faulty.lua'

-- Each build is loaded as `mcp` from a directory of its own.
for _, b in ipairs(builds) do
  b.dir = H.module_dir(b.so)
end

local median = H.median

-- Runs `source` under build `b` pinned to CPU 0; SERVER_CPU in it is the
-- taskset prefix for the server. Returns the numbers it printed.
local function measure(b, server_cpu, source)
  local path = H.tmpname() .. '.lua'
  local f = assert(io.open(path, 'w'))
  f:write(string.format('package.cpath = %q .. package.cpath\n', b.dir .. '/?.so;'))
  f:write(string.format('local SERVER_CPU, ECHO, FAULTY = %q, %q, %q\n', server_cpu, ECHO, FAULTY))
  f:write(source)
  f:close()
  local p = io.popen('taskset -c 0 lua5.4 ' .. path .. ' 2>&1')
  local out = p:read('a')
  p:close()
  os.remove(path)
  local xs = {}
  for x in out:gmatch('[%d.]+') do xs[#xs + 1] = tonumber(x) end
  assert(#xs > 0, out)
  return xs
end

local CLOSE = [[
local mcp = require('mcp')
for _ = 1, 20 do
  local c = mcp.new({ command = SERVER_CPU .. ECHO })
  c:call('echo', { message = 'hi' })
  local t0 = mcp.clock()
  c:close()
  io.write(string.format('%.3f ', (mcp.clock() - t0) * 1e3))
end
]]

local DEATH = [[
local mcp = require('mcp')
for _ = 1, 5 do
  local c = mcp.new({ command = SERVER_CPU .. 'lua5.4 ' .. FAULTY .. ' plain', timeout = 30 })
  c:call('echo', { message = 'hi' })
  local t0 = mcp.clock()
  assert(not pcall(c.call, c, 'orphan_exit'))
  io.write(string.format('%.3f ', (mcp.clock() - t0) * 1e3))
  c:close()
end
]]

local CTRL_C = [[
local mcp = require('mcp')
local f = io.open('/proc/self/stat')
local me = f:read('*n')
f:close()
local c = mcp.new({ command = SERVER_CPU .. 'lua5.4 ' .. FAULTY .. ' plain', timeout = 30 })
c:call('echo', { message = 'hi' })
os.execute(string.format('(sleep 0.3; kill -INT %d) &', me))
local t0 = mcp.clock()
local ok, err = pcall(c.call, c, 'sleep', { ms = 10000 })
assert(not ok and tostring(err):find('interrupted'), tostring(err))
io.write(string.format('%.3f', (mcp.clock() - t0 - 0.3) * 1e3))
c:close()
]]

local cases = { { 'close', CLOSE }, { 'death', DEATH }, { 'ctrl-c', CTRL_C } }
for _, place in ipairs({ { 'one CPU', 'taskset -c 0 ' }, { 'split CPUs', 'taskset -c 1 ' } }) do
  print(place[1] .. ' (ms, median of ' .. rounds .. ' rounds)')
  for _, case in ipairs(cases) do
    local per = { old = {}, new = {} }
    for r = 1, rounds do
      for _, b in ipairs(builds) do per[b.name][r] = median(measure(b, place[2], case[2])) end
    end
    local old, new = median(per.old), median(per.new)
    print(string.format('  %-7s old %8.2f   new %8.2f   new/old %5.2f', case[1], old, new, new / old))
  end
end
for _, b in ipairs(builds) do os.execute('rm -rf ' .. b.dir) end
