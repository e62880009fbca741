-- login_listener.lua [path/to/mcp.so] [idle connections] [runs]
--
-- How long the login's loopback listener takes to answer the browser's
-- redirect while idle connections (a port scanner, a browser's
-- preconnects) sit on it: a login against the MCP server behind OAuth in
-- spec/servers/http_faults.js (/mcp), whose authorize callback opens the
-- idle connections, waits 0.3 s, then sends the browser (curl, following
-- the redirect). Printed: the seconds from the browser's start to the end
-- of the login, each run and the median.
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
local so, crowd, runs = arg[1] or (here .. '/../mcp.so'), tonumber(arg[2] or '6'), tonumber(arg[3] or '5')
local mcp = assert(package.loadlib(so, 'luaopen_mcp'))()

local port = 47000 + math.random(0, 900)
local server = io.popen('node ' .. here .. '/../spec/servers/http_faults.js ' .. port .. ' & echo $!')
local pid = server:read('*l')
server:close()
os.execute('sleep 0.5')

local figures = {}
for _ = 1, runs do
  local sent
  local function crowded(url)
    local listener = url:match('redirect_uri=http%%3A%%2F%%2F127%.0%.0%.1%%3A(%d+)')
    if crowd > 0 then
      os.execute('node -e "for (let i = 0; i < ' .. crowd .. '; i++) require(\'net\').connect(' .. listener
        .. ', \'127.0.0.1\'); setTimeout(() => {}, 30000)" >/dev/null 2>&1 &')
      os.execute('sleep 0.3')
    end
    sent = mcp.clock()
    os.execute("curl -s -L -o /dev/null '" .. url:gsub("'", '') .. "' &")
  end
  local client = mcp.new({ url = 'http://127.0.0.1:' .. port .. '/mcp', timeout = 10,
                           auth = { authorize = crowded, login_timeout = 30 } })
  client:discover()
  figures[#figures + 1] = mcp.clock() - sent
  client:close()
end
os.execute('kill ' .. pid)
table.sort(figures)
local shown = {}
for i, f in ipairs(figures) do shown[i] = string.format('%.3f', f) end
print(string.format('%d idle connections: %s s; median %.3f s', crowd, table.concat(shown, ' '),
  figures[(#figures + 1) // 2]))
