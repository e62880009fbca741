-- tree.lua - a stdio server for the Windows pass (spec/windows_spec.lua),
-- run by the Windows lua.exe: the faults the Job Object and the pump
-- must handle, which server-everything will not produce on demand.
--
--   lua.exe spec/windows/tree.lua
local dir = arg[0]:match('^(.*)[/\\][^/\\]*$') or '.'
package.path = dir .. '/../../lua/servers/?.lua;' .. dir .. '/../../lua/?.lua;' .. package.path
local server = require('stdio_server')

-- Windows' Lua has no sleep; a short busy wait serves a test server.
local function pause(seconds)
  local t = os.clock()
  while os.clock() - t < seconds do end
end

server.run({
  echo = {
    inputSchema = { type = 'object', properties = { message = { type = 'string' } } },
    run = function(args) return server.text('Echo: ' .. tostring(args.message)) end,
  },
  -- A grandchild, started through cmd.exe's `start` so that it outlives
  -- its starter, appending to a file every 50 ms until it is ended.
  heartbeat = {
    run = function(args)
      os.execute(string.format('start "" /b "%s" "%s" "%s"', arg[-1], dir .. '\\heartbeat.lua', args.file))
      return server.text('beating')
    end,
  },
  -- Dies at once, with last words on stderr.
  die = {
    run = function()
      io.stderr:write('tree: giving up\n')
      io.stderr:flush()
      os.exit(3)
    end,
  },
  -- Answers after `seconds`.
  slow = {
    run = function(args)
      pause(tonumber(args.seconds) or 1)
      return server.text('done')
    end,
  },
  cwd = {
    run = function()
      local p = io.popen('cd')
      local d = p:read('*l')
      p:close()
      return server.text(d)
    end,
  },
})
