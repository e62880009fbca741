-- Installs the prebuilt native module with no build step, for Neovim and
-- any Lua that loads C modules (docs/neovim.md):
--
--   local mcp = require('mcp.install').load({ from = 'https://…/releases/download/v0.3.0' })
--
-- `from` is a release's address or a local `dist/` (what `make dist`
-- writes). Its manifest.json names one module per platform and Lua ABI
-- with its size and SHA-256; the one for this runtime is fetched, checked
-- against the manifest before anything loads it, and put in place by
-- rename under a name of its own (version, platform, ABI), so a module
-- a running process has loaded is never written over. The manifest comes
-- from the same place as the module: the check catches a corrupt or
-- truncated download, and HTTPS the rest.
local M = {}

local WINDOWS = package.config:sub(1, 1) == '\\'

-- A command's whole output, or nil.
local function read_command(command)
  local pipe = io.popen(command)
  if not pipe then return nil end
  local out = pipe:read('*a')
  pipe:close()
  return out
end

local function quote(s)
  if WINDOWS then return '"' .. s .. '"' end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- A name no other process picks for its temporary file beside ours.
local function unique()
  return ('%d.%s'):format(os.time(), (tostring({}):gsub('%W', '')))
end

local function exists(path)
  local file = io.open(path, 'rb')
  if file then file:close() end
  return file ~= nil
end

-- LuaRocks' names for systems and processors, which the artifacts carry.
local SYSTEMS = { Linux = 'linux', OSX = 'macosx', Darwin = 'macosx', Windows = 'win32', FreeBSD = 'freebsd' }
local PROCESSORS = { x64 = 'x86_64', x86_64 = 'x86_64', amd64 = 'x86_64', AMD64 = 'x86_64',
  arm64 = 'aarch64', aarch64 = 'aarch64', ARM64 = 'aarch64' }

--- This machine's platform as the artifacts name it (`linux-x86_64`,
--- `macosx-aarch64`, `win32-x86_64`, ...), or nil and what was seen.
function M.platform()
  local system, processor
  local vim, jit = rawget(_G, 'vim'), rawget(_G, 'jit')
  if WINDOWS then
    -- The process's own architecture (an x64 Lua under emulation on an
    -- ARM machine loads x64 modules), not PROCESSOR_ARCHITEW6432's.
    system, processor = 'Windows', os.getenv('PROCESSOR_ARCHITECTURE')
  elseif vim and vim.loop then
    local uname = vim.loop.os_uname()
    system, processor = uname.sysname, uname.machine
  else
    -- jit.os says "BSD" for every BSD, so the system's name comes from uname.
    local uname = read_command('uname -sm 2>/dev/null') or ''
    system, processor = uname:match('^(%S+)%s+(%S+)')
  end
  -- LuaJIT knows the architecture it was built for, which is the one its
  -- modules must have, whatever the machine (Rosetta, qemu) is.
  if jit then processor = jit.arch end
  local name = SYSTEMS[system or ''] and PROCESSORS[processor or '']
    and SYSTEMS[system] .. '-' .. PROCESSORS[processor]
  if name then return name end
  return nil, ('%s on %s'):format(tostring(system), tostring(processor))
end

--- The Lua ABI of this runtime: `luajit`, `lua51`, `lua52`, `lua53` or `lua54`.
function M.abi()
  if rawget(_G, 'jit') then return 'luajit' end
  return 'lua' .. (_VERSION:gsub('%D', ''))
end

--- Where modules are installed unless `opts.dir` says: Neovim's data
--- directory, else the user's cache.
function M.default_dir()
  local vim = rawget(_G, 'vim')
  if vim and vim.fn then return vim.fn.stdpath('data') .. '/lua-mcp' end
  if WINDOWS then return (os.getenv('LOCALAPPDATA') or os.getenv('TEMP') or '.') .. '\\lua-mcp' end
  local cache = os.getenv('XDG_CACHE_HOME') or ((os.getenv('HOME') or '.') .. '/.cache')
  return cache .. '/lua-mcp'
end

local function is_url(from) return from:match('^%a[%w+.-]*://') ~= nil end

local function join(from, file)
  return (from:gsub('[/\\]+$', '')) .. (is_url(from) and '/' or package.config:sub(1, 1)) .. file
end

