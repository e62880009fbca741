-- ab.lua - two builds of the module, per call, side by side in one run.
--
--   lua5.4 bench/ab.lua OLD.so NEW.so [ROUNDS]     (after make bench once,
--                                                  which builds the C servers)
--
-- A change to the request path is judged by what one small call costs, and
-- on this VM that depends on where the scheduler puts the threads: a
-- wake-up on the same CPU costs ~3 us, on the other 20-150 us, and the
-- regime changes from run to run. So each figure here is a ratio against a
-- floor measured in the same round and the same placement, and the two
-- builds alternate round by round, so that a drift of the machine lands on
-- both. Printed: for each placement, the floor and each build's median
-- per call (the median of its rounds) with its ratio to the floor; then
-- the TypeScript SDK's per-call time over HTTP against server-everything
-- as a multiple of each build's.
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
package.path = here .. '/../lua/?.lua;' .. here .. '/../spec/?.lua;' .. package.path
local H = require('helpers')
local trace = require('trace')
local root = H.absolute(here .. '/..')

local builds = { { name = 'old', so = assert(arg[1], 'usage: ab.lua OLD.so NEW.so [ROUNDS]') },
  { name = 'new', so = assert(arg[2], 'usage: ab.lua OLD.so NEW.so [ROUNDS]') } }
local rounds = tonumber(arg[3]) or 5
local CALLS = 5000

local function run_cmd(cmd) return (H.command(cmd)) end
local function first_number(text) return tonumber(text:match('^(%S+)')) end
local median = H.median

local ECHO = root .. '/target/bench/echo_server'
local PIPE_RTT = root .. '/target/bench/pipe_rtt'
assert(io.open(ECHO), 'build the C servers first: make bench (or the gcc lines of its recipe)')

local function race(so, target, prefix)
  return first_number(run_cmd(string.format('MCP_SO=%s %s lua5.4 %s/bench/race.lua %d %s', so,
    prefix or 'taskset -c 0', root, CALLS, target)))
end

-- stdio against the minimal C server, both placements.
for _, place in ipairs({ { 'one CPU', '0 0', '' }, { 'split CPUs', '0 1', 'taskset -c 1 ' } }) do
  local name, floor_cpus, server_prefix = place[1], place[2], place[3]
  local floors, per = {}, { old = {}, new = {} }
  for r = 1, rounds do
    floors[r] = first_number(run_cmd(PIPE_RTT .. ' 20000 ' .. floor_cpus))
    for _, b in ipairs(builds) do per[b.name][r] = race(b.so, server_prefix .. ECHO) end
  end
  local floor = median(floors)
  print(string.format('stdio, C echo server, %-10s  floor %6.2f us', name, floor))
  for _, b in ipairs(builds) do
    local m = median(per[b.name])
    print(string.format('  %-4s %8.2f us/call  %5.2f pipe round trips', b.name, m, m / floor))
  end
end

-- HTTP against server-everything (node, which runs threads of its own):
-- ours against the TypeScript SDK client, unpinned, echoing a message.
local port = 39000 + math.random(0, 999)
local _, stop = H.start('PORT=' .. port .. ' node ' .. H.EVERYTHING .. ' streamableHttp', 'listening on port')
local url = 'http://127.0.0.1:' .. port .. '/mcp'
local per = { old = {}, new = {}, ts = {} }
for r = 1, rounds do
  for _, b in ipairs(builds) do per[b.name][r] = race(b.so, url, 'RACE_MESSAGE=hi') end
  local out_file = os.tmpname()
  run_cmd(string.format([[node %s/bench/ts_client.mjs http '%s' echo '{"message":"hi"}' %d %s 2>/dev/null]], root,
    url, CALLS, out_file))
  local out = assert(trace.decode(H.slurp(out_file) or ''), 'the TS client failed')
  os.remove(out_file)
  per.ts[r] = median(out.calls_us)
end
stop()
local ts = median(per.ts)
print(string.format('HTTP, server-everything echo      TypeScript SDK %8.1f us/call', ts))
for _, b in ipairs(builds) do
  local m = median(per[b.name])
  print(string.format('  %-4s %8.1f us/call  the SDK is %4.2fx slower', b.name, m, ts / m))
end
