-- Neovim (headless) with the LuaJIT build: the module loads from
-- package.cpath, discovers and calls the bundled counter, and one call runs
-- through vim.loop (client:fd() and dispatch) while a timer keeps ticking.
-- Runs in the suite's LuaJIT pass, when ./mcp.so is the LuaJIT build.
local H = require('helpers')

local function nvim(script)
  local path = H.tmpname() .. '.lua'
  local f = assert(io.open(path, 'w'))
  f:write(string.format('package.cpath = %q .. package.cpath\n', H.ROOT .. '/?.so;'))
  f:write(script)
  f:close()
  local out, status = H.command('cd ' .. H.ROOT .. ' && timeout 60 nvim --headless -u NONE -c '
    .. string.format('%q', 'luafile ' .. path))
  os.remove(path)
  return out, status
end

local describe_nvim = (H.LUA == 'luajit' and H.succeeded(os.execute('command -v nvim >/dev/null'))) and describe or pending

describe_nvim('Neovim', function()
  it('loads the LuaJIT build, discovers and calls, and a call through vim.loop never stops a timer', function()
    local out, status = nvim(string.format([[
      local mcp = require('mcp')
      local counter = mcp.new({ command = { 'luajit', %q } })
      io.stdout:write('tools ', #counter:discover(), '\n')
      io.stdout:write('call ', counter:call('increment', {}), '\n')
      local sleepy = mcp.new({ command = { 'luajit', %q } })
      sleepy:discover()
      local uv = vim.loop
      local ticks, got = 0, nil
      local timer = uv.new_timer()
      timer:start(10, 10, function() ticks = ticks + 1 end)
      local watcher = uv.new_poll(sleepy:fd())
      watcher:start('r', function() sleepy:dispatch() end)
      sleepy:call_async('sleep', { ms = 300, label = 'slept' }, { on_done = function(ok, text) got = text end })
      vim.wait(10000, function() return got ~= nil end, 5)
      io.stdout:write('async ', tostring(got), ' ticks ', ticks, '\n')
      timer:stop()
      watcher:stop()
      counter:close()
      sleepy:close()
      vim.cmd('qa!')
    ]], H.ROOT .. '/lua/servers/counter.lua', H.ROOT .. '/lua/servers/sleepy.lua'))
    assert.equal(0, status, out)
    assert.is_truthy(out:find('tools 3\n', 1, true), out)
    assert.is_truthy(out:find('call 1\n', 1, true), out)
    local ticks = tonumber(out:match('async slept ticks (%d+)'))
    assert.is_truthy(ticks, out)
    -- 300 ms of a 10 ms timer: a loop blocked by the call would tick once
    assert.is_true(ticks >= 15, out)
  end)

  it('the example defines :McpTools, which lists the counter server tools without blocking', function()
    local out, status = nvim(string.format([[
      vim.cmd('luafile %s')
      vim.cmd('McpTools')
      vim.wait(10000, function() return #vim.fn.execute('messages') > 0 and vim.fn.execute('messages'):find('increment') end, 5)
      io.stdout:write(vim.fn.execute('messages'), '\n')
      vim.cmd('qa!')
    ]], H.ROOT .. '/lua/examples/nvim.lua'))
    assert.equal(0, status, out)
    assert.is_truthy(out:find('increment', 1, true), out)
    assert.is_truthy(out:find('whoami', 1, true), out)
  end)
end)
