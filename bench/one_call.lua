-- one_call.lua - the figures the stdio transport is judged by, quickly:
-- the median time of one `call` against server-everything and against the
-- bundled counter server, native and pure-Lua, and how many server
-- processes discover + 100 calls start.
--
--   lua5.4 bench/one_call.lua     (after make build, and make test once for the npm peers)
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
package.path = here .. '/../lua/?.lua;' .. here .. '/../spec/?.lua;' .. package.path
local H = require('helpers')
local root = H.absolute(here .. '/..')
local native, pure = H.native(), H.reference()
local clock = native.clock

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

local function per_call(module, command, tool, args, n)
  local client = module.new({ command = command })
  client:discover()
  local xs = {}
  for i = 1, n do
    local t0 = clock()
    client:call(tool, args)
    xs[i] = clock() - t0
  end
  if client.close then client:close() end
  return median(xs)
end

local counter = 'lua5.4 ' .. root .. '/lua/servers/counter.lua'
local everything = 'node ' .. H.EVERYTHING .. ' stdio'
print(string.format('bundled counter    native %8.1f us   pure %10.1f us',
  per_call(native, counter, 'increment', {}, 200) * 1e6, per_call(pure, counter, 'increment', {}, 20) * 1e6))
print(string.format('server-everything  native %8.1f us   pure %10.1f us',
  per_call(native, everything, 'echo', { message = 'hi' }, 200) * 1e6,
  per_call(pure, everything, 'echo', { message = 'hi' }, 5) * 1e6))

local log = os.tmpname()
local client = native.new({ command = 'echo spawn >> ' .. log .. '; exec ' .. everything })
client:discover()
for _ = 1, 100 do client:call('echo', { message = 'hi' }) end
client:close()
local spawns = select(2, (H.slurp(log) or ''):gsub('spawn', ''))
os.remove(log)
print(string.format('server processes started for discover + 100 calls (native): %d', spawns))
