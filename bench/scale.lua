-- scale.lua - what each connected server costs the host, and how
-- connecting many grows: N bundled counter servers connected, discovered
-- and called once from one Lua process, for N = 1, 10, 100, 500; then
-- N HTTP clients of one server-everything (Streamable HTTP), N = 1, 10,
-- 200.
--
--   lua5.4 bench/scale.lua [MODULE.so] [N...]      (after make build, and
--                                                   make test once for node's peers)
--
-- Each N runs in a process of its own under `ulimit -n 4096` (the soft
-- limit most desktops and services give is 1024), which prints, per
-- client: the descriptors and threads it added to the host, the memory
-- (VmRSS) it added, and the time to connect all N; then whether closing
-- them all gave every descriptor and thread back. When a limit stops the
-- run, the error is printed as a user would see it.
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
local root = (io.popen('cd ' .. here .. '/.. && pwd'):read('*l'))

if arg[1] == '--one' then
  package.cpath = arg[3] .. '/?.so;' .. package.cpath
  local mcp = require('mcp')
  local n = tonumber(arg[2])
  -- A URL: HTTP clients of that server; otherwise stdio counter servers.
  local url = arg[4]

  -- This process's own figures, read from /proc/self (io.open reads them
  -- as this process: no child in between).
  local function status(field)
    for line in io.lines('/proc/self/status') do
      local value = line:match('^' .. field .. ':%s*(%d+)')
      if value then return tonumber(value) end
    end
  end
  local function fds()
    -- /proc/self/fd listed by a child (ls) would list the child's: count
    -- the descriptors whose fdinfo opens, up to the limit.
    local count = 0
    for fd = 0, 4200 do
      local f = io.open('/proc/self/fdinfo/' .. fd)
      if f then
        count = count + 1
        f:close()
      end
    end
    return count
  end

  local before = { fds = fds(), threads = status('Threads'), rss = status('VmRSS') }
  local clients, started = {}, mcp.clock()
  local ok, err = pcall(function()
    for i = 1, n do
      if url then
        local c = mcp.new({ url = url })
        clients[i] = c
        c:discover()
        assert(c:call('echo', { message = 'hi' }) == 'Echo: hi')
      else
        local c = mcp.new({ command = { 'lua5.4', root .. '/lua/servers/counter.lua' } })
        clients[i] = c
        c:discover()
        assert(c:call('increment', {}) == '1')
      end
    end
  end)
  local took = mcp.clock() - started
  local during = { fds = fds(), threads = status('Threads'), rss = status('VmRSS') }
  for _, c in ipairs(clients) do c:close() end
  collectgarbage()
  collectgarbage()
  local after = { fds = fds(), threads = status('Threads') }
  local connected = #clients - (ok and 0 or 1)
  local per = function(field) return (during[field] - before[field]) / math.max(connected, 1) end
  io.write(string.format('%5d %9d %8.1f %8.2f %8.0f %10.1f %12s %s\n', n, connected, per('fds'), per('threads'),
    per('rss'), took * 1000, (after.fds == before.fds and after.threads == before.threads) and 'yes' or
      string.format('no (%+d fds, %+d threads)', after.fds - before.fds, after.threads - before.threads),
    ok and '' or ('stopped: ' .. tostring(err):gsub('\n.*', ''))))
  os.exit(0)
end

local module = arg[1] and arg[1]:match('%.so$') and table.remove(arg, 1) or (root .. '/mcp.so')
local dir = os.tmpname()
os.remove(dir)
assert(os.execute(string.format('mkdir -p %s && cp %s %s/mcp.so', dir, module, dir)))
local counts = {}
for _, a in ipairs(arg) do counts[#counts + 1] = tonumber(a) end
local http_counts = #counts > 0 and counts or { 1, 10, 200 }
if #counts == 0 then counts = { 1, 10, 100, 500 } end

local function run(n, url)
  io.stdout:flush()
  os.execute(string.format("sh -c 'ulimit -n 4096; exec lua5.4 %s/bench/scale.lua --one %d %s %s'", root, n, dir,
    url or ''))
end

print(string.format('module %s; per client: descriptors, threads, KiB of VmRSS; ms to connect all', module))
print('stdio: the bundled counter server, one process each')
print('    N connected      fds  threads  KiB/cli connect ms  all returned')
for _, n in ipairs(counts) do run(n) end

package.path = root .. '/spec/?.lua;' .. root .. '/lua/?.lua;' .. package.path
local H = require('helpers')
if io.open(H.EVERYTHING) then
  local url, stop = H.everything_http()
  print('HTTP: clients of one server-everything (Streamable HTTP, a 2025 session: each keeps the server\'s GET stream)')
  print('    N connected      fds  threads  KiB/cli connect ms  all returned')
  for _, n in ipairs(http_counts) do run(n, url) end
  stop()
else
  print('HTTP: skipped (server-everything is not installed: make test installs it)')
end
os.execute('rm -rf ' .. dir)
