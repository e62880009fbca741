-- heartbeat.lua FILE - appends a line to FILE every 50 ms, for ever: the
-- grandchild whose end the Windows pass watches for.
local file = arg[1]
while true do
  local f = io.open(file, 'a')
  if f then
    f:write('beat\n')
    f:close()
  end
  local t = os.clock()
  while os.clock() - t < 0.05 do end
end
