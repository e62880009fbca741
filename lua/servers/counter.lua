-- counter.lua - the bundled demo server: an MCP server over stdio that
-- keeps one number in memory. It shows in one line what a long-lived
-- session is for: through the native module the count climbs from call to
-- call; through a module that re-spawns the server it starts from zero
-- every time.
--
--   lua5.4 lua/servers/counter.lua   (speaks MCP on stdin/stdout)
local dir = arg[0]:match('^(.*)[/\\][^/\\]*$') or '.'
package.path = dir .. '/?.lua;' .. dir .. '/../?.lua;' .. package.path
local server = require('stdio_server')

local count = 0

-- A whole number, or nil (math.tointeger where the runtime has it).
local function whole(n)
  n = tonumber(n)
  if math.tointeger then return n and math.tointeger(n) end
  return n and n == math.floor(n) and n or nil
end

server.run({
  increment = {
    description = 'Add to the counter (by 1 unless told otherwise) and return the new value.',
    inputSchema = {
      type = 'object',
      properties = { by = { type = 'integer', description = 'How much to add' } },
    },
    run = function(args)
      count = count + (whole(args.by) or 1)
      return server.text(tostring(count))
    end,
  },
  get = {
    description = 'Return the counter without changing it.',
    run = function() return server.text(tostring(count)) end,
  },
  whoami = {
    description = "Return the server's process id.",
    run = function() return server.text(tostring(server.pid())) end,
  },
}, { name = 'counter' })
