-- nvim.lua - MCP in Neovim without freezing the editor.
--
-- Neovim runs LuaJIT, so it needs the LuaJIT build of the module:
--
--   make build LUA=luajit
--   mkdir -p ~/.config/nvim/lua && cp mcp.so ~/.config/nvim/lua/mcp.so
--
-- Neovim searches `lua/?.so` in every 'runtimepath' directory, so
-- require('mcp') then finds it (or add its directory to package.cpath).
-- Put this file in ~/.config/nvim/plugin/, or try it once with
--
--   nvim -c "luafile lua/examples/nvim.lua" -c "McpTools"
--
-- :McpTools [command]  lists a stdio server's tools (default: the bundled
--                      counter server, run with luajit).
-- :McpCall TOOL [json] calls a tool on that server.
-- Requests go out with request_async / call_async; the editor's own loop
-- (vim.loop, which is luv) watches client:fd() and runs client:dispatch()
-- when replies arrive, so the editor keeps responding while a server works.
local mcp = require('mcp')

local info = debug.getinfo(1, 'S')
local here = info and info.source:match('^@(.*)/lua/examples/[^/]*$') or '.'
local default_server = { 'luajit', here .. '/lua/servers/counter.lua' }

---@type mcp.Client?
local client
---@type any  a uv_poll_t
local watcher

-- One client per session of the editor, its descriptor watched by the loop.
local function connect(command)
  if client and not command then return client end
  if client then
    watcher:stop()
    watcher:close()
    client:close()
  end
  client = mcp.new({ command = command or default_server })
  watcher = vim.loop.new_poll(client:fd())
  -- uv callbacks run where the editor API is off limits: hand results to
  -- vim.schedule before touching buffers or messages.
  watcher:start('r', function() client:dispatch() end)
  return client
end

local function show(lines)
  vim.schedule(function()
    vim.api.nvim_echo({ { table.concat(lines, '\n') } }, true, {})
  end)
end

vim.api.nvim_create_user_command('McpTools', function(opts)
  local command = opts.args ~= '' and opts.args or nil
  connect(command):request_async('tools/list', {}, {
    on_done = function(ok, result)
      if not ok then return show({ 'MCP: ' .. tostring(result) }) end
      local lines = {}
      for _, tool in ipairs(result.tools or {}) do
        lines[#lines + 1] = string.format('%-20s %s', tool.name, tool.description or '')
      end
      show(lines)
    end,
  })
end, { nargs = '?' })

vim.api.nvim_create_user_command('McpCall', function(opts)
  local name, json = opts.args:match('^(%S+)%s*(.*)$')
  local args = json ~= '' and vim.fn.json_decode(json) or {}
  connect():call_async(name, args, {
    on_done = function(ok, text, is_error)
      show({ (ok and not is_error) and text or ('MCP error: ' .. tostring(text)) })
    end,
  })
end, { nargs = '+' })

-- Stop the server when the editor exits.
vim.api.nvim_create_autocmd('VimLeavePre', {
  callback = function()
    if client then client:close() end
  end,
})
