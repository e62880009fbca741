-- luv.lua - MCP calls inside an event loop that must never stall: a timer
-- ticks every 10 ms (an editor redrawing, a UI answering keys) while three
-- slow tool calls complete. The loop watches client:fd() and calls
-- client:dispatch() when it is readable; on_done delivers each result.
--
--   lua5.4 lua/examples/luv.lua          (Debian: lua-luv)
--
-- In Neovim the same code runs on vim.loop (vim.uv in 0.10+), which is
-- luv: replace `require('luv')` by `vim.loop` and drop the uv.run() call,
-- Neovim's own loop is already running.
local root = (arg and arg[0] or ''):match('^(.*)/lua/examples/[^/]*$') or '.'
local open_mcp = package.loadlib(root .. '/mcp.so', 'luaopen_mcp')
assert(open_mcp, 'mcp.so not found: build it first with `make build`')
---@type mcp
local mcp = open_mcp()
local uv = require('luv')

local lua = arg[-1] or 'lua5.4'
local client = mcp.new({ command = { lua, root .. '/lua/servers/sleepy.lua' } })
client:discover()   -- blocking, once, before the loop starts

-- The timer: how long did the loop ever go without it firing?
local ticks, last, longest = 0, uv.hrtime(), 0.0
local ticker = uv.new_timer()
ticker:start(10, 10, function()
  local now = uv.hrtime()
  longest = math.max(longest, (now - last) / 1e6)
  last, ticks = now, ticks + 1
end)

-- The client's descriptor: readable when a reply, a notification or a
-- timeout is ready. dispatch() runs them and never blocks.
local watcher = uv.new_poll(client:fd())
watcher:start('r', function() client:dispatch() end)

local t0 = mcp.clock()
local left = 3
for _, ms in ipairs({ 300, 500, 700 }) do
  client:call_async('sleep', { ms = ms, label = 'slept ' .. ms .. ' ms' }, {
    on_done = function(ok, text)
      print(string.format('%4.0f ms  %s', (mcp.clock() - t0) * 1000, ok and text or ('error: ' .. text)))
      left = left - 1
      if left == 0 then
        ticker:stop()
        watcher:stop()
      end
    end,
  })
end

uv.run()
print(string.format('timer ticks: %d, longest stall: %.1f ms', ticks, longest))
ticker:close()
watcher:close()
uv.run('nowait')
client:close()
