-- later.lua - a stdio server on mcp.server whose tools answer later:
--   hold             answers "released" when release is called
--   release          answers every held call, then "released N"
--   ask_name_later   asks the client's name without waiting for it (a
--                    callback), and answers once the client does
local root = arg[0]:match('^(.*)/spec/servers/[^/]*$') or '.'
package.cpath = root .. '/?.so;' .. root .. '/?.dll;' .. package.cpath
local mcp = require('mcp')

local server = mcp.server({ name = 'later', version = '1.0.0' })
local held = {}

server:tool({ name = 'hold' }, function(_, ctx)
  held[#held + 1] = ctx
  return ctx:later()
end)

server:tool({ name = 'release' }, function()
  local n = #held
  for _, ctx in ipairs(held) do ctx:finish('released') end
  held = {}
  return 'released ' .. n
end)

server:tool({ name = 'ask_name_later' }, function(_, ctx)
  ctx:elicit({ message = 'Your name?', requestedSchema = { type = 'object', properties = { name = { type = 'string' } } } },
    function(answer, why)
      if not answer then return ctx:finish(nil, why) end
      ctx:finish('Hello, ' .. answer.content.name)
    end)
  return ctx:later()
end)

server:serve_stdio()
