-- `:checkhealth mcp`: which module `require('mcp')` gives and where it
-- came from, its version, this platform and Lua ABI, the config file,
-- and whether each of its
-- servers starts and lists its tools. Starting the servers is the point
-- of the last part, so it runs only here, when asked, each bounded by
-- `timeout` seconds (vim.g.mcp_health_timeout, 10 by default).
local M = {}

-- Neovim 0.10 has vim.health.start/ok/...; 0.7 to 0.9 have the
-- report_* names, in require('health') before 0.8.
local function reporter()
  local health = vim.health or require('health')
  return {
    start = health.start or health.report_start,
    ok = health.ok or health.report_ok,
    info = health.info or health.report_info,
    warn = health.warn or health.report_warn,
    error = health.error or health.report_error,
  }
end

-- The file `require('mcp')` finds, as Lua's searchers would look.
local function search(name, path)
  for template in path:gmatch('[^;]+') do
    local candidate = template:gsub('%?', (name:gsub('%.', package.config:sub(1, 1))))
    local file = io.open(candidate, 'rb')
    if file then
      file:close()
      return candidate
    end
  end
end

local function check_module(report, install)
  report.start('lua-mcp: the module')
  local ok, mcp = pcall(require, 'mcp')
  if not ok then
    report.error('require("mcp") failed: ' .. tostring(mcp), {
      "install the prebuilt module: require('mcp.install').load({ from = RELEASE_URL }) (:help lua-mcp-installing-with-the-loader)",
    })
    return nil
  end
  local from = install.loaded_from or search('mcp', package.path) or search('mcp', package.cpath)
  if mcp.native then
    report.ok(('%s, native, from %s'):format(tostring(mcp._VERSION), tostring(from or 'a preloaded loader')))
  else
    report.warn('require("mcp") gives the pure-Lua reference (' .. tostring(from) .. '): no persistent '
      .. 'servers, no async API', { "load the native module first: require('mcp.install').load({ from = … })" })
  end
  return mcp
end

local function check_platform(report, install)
  report.start('lua-mcp: platform')
  local platform, seen = install.platform()
  local jit = rawget(_G, 'jit')
  local runtime = jit and jit.version or _VERSION
  if platform then
    report.ok(('%s, Lua ABI %s (%s)'):format(platform, install.abi(), runtime))
  else
    report.error(('no prebuilt module is made for this system (%s)'):format(seen),
      { 'build it from source: make build LUA=luajit (docs/install.md)' })
  end
end

local function config_path()
  local given = vim.g.mcp_config
  if type(given) == 'string' and given ~= '' then return vim.fn.expand(given), true end
  return vim.fn.stdpath('config') .. '/mcp.json', false
end

local function check_servers(report, mcp)
  report.start('lua-mcp: servers')
  local path, given = config_path()
  if vim.fn.filereadable(path) == 0 then
    local say = given and report.error or report.info
    say(('no config file at %s%s'):format(path, given and ' (vim.g.mcp_config)' or ''))
    return
  end
  if not mcp.load_config then
    report.warn('the pure-Lua module reads no config files; servers not checked')
    return
  end
  local ok, specs = pcall(mcp.load_config, path)
  if not ok then
    report.error(('%s does not load: %s'):format(path, tostring(specs)))
    return
  end
  report.ok('config file ' .. path)
  local timeout = tonumber(vim.g.mcp_health_timeout) or 10
  local clients = mcp.connect(specs, { timeout = timeout })
  local names = {}
  for name in pairs(specs) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local client = clients[name]
    if not client then
      report.info(name .. ': disabled')
    else
      local listed, tools = pcall(client.discover, client)
      if listed then
        report.ok(('%s: %d tools'):format(name, #tools))
      else
        report.error(('%s: %s'):format(name, tostring(tools)))
      end
      pcall(client.close, client)
    end
  end
end

function M.check()
  local report = reporter()
  local install = require('mcp.install')
  local mcp = check_module(report, install)
  check_platform(report, install)
  if mcp then check_servers(report, mcp) end
end

return M