-- Copies `from`'s file to `to`: a download for an address (curl is on
-- every system the modules are built for, Windows 10 and later included),
-- a copy for a local directory.
local function fetch(from, file, to)
  local source = join(from, file)
  if is_url(source) then
    local ok = os.execute(('curl -fsSL --retry 2 -o %s %s'):format(quote(to), quote(source)))
    if ok == true or ok == 0 then return true end
    return nil, ('could not download %s (curl failed)'):format(source)
  end
  local input = io.open(source, 'rb')
  if not input then return nil, ('%s does not exist'):format(source) end
  local output, err = io.open(to, 'wb')
  if not output then
    input:close()
    return nil, err
  end
  repeat
    local block = input:read(65536)
    if block then output:write(block) end
  until not block
  input:close()
  output:close()
  return true
end

-- A file's SHA-256 in hex, by the system's own tool (Neovim 0.7's
-- sha256() takes no binary, and Lua has no digest of its own).
local function sha256(path)
  local commands = WINDOWS and { 'certutil -hashfile ' .. quote(path) .. ' SHA256' }
    or { 'sha256sum ' .. quote(path) .. ' 2>/dev/null', 'shasum -a 256 ' .. quote(path) .. ' 2>/dev/null',
      'sha256 -q ' .. quote(path) .. ' 2>/dev/null' }
  for _, command in ipairs(commands) do
    local out = (read_command(command) or ''):gsub(' ', '')
    local digest = out:match('%f[%x](%x+)%f[%X]')
    if digest and #digest == 64 then return digest:lower() end
  end
  return nil, 'no SHA-256 tool found (sha256sum, shasum, sha256 or certutil)'
end

