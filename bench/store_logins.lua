-- store_logins.lua [path/to/mcp.so] [processes] [runs]
--
-- Logins saved into one token store by several processes at once: each
-- run starts PROCESSES lua5.4 processes together, each logging in to its
-- own resource of spec/servers/http_faults.js (/mcp/N) with the same store
-- file, and counts the records the store keeps afterwards.
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
local so, processes, runs = arg[1] or (here .. '/../mcp.so'), tonumber(arg[2] or '6'), tonumber(arg[3] or '8')

local port = 47000 + math.random(0, 900)
local server = io.popen('node ' .. here .. '/../spec/servers/http_faults.js ' .. port .. ' & echo $!')
local pid = server:read('*l')
server:close()
os.execute('sleep 0.5')

local script = os.tmpname()
local f = assert(io.open(script, 'w'))
f:write(string.format([[
  local mcp = assert(package.loadlib(%q, 'luaopen_mcp'))()
  local function headless(url)
    local p = io.popen("curl -s -o /dev/null -w '%%{redirect_url}' '" .. url .. "'")
    local location = p:read('*a')
    p:close()
    return location
  end
  local c = mcp.new({ url = 'http://127.0.0.1:%d/mcp/' .. arg[2], timeout = 20,
                      auth = { authorize = headless, store = arg[1] } })
  c:call('whoami', {})
  c:close()
]], so, port))
f:close()

local kept = {}
for run = 1, runs do
  local store = os.tmpname()
  os.remove(store)
  local started = {}
  for i = 1, processes do started[i] = 'lua5.4 ' .. script .. ' ' .. store .. ' ' .. run * 100 + i .. ' &' end
  os.execute(table.concat(started, ' ') .. ' wait')
  local text = io.open(store) and io.open(store):read('*a') or ''
  local n = 0
  for _ in text:gmatch('"access_token"') do n = n + 1 end
  kept[#kept + 1] = n
  os.remove(store)
  os.remove(store .. '.lock')
end
os.remove(script)
os.execute('kill ' .. pid)
print(string.format('%d processes, %d runs: records kept %s (of %d)', processes, runs, table.concat(kept, ' '), processes))
