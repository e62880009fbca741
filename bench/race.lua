-- race.lua N CMD... - N calls of `echo` through the native module against
-- the stdio server CMD (an argv), or the HTTP server at CMD when it is a
-- URL, one at a time; prints the median, p25 and p75 in microseconds.
-- MCP_SO names another build of the module to load. bench/run.lua starts it under taskset, which
-- is how the client lands on one CPU and the server on the same or the
-- other. With RACE_GAP_MS set, the client idles that long between calls
-- (busy, as an agent thinking): past 2 ms the reader thread has taken the
-- pipe back, and the figure shows what that costs a call. RACE_MESSAGE,
-- when set, is the echo's message (server-everything's echo requires one).
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
local mcp = assert(package.loadlib(os.getenv('MCP_SO') or (here .. '/../mcp.so'), 'luaopen_mcp'))()
local n = tonumber(arg[1])
local argv = { table.unpack(arg, 2) }
local client = mcp.new(argv[1]:find('^https?://') and { url = argv[1] } or { command = argv })
client:discover()
local args = { message = os.getenv('RACE_MESSAGE') }
for _ = 1, 200 do client:call('echo', args) end -- warm: the server's first replies are slower
local gap = (tonumber(os.getenv('RACE_GAP_MS')) or 0) / 1000
local xs = {}
for i = 1, n do
  if gap > 0 then
    local idle_until = mcp.clock() + gap
    while mcp.clock() < idle_until do end
  end
  local t0 = mcp.clock()
  client:call('echo', args)
  xs[i] = (mcp.clock() - t0) * 1e6
end
client:close()
table.sort(xs)
local function q(p) return xs[math.max(1, math.floor(p * (#xs - 1) + 1.5))] end
print(string.format('%.2f %.2f %.2f', q(0.5), q(0.25), q(0.75)))
