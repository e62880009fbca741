-- first_connect.lua - how long the first connection to a server takes,
-- with the era probe and without: from mcp.new to discover's return, in a
-- fresh process each time (nothing remembered in it), against the peers
-- of both eras.
--
--   lua5.4 bench/first_connect.lua OLD.so NEW.so [ROUNDS]
--                                   (after make test once, for the peers)
--
-- Printed for each placement (everything on one CPU; the client on one and
-- the server on the other), the median over rounds, in ms, of:
--   old    a build from before the probe: initialize straight away;
--   cold   the new build with an empty cache directory: the probe first;
--   warm   the new build with the verdict of an earlier process in the
--          cache: a legacy server gets initialize straight away, a modern
--          one the probe with the connect time as its patience.
-- A stdio figure includes the server's own start (node, Python); an HTTP
-- server is started once, before.
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
package.path = here .. '/../lua/?.lua;' .. here .. '/../spec/?.lua;' .. package.path
local H = require('helpers')
local root = H.absolute(here .. '/..')

local usage = 'usage: first_connect.lua OLD.so NEW.so [ROUNDS]'
local old_so, new_so = assert(arg[1], usage), assert(arg[2], usage)
local rounds = tonumber(arg[3]) or 3
local PEERS = root .. '/spec/peers/'
local NODE = PEERS .. 'node_modules/.bin/node'
local PY2, PY1 = PEERS .. 'python/bin/python', PEERS .. 'python-v1/bin/python'
local ERAS = 'lua5.4 ' .. root .. '/spec/servers/eras.lua '

local dirs = {}
for name, so in pairs({ old = old_so, new = new_so }) do
  dirs[name] = H.module_dir(so)
end

local median = H.median

-- One first connection in a process of its own, client pinned to CPU 0:
-- milliseconds, or nil and why when it failed.
local function connect(build, cache, where)
  local path = H.tmpname() .. '.lua'
  local f = assert(io.open(path, 'w'))
  f:write(string.format('package.cpath = %q .. package.cpath\n', dirs[build] .. '/?.so;'))
  f:write(string.format([[
local mcp = require('mcp')
local t0 = mcp.clock()
local c = mcp.new(%s)
local ok, err = pcall(c.discover, c)
local took = (mcp.clock() - t0) * 1e3
c:close()
print(ok and string.format('took %%.1f', took) or ('failed ' .. tostring(err)))
]], where))
  f:close()
  local p = io.popen('XDG_CACHE_HOME=' .. cache .. ' taskset -c 0 lua5.4 ' .. path .. ' 2>&1')
  local out = p:read('a')
  p:close()
  os.remove(path)
  local took = out:match('took ([%d.]+)')
  return tonumber(took), not took and out:gsub('\n$', '') or nil
end

local stdio = function(command) return function(cpu) return string.format('{ command = %q, timeout = 30 }', cpu .. command) end end
local http = function(start)
  return function(cpu)
    local port = H.port()
    local _, stop = H.start(cpu .. start .. ' http ' .. port, 'listening %d+', 60)
    return string.format('{ url = %q, timeout = 30 }', 'http://127.0.0.1:' .. port .. '/mcp'), stop
  end
end

local peers = {
  { 'server-everything, stdio', stdio(NODE .. ' ' .. H.EVERYTHING .. ' stdio') },
  { 'TypeScript SDK v2, stdio', stdio(NODE .. ' ' .. PEERS .. 'modern_server.mjs stdio') },
  { 'TypeScript SDK v2, HTTP', http(NODE .. ' ' .. PEERS .. 'modern_server.mjs') },
  { 'Python SDK 2.3.0, stdio', stdio(PY2 .. ' ' .. PEERS .. 'modern_server.py stdio') },
  { 'Python SDK 2.3.0, HTTP', http(PY2 .. ' ' .. PEERS .. 'modern_server.py') },
  { 'Python SDK 1.30.0, stdio', stdio(PY1 .. ' ' .. PEERS .. 'legacy_server.py stdio') },
  { 'Python SDK 1.30.0, HTTP', http(PY1 .. ' ' .. PEERS .. 'legacy_server.py') },
  { 'eras.lua errors (-32601)', stdio(ERAS .. 'errors') },
  { 'eras.lua ignores the probe', stdio(ERAS .. 'ignores') },
  { 'eras.lua exits on the probe', stdio(ERAS .. 'exits') },
  { 'eras.lua modern only', stdio(ERAS .. 'modern') },
}

for _, place in ipairs({ { 'one CPU', 'taskset -c 0 ' }, { 'split CPUs', 'taskset -c 1 ' } }) do
  print(place[1] .. ' (ms to the first discover, median of ' .. rounds .. ' processes)')
  print(string.format('  %-30s %9s %9s %9s %9s', '', 'old', 'cold', 'warm', 'warm/old'))
  for _, peer in ipairs(peers) do
    local where, stop = peer[2](place[2])
    local runs, failed = { old = {}, cold = {}, warm = {} }, {}
    local warm = H.tmpname()
    connect('new', warm, where) -- the verdict the warm runs find
    for r = 1, rounds do
      local cold = H.tmpname()
      for _, run in ipairs({ { 'old', 'old', cold .. '-old' }, { 'cold', 'new', cold }, { 'warm', 'new', warm } }) do
        local ms, why = connect(run[2], run[3], where)
        runs[run[1]][r] = ms or 0
        if not ms then failed[run[1]] = why end
      end
      os.execute('rm -rf ' .. cold .. ' ' .. cold .. '-old')
    end
    os.execute('rm -rf ' .. warm)
    if stop then stop() end
    local function cell(name) return failed[name] and 'fails' or string.format('%.0f', median(runs[name])) end
    local ratio = (failed.old or failed.warm) and '-' or string.format('%.2f', median(runs.warm) / median(runs.old))
    print(string.format('  %-30s %9s %9s %9s %9s', peer[1], cell('old'), cell('cold'), cell('warm'), ratio))
    for name, why in pairs(failed) do print(string.format('    %s: %s', name, why:sub(1, 160))) end
  end
end
for _, dir in pairs(dirs) do os.execute('rm -rf ' .. dir) end
