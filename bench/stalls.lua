-- stalls.lua - how long an event loop stands still while MCP work happens
-- beside it: spec/stalls.lua's six cases (a stdio server slow to start,
-- an HTTP server slow at each step of its handshake, a restart after a crash, a
-- login waiting 2 s for its browser, three servers from a config file
-- with one failing, a server slow to take a Lua handler's answer), each the longest gap between ticks of a 1 ms luv
-- timer, in a fresh process each time.
--
--   lua5.4 bench/stalls.lua [OLD.so] NEW.so [ROUNDS]     (Debian: lua-luv)
--
-- Printed for each placement (everything on one CPU; the client on CPU 0
-- and every server on CPU 1), the median over ROUNDS (3) processes, in
-- ms, and as a multiple of the floor: the longest gap of the same timer in
-- the same kind of process with nothing else to do, measured in the same
-- round. A second floor, "uv.spawn x3", starts the config case's three
-- servers with luv's own uv.spawn: what starting them costs any loop.
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
package.path = here .. '/../lua/?.lua;' .. here .. '/../spec/?.lua;' .. package.path
local H = require('helpers')
local S = require('stalls')
local root = H.absolute(here .. '/..')

local usage = 'usage: stalls.lua [OLD.so] NEW.so [ROUNDS]'
local builds = {}
for _, a in ipairs(arg) do
  if a:match('%.so$') then builds[#builds + 1] = a end
end
assert(#builds >= 1, usage)
local rounds = tonumber(arg[#arg]) or 3
local names = #builds == 2 and { 'old', 'new' } or { 'new' }
local dirs = {}
for i, so in ipairs(builds) do dirs[names[i]] = H.module_dir(so) end

-- One case in a process of its own, the client on CPU 0: the longest gap
-- in ms, and the case's result.
local function run(build, case, placement)
  local path = H.tmpname() .. '.lua'
  local scratch = H.tmpname()
  os.execute('mkdir -p ' .. scratch)
  local f = assert(io.open(path, 'w'))
  f:write(string.format('package.cpath = %q .. package.cpath\n', dirs[build] .. '/?.so;'))
  f:write(string.format('package.path = %q .. package.path\n', root .. '/spec/?.lua;'))
  f:write(string.format([[
local mcp = require('mcp')
local uv = require('luv')
local S = require('stalls')
local loop = S.luv_loop(uv)
local env = { lua = 'lua5.4', root = %q, prefix = %q, http_base = %q, scratch = %q }
local case = %q
local floors = {
  -- Nothing to do.
  idle = function(_, finish)
    local t = uv.new_timer()
    t:start(2000, 0, function() t:close(); finish('idle') end)
  end,
  -- The config case's three servers started by luv itself (uv.spawn),
  -- stopped after 2 s: what starting them costs any loop.
  spawn3 = function(_, finish)
    local argv = function(mode)
      local words = {}
      for w in env.prefix:gmatch('%%S+') do words[#words + 1] = w end
      words[#words + 1] = env.lua
      words[#words + 1] = env.root .. '/spec/servers/faulty.lua'
      words[#words + 1] = mode
      return words
    end
    local started = {}
    for _, command in ipairs({ argv('slowstart'), argv('plain'), { '/nonexistent/mcp-server' } }) do
      local h = uv.spawn(command[1], { args = { select(2, (table.unpack)(command)) } }, function() end)
      if h then started[#started + 1] = h end
    end
    local t = uv.new_timer()
    t:start(2000, 0, function()
      t:close()
      for _, h in ipairs(started) do h:kill('sigkill'); h:close() end
      finish('spawned ' .. #started)
    end)
  end,
}
local start = floors[case] or S.cases[case](mcp, env, loop)
local gap, result = S.measure(loop, start)
if type(result) == 'table' then result = result.mounted .. ' mounted' end
print(string.format('gap %%.3f %%s', gap, tostring(result)))
]], root, placement.prefix, placement.http_base, scratch, case))
  f:close()
  local p = io.popen('XDG_CACHE_HOME=' .. scratch .. ' taskset -c 0 lua5.4 ' .. path .. ' 2>&1')
  local out = p:read('a')
  p:close()
  os.remove(path)
  os.execute('rm -rf ' .. scratch)
  local gap = tonumber(out:match('gap ([%d.]+)'))
  return gap, out:match('gap [%d.]+ ([^\n]*)') or out:gsub('\n$', '')
end

local function server(cpu)
  local port = H.port()
  local _, stop = H.start('taskset -c ' .. cpu .. ' node ' .. root .. '/spec/servers/http_faults.js ' .. port,
    'listening on')
  return 'http://127.0.0.1:' .. port, stop
end

-- The floors first, then the cases.
local CASES = { 'idle', 'spawn3', table.unpack(S.order) }
local TITLES = { idle = 'floor (idle)', spawn3 = 'uv.spawn x3' }

local placements = {
  { title = 'one CPU', cpu = 0, prefix = 'taskset -c 0' },
  { title = 'split CPUs (client on 0, servers on 1)', cpu = 1, prefix = 'taskset -c 1' },
}

for _, placement in ipairs(placements) do
  local stop
  placement.http_base, stop = server(placement.cpu)
  local figures = {}
  for _ = 1, rounds do
    for _, build in ipairs(names) do
      for _, case in ipairs(CASES) do
        local gap, result = run(build, case, placement)
        local key = build .. ' ' .. case
        figures[key] = figures[key] or {}
        table.insert(figures[key], gap or math.huge)
        figures[key].result = result
      end
    end
  end
  stop()
  print(string.format('%s: longest gap of a 1 ms timer, median of %d processes (ms, and x floor)', placement.title,
    rounds))
  local header = string.format('  %-18s', 'case')
  for _, build in ipairs(names) do header = header .. string.format('%12s%9s', build .. ' ms', 'x floor') end
  print(header)
  for _, case in ipairs(CASES) do
    local line = string.format('  %-18s', TITLES[case] or case)
    for _, build in ipairs(names) do
      local floor = H.median(figures[build .. ' idle'])
      local gap = H.median(figures[build .. ' ' .. case])
      line = line .. string.format('%12.2f%9.2f', gap, gap / floor)
    end
    print(line)
  end
  for _, build in ipairs(names) do
    for _, case in ipairs(S.order) do
      print(string.format('    %s %s: %s', build, case, tostring(figures[build .. ' ' .. case].result)))
    end
  end
end
