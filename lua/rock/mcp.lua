-- `require('mcp')` in a tree a binary rock installed. LuaRocks installs one
-- rock per platform, and its trees cannot tell PUC Lua 5.1 from LuaJIT
-- (both are "5.1"), while the native module is built per Lua ABI. So the
-- rock carries the module built for each (lib/lua/5.x/mcp/lua51.so,
-- lua52, lua53, lua54, luajit; .dll on Windows), and this file, installed
-- as the rock's `mcp`, loads the one built for the runtime running it and
-- returns it: the caller gets the native module itself.
local abi = rawget(_G, 'jit') and 'luajit' or ('lua' .. (_VERSION:gsub('%D', '')))
local separator = package.config:sub(1, 1)
local name = 'mcp' .. separator .. abi

-- package.searchpath, which PUC 5.1 lacks: the first file the cpath
-- templates name that opens.
local tried = {}
for template in package.cpath:gmatch('[^;]+') do
  local path = template:gsub('%?', name)
  local file = io.open(path, 'rb')
  if file then
    file:close()
    local open, err = package.loadlib(path, 'luaopen_mcp')
    if not open then
      error(('lua-mcp: %s did not load: %s'):format(path, err), 2)
    end
    return open('mcp', path)
  end
  tried[#tried + 1] = path
end
error(('lua-mcp: this installation has no module built for %s (looked for %s); '
  .. 'install the rock made for this platform, or build from source (docs/install.md)')
  :format(abi, table.concat(tried, ', ')), 2)
