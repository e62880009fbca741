-- nvim_server.lua - Neovim as an MCP server: an agent (Claude Code, an
-- SDK client, this module's own) lists the editor's buffers, reads and
-- changes them, sees their diagnostics, and asks the user a question,
-- over Streamable HTTP from inside the running editor. Nothing blocks it:
-- requests are answered from the editor's own loop (vim.loop watches
-- server:fd()), and a question waits for the user's answer without
-- holding the loop (the tool answers later).
--
--   :luafile lua/examples/nvim_server.lua
--
-- or from a plugin: `require('nvim_server').start()` with this file on
-- the runtime path. The server listens on a free loopback port (two
-- editors never fight over one) and writes where it is to a discovery
-- file only this user can read, vim.g.mcp_server_discovery or
-- stdpath('cache')/lua-mcp/nvim-PID.json, removed when Neovim exits.
local mcp = require('mcp')
local api = vim.api

local M = {}

local server = mcp.server({ name = 'nvim', version = '0.1.0',
  instructions = 'The buffers of a running Neovim: list them, read and replace lines, see diagnostics, ask the user.' })

local function buffer(args)
  local id = args.buffer or api.nvim_get_current_buf()
  if not api.nvim_buf_is_valid(id) then error('no buffer ' .. tostring(id) .. '; list_buffers names them', 0) end
  return id
end

server:tool({ name = 'list_buffers', description = 'The loaded buffers: id, name, line count, modified',
  annotations = { readOnlyHint = true } }, function()
  local out = {}
  for _, id in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(id) then
      out[#out + 1] = { id = id, name = api.nvim_buf_get_name(id), lines = api.nvim_buf_line_count(id),
        modified = api.nvim_buf_get_option(id, 'modified') }
    end
  end
  return { buffers = out }
end)

server:tool({ name = 'read_buffer', description = 'Lines first..last (1-based, inclusive) of a buffer, all by default',
  input_schema = { type = 'object', properties = { buffer = { type = 'integer' },
    first = { type = 'integer', minimum = 1 }, last = { type = 'integer', minimum = 1 } } },
  annotations = { readOnlyHint = true } }, function(args)
  local id = buffer(args)
  local first = (args.first or 1) - 1
  local lines = api.nvim_buf_get_lines(id, first, args.last or -1, false)
  return table.concat(lines, '\n')
end)

server:tool({ name = 'replace_lines', description = 'Replaces lines first..last (1-based, inclusive) with new ones',
  input_schema = { type = 'object', required = { 'first', 'last', 'lines' }, properties = {
    buffer = { type = 'integer' }, first = { type = 'integer', minimum = 1 }, last = { type = 'integer', minimum = 0 },
    lines = { type = 'array', items = { type = 'string' } } } } }, function(args)
  local id = buffer(args)
  api.nvim_buf_set_lines(id, args.first - 1, args.last, false, args.lines)
  return string.format('replaced lines %d..%d with %d lines', args.first, args.last, #args.lines)
end)

server:tool({ name = 'diagnostics', description = 'The diagnostics of a buffer: line, column, severity, message',
  input_schema = { type = 'object', properties = { buffer = { type = 'integer' } } },
  annotations = { readOnlyHint = true } }, function(args)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buffer(args))) do
    out[#out + 1] = { line = d.lnum + 1, column = d.col + 1, severity = vim.diagnostic.severity[d.severity],
      message = d.message }
  end
  return { diagnostics = out }
end)

-- vim.ui.input calls back when the user answers: the tool answers then.
server:tool({ name = 'ask_user', description = 'Asks the user a question in the editor and returns the answer',
  input_schema = { type = 'object', required = { 'question' }, properties = { question = { type = 'string' } } } },
  function(args, ctx)
    vim.ui.input({ prompt = args.question .. ' ' }, function(answer)
      if answer == nil then return ctx:finish(nil, 'the user dismissed the question') end
      ctx:finish(answer)
    end)
    return ctx:later()
  end)

M.server = server

function M.start(opts)
  opts = opts or {}
  local discovery = opts.discovery or vim.g.mcp_server_discovery
  if not discovery then
    local dir = vim.fn.stdpath('cache') .. '/lua-mcp'
    vim.fn.mkdir(dir, 'p', tonumber('700', 8))
    discovery = dir .. '/nvim-' .. vim.fn.getpid() .. '.json'
  end
  M.url = server:listen({ port = 0, discovery = discovery })
  M.discovery = discovery
  -- The loop's callback may not touch the editor (a "fast" context):
  -- dispatch runs scheduled, once per batch of readiness.
  local scheduled = false
  M.poll = vim.loop.new_poll(server:fd())
  M.poll:start('r', function()
    if scheduled then return end
    scheduled = true
    vim.schedule(function()
      scheduled = false
      server:dispatch()
    end)
  end)
  api.nvim_create_autocmd('VimLeavePre', { callback = M.stop })
  return M.url
end

function M.stop()
  if M.poll then M.poll:stop() end
  M.poll = nil
  server:close()
end

if not ... then M.start() end
return M
