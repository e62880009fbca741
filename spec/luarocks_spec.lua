-- `luarocks make` from the checkout, into a temporary tree, for Lua 5.1
-- and 5.4: the module installs where that Lua finds it, and loads.
-- (Runs in the suite's 5.4 pass, in the suite's own build profile. The
-- modules the suite built for each runtime (target/test-module, made by
-- the same cargo command) are installed when they are there, rather than
-- compiled once more: see scripts/rock-build.sh.)
local H = require('helpers')

local describe_rocks = (H.LUA == 'lua5.4' and H.succeeded(os.execute('command -v luarocks >/dev/null')))
  and describe or pending

describe_rocks('luarocks make #slow', function()
  for _, version in ipairs({ '5.1', '5.4' }) do
    it('installs the module for Lua ' .. version .. ' into a tree of its own', function()
      local tree = H.tmpname()
      local modules = (os.getenv('CARGO_TARGET_DIR') or (H.ROOT .. '/target')) .. '/test-module'
      local out, status = H.command(string.format(
        'cd %s && LUA_MCP_PROFILE=test-module LUA_MCP_MODULES=%s luarocks --lua-version %s --tree %s make lua-mcp-scm-1.rockspec',
        H.ROOT, modules, version, tree))
      assert.equal(0, status, out)
      local lib = string.format('%s/lib/lua/%s/mcp.so', tree, version)
      assert.is_truthy(io.open(lib), out)
      assert.is_truthy(io.open(string.format('%s/share/lua/%s/types/mcp.d.lua', tree, version)), out)
      local loaded, loaded_status = H.command(string.format(
        [[lua%s -e "package.cpath = '%s/lib/lua/%s/?.so;' .. package.cpath; local mcp = require('mcp'); ]]
          .. [[print(mcp.native, mcp._VERSION, type(mcp.wait_any))"]], version, tree, version))
      -- the command-line tool, through the wrapper LuaRocks writes
      local called, called_status = H.command(string.format('%s/bin/lua-mcp --mcp %q call increment by=3', tree,
        'lua' .. version .. ' ' .. H.ROOT .. '/lua/servers/counter.lua'))
      os.execute('rm -rf ' .. tree)
      assert.equal(0, loaded_status, loaded)
      assert.is_truthy(loaded:find('^true\tlua%-mcp %d+%.%d+%.%d+\tfunction\n'), loaded)
      assert.equal(0, called_status, called)
      assert.equal('3\n', called)
    end)
  end
end)