-- The manifest's module entries. In Neovim by its JSON decoder; elsewhere
-- line by line, as `make dist` writes one entry per line.
local function parse_manifest(text)
  local vim = rawget(_G, 'vim')
  if vim and vim.json then
    local ok, manifest = pcall(vim.json.decode, text)
    if ok and type(manifest) == 'table' then return manifest end
    return nil
  end
  local manifest = { version = text:match('"version"%s*:%s*"([^"]+)"'), modules = {} }
  local modules = text:match('"modules"%s*:%s*(%b[])')
  for line in (modules or ''):gmatch('[^\n]+') do
    local entry = {}
    for key, value in line:gmatch('"(%w+)"%s*:%s*"?([^",}]*)"?') do entry[key] = value end
    if entry.file then
      entry.size = tonumber(entry.size)
      manifest.modules[#manifest.modules + 1] = entry
    end
  end
  return manifest.version and manifest or nil
end

local function read_file(path)
  local file = io.open(path, 'rb')
  if not file then return nil end
  local text = file:read('*a')
  file:close()
  return text
end

-- Writes `text` to `path` by rename: a reader never sees half of it.
local function write_by_rename(path, text)
  local temporary = path .. '.' .. unique() .. '.part'
  local file = io.open(temporary, 'wb')
  if not file then return end
  file:write(text)
  file:close()
  -- Windows renames over nothing that exists.
  if WINDOWS then os.remove(path) end
  if not os.rename(temporary, path) then os.remove(temporary) end
end

-- The manifest and its text, fetched from `from`.
local function read_manifest(from, dir)
  local temporary = join(dir, 'manifest.json.' .. unique() .. '.part')
  local ok, err = fetch(from, 'manifest.json', temporary)
  if not ok then return nil, err end
  local text = read_file(temporary) or ''
  os.remove(temporary)
  local manifest = parse_manifest(text)
  if not manifest or type(manifest.modules) ~= 'table' then
    return nil, ('%s is not a lua-mcp manifest'):format(join(from, 'manifest.json'))
  end
  return manifest, nil, text
end

-- The manifest `from` gave when the module was installed, kept beside it
-- (manifest.json, and manifest.from naming where it came from): a later
-- start whose module still matches it needs no network at all, so an
-- editor starts offline and never waits for a download it does not need.
local function kept_manifest(dir, from)
  if read_file(join(dir, 'manifest.from')) ~= from then return nil end
  local manifest = parse_manifest(read_file(join(dir, 'manifest.json')) or '')
  if manifest and type(manifest.modules) == 'table' then return manifest end
end

local function keep_manifest(dir, from, text)
  write_by_rename(join(dir, 'manifest.json'), text)
  write_by_rename(join(dir, 'manifest.from'), from)
end

local function make_dir(dir)
  local vim = rawget(_G, 'vim')
  if vim and vim.fn then
    vim.fn.mkdir(dir, 'p')
  elseif WINDOWS then
    os.execute('mkdir ' .. quote(dir) .. ' 2>NUL')
  else
    os.execute('mkdir -p ' .. quote(dir))
  end
end

-- The entry for this platform and ABI, or what to do instead.
local function choose(manifest, from, platform, abi)
  for _, entry in ipairs(manifest.modules) do
    if entry.platform == platform and entry.abi == abi then
      -- The name becomes a path: nothing but a plain file name is taken.
      if type(entry.file) ~= 'string' or not entry.file:match('^[%w][%w._-]*$')
        or type(entry.sha256) ~= 'string' or not entry.sha256:match('^%x+$') or #entry.sha256 ~= 64 then
        return nil, ('the manifest at %s has a malformed entry for %s %s'):format(from, platform, abi)
      end
      return entry
    end
  end
  local offered = {}
  for _, entry in ipairs(manifest.modules) do offered[#offered + 1] = entry.platform .. ' ' .. entry.abi end
  return nil, ('lua-mcp %s has no prebuilt module for %s %s (it has: %s); build it from source '
    .. 'with `make build LUA=%s` (docs/install.md), or use the pure-Lua mcp.lua')
    :format(manifest.version, platform, abi, table.concat(offered, ', '),
      abi == 'luajit' and 'luajit' or abi:sub(4, 4) .. '.' .. abi:sub(5))
end

--- Makes sure the module for this runtime is installed, and returns its
--- path (and the manifest's entry). Fetches nothing, the manifest
--- included, when the copy installed from `from` still matches the
--- manifest kept beside it. opts: `from` (a release address or a local dist/
--- directory; required), `dir` (where to install; M.default_dir()),
--- `version` (refuse a manifest of another version), `platform` and
--- `abi` (what to install instead of this runtime's).
function M.ensure(opts)
  opts = opts or {}
  if type(opts.from) ~= 'string' or opts.from == '' then
    return nil, 'lua-mcp: install needs `from`: a release address or a dist/ directory'
  end
  local platform, seen = opts.platform or M.platform()
  if not platform then
    return nil, ('lua-mcp: no prebuilt module for this system (%s); build it from source (docs/install.md)'):format(seen)
  end
  local abi = opts.abi or M.abi()
  local dir = opts.dir or M.default_dir()
  make_dir(dir)
  local kept = kept_manifest(dir, opts.from)
  if kept and (not opts.version or kept.version == opts.version) then
    local entry = choose(kept, opts.from, platform, abi)
    local path = entry and join(dir, entry.file)
    if path and exists(path) and sha256(path) == entry.sha256:lower() then return path, entry end
  end
  local manifest, err, text = read_manifest(opts.from, dir)
  if not manifest then return nil, 'lua-mcp: ' .. err end
  if opts.version and manifest.version ~= opts.version then
    return nil, ('lua-mcp: %s offers version %s, not %s'):format(opts.from, tostring(manifest.version), opts.version)
  end
  local entry, why = choose(manifest, opts.from, platform, abi)
  if not entry then return nil, why end

  local path = join(dir, entry.file)
  if exists(path) and sha256(path) == entry.sha256:lower() then
    keep_manifest(dir, opts.from, text)
    return path, entry
  end

  local temporary = path .. '.' .. unique() .. '.part'
  local fetched, fetch_err = fetch(opts.from, entry.file, temporary)
  if not fetched then
    os.remove(temporary)
    return nil, 'lua-mcp: ' .. fetch_err
  end
  local digest, digest_err = sha256(temporary)
  if digest ~= entry.sha256:lower() then
    os.remove(temporary)
    if not digest then return nil, 'lua-mcp: ' .. digest_err end
    return nil, ('lua-mcp: %s has SHA-256 %s, but the manifest says %s: the download is corrupt '
      .. 'or not this release\'s; nothing was installed'):format(join(opts.from, entry.file), digest, entry.sha256)
  end
  -- A stale copy (its check failed above) is moved away first: Windows
  -- renames over nothing that exists.
  if exists(path) then os.remove(path) end
  local renamed, rename_err = os.rename(temporary, path)
  if not renamed then
    os.remove(temporary)
    return nil, 'lua-mcp: cannot install ' .. path .. ': ' .. tostring(rename_err)
  end
  keep_manifest(dir, opts.from, text)
  return path, entry
end

--- The native module, installed first if need be (see M.ensure), loaded
--- and registered as `mcp`, so that `require('mcp')` gives it from then
--- on (before any `mcp.lua` on the path, the pure reference included).
function M.load(opts)
  local path, err = M.ensure(opts)
  if not path then error(err, 2) end
  local open, load_err = package.loadlib(path, 'luaopen_mcp')
  if not open then error(('lua-mcp: %s did not load: %s'):format(path, load_err), 2) end
  local mcp = open('mcp', path)
  package.loaded.mcp = mcp
  M.loaded_from = path
  return mcp
end

return M
