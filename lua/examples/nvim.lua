-- nvim.lua - MCP servers in Neovim, started from a config file when the
-- editor starts, without ever freezing it. Copy it into a plugin and
-- change what you like.
--
-- Neovim runs LuaJIT, so it needs the LuaJIT build of the module. With
-- nothing to build, the loader fetches the prebuilt one and checks it
-- (docs/neovim.md):
--
--   require('mcp.install').load({ from = RELEASE_URL_OR_DIST_DIR })
--
-- or from a checkout with Rust:
--
--   make build LUA=luajit
--   mkdir -p ~/.config/nvim/lua && cp mcp.so ~/.config/nvim/lua/mcp.so
--
-- Neovim searches `lua/?.so` in every 'runtimepath' directory, so
-- require('mcp') then finds it. Put this file in ~/.config/nvim/plugin/,
-- or try it once with
--
--   nvim -c "luafile lua/examples/nvim.lua"
--
-- The servers come from `vim.g.mcp_config` (a path), else
-- stdpath('config')/mcp.json, else the bundled counter server. The file
-- is a Claude Desktop or VS Code config ({"mcpServers": {...}} or
-- {"servers": {...}}; see docs/config.md).
--
-- :McpStatus            each server: starting, ready (its tool count) or
--                       failed (why)
-- :McpTools             the tools of every ready server
-- :McpCall TOOL [json]  calls a tool by its mounted name (SERVER_TOOL)
--
-- Every server starts at once and lists its tools in the background: a
-- slow one (`npx -y` fetching a package) or a failing one holds none of
-- the others, and the editor keeps answering keys meanwhile. The loop
-- (vim.uv, which is luv) watches each client's descriptor and runs
-- client:dispatch() when it is readable; dispatch runs the callbacks.
local mcp = require('mcp')
local uv = vim.uv or vim.loop

local info = debug.getinfo(1, 'S')
local here = info and info.source:match('^@(.*)/lua/examples/[^/]*$') or '.'

local M = {
  ---@type table<string, mcp.Client>
  clients = {},
  ---@type table<string, string>  server name -> starting | ready | failed: why
  status = {},
  ---@type table<string, { client: mcp.Client, tool: string, description: string? }>  by mounted name
  tools = {},
  watchers = {},
}

-- uv callbacks (dispatch runs ours from one) may not touch the editor:
-- everything shown goes through vim.schedule.
local function notify(message, level)
  vim.schedule(function() vim.notify(message, level or vim.log.levels.INFO, { title = 'MCP' }) end)
end

-- The registry mount_all_async fills: each tool remembers its client and
-- its own name on the server, so that calls go out async.
local function registry_for(name, client, prefix)
  return {
    get = function(_, full) return M.tools[full] end,
    add = function(_, tool)
      M.tools[tool.name] = { client = client, tool = tool.name:sub(#prefix + 1), description = tool.description,
        server = name }
    end,
  }
end

local function config_path()
  local given = vim.g.mcp_config
  if given then return given end
  local default = vim.fn.stdpath('config') .. '/mcp.json'
  if vim.fn.filereadable(default) == 1 then return default end
  return nil
end

-- The servers to start: the config file's, or the bundled counter.
local function server_specs()
  local path = config_path()
  if path then return mcp.load_config(path) end
  return mcp.load_config({ mcpServers = { counter = { command = 'luajit', args = { here .. '/lua/servers/counter.lua' } } } })
end

-- Starts every server and mounts its tools as soon as it has listed them.
function M.start()
  local ok, specs = pcall(server_specs)
  if not ok then return notify('cannot read the config: ' .. tostring(specs), vim.log.levels.ERROR) end
  M.clients = mcp.connect(specs)
  for name, client in pairs(M.clients) do
    M.status[name] = 'starting'
    local watcher = uv.new_poll(client:fd())
    watcher:start('r', function() client:dispatch() end)
    M.watchers[name] = watcher
    local prefix = name .. '_'
    mcp.mount_async(registry_for(name, client, prefix), client, {
      prefix = prefix,
      on_done = function(names, err)
        if names then
          M.status[name] = string.format('ready (%d tools)', #names)
          notify(name .. ' ready: ' .. #names .. ' tools')
        else
          M.status[name] = 'failed: ' .. tostring(err)
          notify(name .. ' failed: ' .. tostring(err), vim.log.levels.ERROR)
        end
      end,
    })
  end
end

-- Stops every server: on VimLeavePre, or to start again.
function M.stop()
  for name, watcher in pairs(M.watchers) do
    watcher:stop()
    watcher:close()
    M.watchers[name] = nil
  end
  for _, client in pairs(M.clients) do client:close() end
  M.clients, M.status, M.tools = {}, {}, {}
end

vim.api.nvim_create_user_command('McpStatus', function()
  local lines = {}
  for name, state in pairs(M.status) do lines[#lines + 1] = name .. ': ' .. state end
  table.sort(lines)
  vim.notify(#lines > 0 and table.concat(lines, '\n') or 'no servers', vim.log.levels.INFO, { title = 'MCP' })
end, {})

vim.api.nvim_create_user_command('McpTools', function()
  local lines = {}
  for full, tool in pairs(M.tools) do
    lines[#lines + 1] = string.format('%-24s %s', full, tool.description or '')
  end
  table.sort(lines)
  vim.notify(#lines > 0 and table.concat(lines, '\n') or 'no tools yet (see :McpStatus)', vim.log.levels.INFO,
    { title = 'MCP' })
end, {})

vim.api.nvim_create_user_command('McpCall', function(opts)
  local full, json = opts.args:match('^(%S+)%s*(.*)$')
  local tool = M.tools[full]
  if not tool then return notify('no tool ' .. full .. ' (see :McpTools)', vim.log.levels.ERROR) end
  local args = json ~= '' and vim.fn.json_decode(json) or {}
  tool.client:call_async(tool.tool, args, {
    on_done = function(ok, text, is_error)
      if ok and not is_error then return notify(full .. ': ' .. tostring(text)) end
      notify(full .. ' failed: ' .. tostring(text), vim.log.levels.ERROR)
    end,
  })
end, { nargs = '+' })

vim.api.nvim_create_autocmd('VimLeavePre', { callback = M.stop })

M.start()
return M
