-- icons.lua - a stdio server on mcp.server whose resource, template and
-- prompt carry titles and icons, safe (https:, data:) and not (http:,
-- javascript:), for the client's listings.
local root = arg[0]:match('^(.*)/spec/servers/[^/]*$') or '.'
package.cpath = root .. '/?.so;' .. root .. '/?.dll;' .. package.cpath
local mcp = require('mcp')

local icons = { { src = 'https://example.com/a.png' }, { src = 'http://example.com/b.png' },
  { src = 'data:image/png;base64,AAAA' }, { src = 'javascript:alert(1)' } }
local server = mcp.server({ name = 'icons', version = '1.0.0' })
server:resource({ uri = 'icons://one', name = 'one', title = 'One', icons = icons }, function() return '1' end)
server:resource_template({ uri_template = 'icons://{n}', name = 'n', title = 'Numbered', icons = icons },
  function(_, vars) return vars.n end)
server:prompt({ name = 'greet', title = 'Greeting', icons = icons }, function() return 'hi' end)
server:serve_stdio()
