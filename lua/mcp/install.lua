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
-- truncated download, and HTTPS the rest, so a plain http:// address is
-- taken from this machine only. The folder it all goes to is the user's
-- alone: one another user could write would let them choose the code
-- this process loads.
local M = {}

local WINDOWS = package.config:sub(1, 1) == '\\'

-- No manifest comes near this (one is a few KiB): nothing larger is read,
-- so a hostile or broken `from` cannot make the loader hold it in memory.
local MANIFEST_LIMIT = 1024 * 1024

-- What a refusal to read `from`'s manifest tells the user to check.
local CHECK_FROM = "`from` should be a lua-mcp release's address or a dist/ that `make dist` made"

-- A command's whole output, or nil.
local function read_command(command)
  local pipe = io.popen(command)
  if not pipe then return nil end
  local out = pipe:read('*a')
  pipe:close()
  return out
end

-- What cmd.exe reads as its own even between double quotes (`"` ends
-- them, `%` and `!` expand) or once a quote is off balance (`^ & | < >`),
-- and the line breaks that end its command: no quoting makes these plain
-- text there, so ensure refuses a `dir` or `from` holding one.
local CMD_SPECIAL = '["%%!^&|<>\r\n]'

local function quote(s)
  if WINDOWS then
    -- The last guard: ensure has refused these already.
    assert(not s:find(CMD_SPECIAL), 'lua-mcp: not passed to cmd.exe: ' .. s)
    return '"' .. s .. '"'
  end
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

-- A strict JSON decoder (RFC 8259) for the manifest. The loader runs where
-- no JSON library is (any Lua, a Neovim plugin with no module yet), and
-- reads a manifest the same way everywhere, Neovim included, whatever its
-- layout. Arrays and objects carry a metatable each, so that the checks
-- below tell `[]` from `{}`; null is NULL, which no check takes for a value.
local ARRAY, OBJECT, NULL = {}, {}, {}
local MAX_DEPTH = 64
local ESCAPES = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t' }
local LITERALS = { ['true'] = true, ['false'] = false, null = NULL }

-- Raised inside the decoder, caught by decode_json.
local function fail(at, what) error({ at = at, what = what }, 0) end

local function skip_space(text, i) return text:find('[^ \t\r\n]', i) or #text + 1 end

local function utf8_char(cp)
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64) end
  if cp < 0x10000 then
    return string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  return string.char(0xF0 + math.floor(cp / 262144), 0x80 + math.floor(cp / 4096) % 64,
    0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
end

-- The \u escape at `k` (a surrogate pair takes two) as UTF-8, and where
-- the string goes on.
local function decode_unicode(text, k)
  local cp = tonumber(text:match('^%x%x%x%x', k + 2) or '', 16) or fail(k, 'a malformed \\u escape')
  if cp >= 0xDC00 and cp <= 0xDFFF then fail(k, 'a lone surrogate') end
  if cp < 0xD800 or cp > 0xDBFF then return utf8_char(cp), k + 6 end
  local low = text:sub(k + 6, k + 7) == '\\u' and tonumber(text:match('^%x%x%x%x', k + 8) or '', 16)
  if not low or low < 0xDC00 or low > 0xDFFF then fail(k, 'a lone surrogate') end
  return utf8_char(0x10000 + (cp - 0xD800) * 1024 + (low - 0xDC00)), k + 12
end

-- The string whose opening quote is at `i`, and the position after it.
local function decode_string(text, i)
  local parts, j = {}, i + 1
  while true do
    local k = text:find('[%z\1-\31"\\]', j) or fail(i, 'an unterminated string')
    parts[#parts + 1] = text:sub(j, k - 1)
    local c = text:sub(k, k)
    if c == '"' then return table.concat(parts), k + 1 end
    if c ~= '\\' then fail(k, 'a control character in a string') end
    local escape = text:sub(k + 1, k + 1)
    if escape == 'u' then
      parts[#parts + 1], j = decode_unicode(text, k)
    else
      parts[#parts + 1], j = ESCAPES[escape] or fail(k, 'an unknown escape'), k + 2
    end
  end
end

local function decode_number(text, i)
  local _, j = text:find('^-?0', i)
  if not j then _, j = text:find('^-?[1-9]%d*', i) end
  if not j then fail(i, 'a malformed number') end
  j = select(2, text:find('^%.%d+', j + 1)) or j
  j = select(2, text:find('^[eE][-+]?%d+', j + 1)) or j
  return tonumber(text:sub(i, j)), j + 1
end

local decode_value

-- The items of the array or object opened at `i`, each read by
-- `item(position)`, which returns where it ends; the position after the
-- closing bracket.
local function decode_items(text, i, close, item)
  i = skip_space(text, i + 1)
  if text:sub(i, i) == close then return i + 1 end
  while true do
    i = skip_space(text, item(i))
    local c = text:sub(i, i)
    if c == close then return i + 1 end
    if c ~= ',' then fail(i, ('a missing , or %s'):format(close)) end
    i = skip_space(text, i + 1)
  end
end

local function decode_array(text, i, depth)
  local array = setmetatable({}, ARRAY)
  local after = decode_items(text, i, ']', function(at)
    local value, next_at = decode_value(text, at, depth)
    array[#array + 1] = value
    return next_at
  end)
  return array, after
end

local function decode_object(text, i, depth)
  local object = setmetatable({}, OBJECT)
  local after = decode_items(text, i, '}', function(at)
    if text:sub(at, at) ~= '"' then fail(at, 'a key that is not a string') end
    local key, colon = decode_string(text, at)
    colon = skip_space(text, colon)
    if text:sub(colon, colon) ~= ':' then fail(colon, 'a missing :') end
    -- Two readers could take different ones of a key given twice.
    if object[key] ~= nil then fail(at, ('"%s" given twice'):format(key)) end
    local value, next_at = decode_value(text, colon + 1, depth)
    object[key] = value
    return next_at
  end)
  return object, after
end

-- The value at `i` (after any space), and the position after it.
function decode_value(text, i, depth)
  i = skip_space(text, i)
  local c = text:sub(i, i)
  if c == '{' or c == '[' then
    if depth >= MAX_DEPTH then fail(i, 'nesting deeper than ' .. MAX_DEPTH) end
    return (c == '{' and decode_object or decode_array)(text, i, depth + 1)
  end
  if c == '"' then return decode_string(text, i) end
  if c == '-' or c:match('%d') then return decode_number(text, i) end
  local word = text:match('^%a+', i)
  if LITERALS[word] ~= nil then return LITERALS[word], i + #word end
  fail(i, c == '' and 'an unexpected end' or ('an unexpected %q'):format(c))
end

-- The value `text` holds, or nil and what is wrong with it.
local function decode_json(text)
  local ok, value = pcall(function()
    local value, after = decode_value(text, 1, 0)
    after = skip_space(text, after)
    if after <= #text then fail(after, 'more after the value') end
    return value
  end)
  if ok then return value end
  if type(value) ~= 'table' then return nil, 'not JSON: ' .. tostring(value) end
  return nil, ('not JSON: %s at byte %d'):format(value.what, value.at)
end

-- Each entry's fields and their types: all of them must be there.
local FIELDS = { { 'platform', 'string' }, { 'abi', 'string' }, { 'file', 'string' }, { 'size', 'number' },
  { 'sha256', 'string' } }

-- What is wrong with the `n`th module entry, or nil.
local function entry_problem(entry, n)
  if getmetatable(entry) ~= OBJECT then return ('entry %d of "modules" is not an object'):format(n) end
  for _, field in ipairs(FIELDS) do
    local name, kind = field[1], field[2]
    if entry[name] == nil then return ('entry %d of "modules" has no "%s"'):format(n, name) end
    if type(entry[name]) ~= kind then
      return ('entry %d of "modules" has a "%s" that is not a %s'):format(n, name, kind)
    end
  end
  -- The name becomes a path: nothing but a plain file name is taken.
  if not entry.file:match('^[%w][%w._-]*$') then
    return ('entry %d of "modules" has a "file" that is not a plain file name'):format(n)
  end
  if #entry.sha256 ~= 64 or not entry.sha256:match('^%x+$') then
    return ('entry %d of "modules" has a "sha256" that is not 64 hex digits'):format(n)
  end
  if entry.size < 0 or entry.size ~= math.floor(entry.size) or entry.size >= 2 ^ 53 then
    return ('entry %d of "modules" has a "size" that is not a whole number of bytes'):format(n)
  end
end

local function manifest_problem(manifest)
  if getmetatable(manifest) ~= OBJECT then return 'not a JSON object' end
  if type(manifest.version) ~= 'string' then return 'no "version" string' end
  if getmetatable(manifest.modules) ~= ARRAY then return 'no "modules" array' end
  for n, entry in ipairs(manifest.modules) do
    local problem = entry_problem(entry, n)
    if problem then return problem end
  end
end

-- The manifest `text` holds, or nil and the refusal naming it (`name`):
-- every field the loader uses is there and of its type before any is.
local function parse_manifest(text, name)
  local manifest, problem = decode_json(text)
  problem = problem or manifest_problem(manifest)
  if not problem then return manifest end
  return nil, ('lua-mcp: %s is not a lua-mcp manifest (%s); %s'):format(name, problem, CHECK_FROM)
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

local LOOPBACK = { localhost = true, ['127.0.0.1'] = true, ['[::1]'] = true }

-- Whether the manifest from `from` comes as the digests in it were
-- published: by HTTPS, or from this machine (a directory, or plain http://
-- to a loopback address). Anyone on the way can change a manifest fetched
-- over plain http://, digests and all.
local function trusted_source(from)
  local scheme, rest = from:match('^(%a[%w+.-]*)://(.*)$')
  if not scheme or scheme:lower() == 'https' then return true end
  local host = rest:match('^[^/?#]*'):gsub('^.*@', ''):gsub(':%d*$', ''):lower()
  return scheme:lower() == 'http' and LOOPBACK[host] == true
end

-- A command's exit code from os.execute's results, on any Lua: 5.1 and
-- LuaJIT give system()'s status, the code times 256 on Unix.
local function exit_code(ok, _, code)
  if type(ok) == 'number' then return WINDOWS and ok or math.floor(ok / 256) end
  return ok and 0 or code
end

-- Copies `from`'s file to `to`: a download for an address (curl is on
-- every system the modules are built for, Windows 10 and later included),
-- a copy for a local directory. No redirect leaves HTTPS, and curl stops
-- past `limit` bytes (its code 63), which this says as 'too large'.
local function fetch(from, file, to, limit)
  local source = join(from, file)
  if is_url(source) then
    local code = exit_code(os.execute(('curl -fsSL --retry 2 --proto =http,https --proto-redir =https%s -o %s %s')
      :format(limit and ' --max-filesize ' .. limit or '', quote(to), quote(source))))
    if code == 0 then return true end
    return nil, ('could not download %s (curl failed)'):format(source), code == 63 and 'too large' or nil
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

-- The digest in a SHA-256 tool's output: the first field of sha256sum's
-- and shasum's line (a `\` before it marks an escaped name), sha256 -q's
-- line, or certutil's own line, whose byte pairs older Windows separates
-- by spaces. certutil's first line, `SHA256 hash of FILE:`, holds hex
-- letters too, so nothing short of a whole 64-digit field is taken.
local function digest_in(out)
  for line in out:gmatch('[^\r\n]+') do
    local first = line:match('^\\?(%x+)%s') or ''
    if #first == 64 then return first:lower() end
    local whole = line:gsub('%s', '')
    if #whole == 64 and whole:match('^%x+$') then return whole:lower() end
  end
end

-- A file's SHA-256 in hex, by the system's own tool (Neovim 0.7's
-- sha256() takes no binary, and Lua has no digest of its own).
local function sha256(path)
  local commands = WINDOWS and { 'certutil -hashfile ' .. quote(path) .. ' SHA256' }
    or { 'sha256sum -- ' .. quote(path) .. ' 2>/dev/null', 'shasum -a 256 -- ' .. quote(path) .. ' 2>/dev/null',
      'sha256 -q -- ' .. quote(path) .. ' 2>/dev/null' }
  for _, command in ipairs(commands) do
    local digest = digest_in(read_command(command) or '')
    if digest then return digest end
  end
  return nil, 'no SHA-256 tool found (sha256sum, shasum, sha256 or certutil)'
end

-- A file's bytes, or nil if it cannot be opened; nil and 'too large' past
-- `limit` bytes, of which no more than one past are read.
local function read_file(path, limit)
  local file = io.open(path, 'rb')
  if not file then return nil end
  local text = file:read(limit + 1) or ''
  file:close()
  if #text > limit then return nil, 'too large' end
  return text
end

-- The user's id, asked once.
local user_id
local function my_uid()
  user_id = user_id or (read_command('id -u 2>/dev/null') or ''):match('%d+')
  return user_id
end

-- `ls -l`'s permissions (`rwxr-x---`) in octal (750).
local function octal(permissions)
  local digits = {}
  for i = 1, 7, 3 do
    local r, w, x = permissions:sub(i, i), permissions:sub(i + 1, i + 1), permissions:sub(i + 2, i + 2)
    digits[#digits + 1] = (r == 'r' and 4 or 0) + (w == 'w' and 2 or 0) + (x:match('[xst]') and 1 or 0)
  end
  return table.concat(digits)
end

-- Nil when `path` is the user's alone or absent; else the refusal, naming
-- it and why. Owner and mode come from `ls -ldnL`, which says the same on
-- Linux, macOS and the BSDs (-L: what a link points to, which is what is
-- read). On Windows the folder's ACL decides, and %LOCALAPPDATA%'s is the
-- user's own.
local function not_private(path)
  if WINDOWS then return nil end
  local line = read_command('ls -ldnL -- ' .. quote(path) .. ' 2>/dev/null') or ''
  local permissions, owner = line:match('^.(%S+)%s+%d+%s+(%d+)')
  if not owner then
    -- Nothing there; or something ls could not tell of, which is not trusted.
    if not exists(path) then return nil end
    return ('lua-mcp: cannot tell who owns %s (ls -ldnL said: %s); install into another folder (opts.dir)')
      :format(path, (line:gsub('%s+$', '')))
  end
  if owner ~= my_uid() then
    return ('lua-mcp: %s belongs to another user (uid %s), who could choose the code this process loads; '
      .. 'remove it, or install into a folder of your own (opts.dir)'):format(path, owner)
  end
  -- The group's w, and everyone's.
  if permissions:sub(5, 5) == 'w' or permissions:sub(8, 8) == 'w' then
    return ('lua-mcp: %s can be written by others (mode %s), who could choose the code this process loads; '
      .. 'run chmod go-w %s, or install into a folder of your own (opts.dir)'):format(path, octal(permissions), path)
  end
end

-- Files the loader writes are 0644 whatever the umask: no one else may
-- change what a later start believes (not_private would refuse it then).
local function set_mode(path)
  if not WINDOWS then os.execute('chmod 644 -- ' .. quote(path)) end
end

-- Writes `text` to `path` by rename: a reader never sees half of it.
local function write_by_rename(path, text)
  local temporary = path .. '.' .. unique() .. '.part'
  local file = io.open(temporary, 'wb')
  if not file then return end
  file:write(text)
  file:close()
  set_mode(temporary)
  -- Windows renames over nothing that exists.
  if WINDOWS then os.remove(path) end
  if not os.rename(temporary, path) then os.remove(temporary) end
end

-- The text of `from`'s manifest. A directory's is read where it is; an
-- address's is downloaded into `dir` first.
local function manifest_text(from, dir)
  local name = join(from, 'manifest.json')
  local path, ok, err, too_large = name, true, nil, nil
  if is_url(from) then
    path = join(dir, 'manifest.json.' .. unique() .. '.part')
    ok, err, too_large = fetch(from, 'manifest.json', path, MANIFEST_LIMIT)
  end
  local text
  if ok then text, too_large = read_file(path, MANIFEST_LIMIT) end
  if path ~= name then os.remove(path) end
  if too_large then
    return nil, ('lua-mcp: %s is larger than 1 MiB, which no lua-mcp manifest is; %s'):format(name, CHECK_FROM)
  end
  if not ok then return nil, 'lua-mcp: ' .. err end
  if not text then return nil, ('lua-mcp: %s does not exist'):format(name) end
  return text
end

-- The manifest and its text, fetched from `from`.
local function read_manifest(from, dir)
  local text, err = manifest_text(from, dir)
  if not text then return nil, err end
  local manifest, problem = parse_manifest(text, join(from, 'manifest.json'))
  if not manifest then return nil, problem end
  return manifest, nil, text
end

-- The manifest `from` gave when the module was installed, kept beside it
-- (manifest.json, and manifest.from naming where it came from): a later
-- start whose module still matches it needs no network at all, so an
-- editor starts offline and never waits for a download it does not need.
-- Nil when there is none for `from` (or it is damaged: it is fetched
-- again); nil and the refusal when it is not the user's alone.
local function kept_manifest(dir, from)
  for _, name in ipairs({ 'manifest.from', 'manifest.json' }) do
    local refusal = not_private(join(dir, name))
    if refusal then return nil, refusal end
  end
  if read_file(join(dir, 'manifest.from'), MANIFEST_LIMIT) ~= from then return nil end
  return (parse_manifest(read_file(join(dir, 'manifest.json'), MANIFEST_LIMIT) or '', ''))
end

local function keep_manifest(dir, from, text)
  write_by_rename(join(dir, 'manifest.json'), text)
  write_by_rename(join(dir, 'manifest.from'), from)
end

-- The install folder, made the user's alone (0700) if it is new, as is
-- every folder above it made with it (mkdir -m would set the last one's
-- mode only). One that is not theirs alone is refused, not changed:
-- whatever another user put there before would stay.
local function private_dir(dir)
  local vim = rawget(_G, 'vim')
  if vim and vim.fn then
    vim.fn.mkdir(dir, 'p', 448)
  elseif WINDOWS then
    os.execute('mkdir ' .. quote(dir) .. ' 2>NUL')
  else
    os.execute('umask 077 && mkdir -p -- ' .. quote(dir))
  end
  local refusal = not_private(dir)
  if refusal then return nil, refusal end
  return true
end

-- The entry for this platform and ABI, or what to do instead.
local function choose(manifest, platform, abi)
  for _, entry in ipairs(manifest.modules) do
    if entry.platform == platform and entry.abi == abi then return entry end
  end
  local offered = {}
  for _, entry in ipairs(manifest.modules) do offered[#offered + 1] = entry.platform .. ' ' .. entry.abi end
  return nil, ('lua-mcp %s has no prebuilt module for %s %s (it has: %s); build it from source '
    .. 'with `make build LUA=%s` (docs/install.md), or use the pure-Lua mcp.lua')
    :format(manifest.version, platform, abi, table.concat(offered, ', '),
      abi == 'luajit' and 'luajit' or abi:sub(4, 4) .. '.' .. abi:sub(5))
end

-- Whether `path` holds the entry's module: false when it is absent or
-- differs (it is fetched again); nil and the refusal when it is not the
-- user's alone. The module is checked where it is loaded from, in a folder
-- and a file no one else can write (private_dir, not_private), so the bytes
-- checked are the bytes loaded: nobody can swap the file in between.
-- Checking a private copy instead would only move the question to that
-- copy's folder, and leave a copy behind for every start.
local function matches(path, entry)
  if not exists(path) then return false end
  local refusal = not_private(path)
  if refusal then return nil, refusal end
  return sha256(path) == entry.sha256:lower()
end

-- The installed module's path and entry when the manifest kept for `from`
-- still vouches for it; nil otherwise, or nil, nil and the refusal.
local function installed(dir, opts, platform, abi)
  local kept, refusal = kept_manifest(dir, opts.from)
  if not kept or (opts.version and kept.version ~= opts.version) then return nil, nil, refusal end
  local entry = choose(kept, platform, abi)
  if not entry then return nil end
  local path = join(dir, entry.file)
  local ok, why = matches(path, entry)
  if ok then return path, entry end
  return nil, nil, why
end

-- Fetches the entry's module into `dir`, checks it and renames it to
-- `path`: its path, or nil and the refusal.
local function install(opts, entry, path)
  local temporary = path .. '.' .. unique() .. '.part'
  local fetched, fetch_err = fetch(opts.from, entry.file, temporary)
  if not fetched then
    os.remove(temporary)
    return nil, 'lua-mcp: ' .. fetch_err
  end
  set_mode(temporary)
  local digest, digest_err = sha256(temporary)
  if digest ~= entry.sha256:lower() then
    os.remove(temporary)
    if not digest then return nil, 'lua-mcp: ' .. digest_err end
    return nil, ('lua-mcp: %s has SHA-256 %s, but the manifest says %s: the download is corrupt '
      .. 'or not this release\'s; nothing was installed'):format(join(opts.from, entry.file), digest, entry.sha256)
  end
  -- A stale copy (its check failed) is moved away first: Windows renames
  -- over nothing that exists.
  if exists(path) then os.remove(path) end
  local renamed, rename_err = os.rename(temporary, path)
  if not renamed then
    os.remove(temporary)
    return nil, 'lua-mcp: cannot install ' .. path .. ': ' .. tostring(rename_err)
  end
  return path
end

-- Why `opts` cannot be acted on, or nil.
local function refuse_options(opts, dir)
  if type(opts.from) ~= 'string' or opts.from == '' then
    return 'lua-mcp: install needs `from`: a release address or a dist/ directory'
  end
  if type(dir) ~= 'string' or dir == '' then return 'lua-mcp: `dir` must be a folder\'s path' end
  if not trusted_source(opts.from) then
    return ('lua-mcp: %s is not an https:// address: a manifest fetched over plain http:// can be changed on '
      .. 'the way, digests and all; use https:// (plain http:// is taken from this machine only: localhost, '
      .. '127.0.0.1, [::1])'):format(opts.from)
  end
  if not WINDOWS then return nil end
  local unsafe = (dir:find(CMD_SPECIAL) and dir) or (is_url(opts.from) and opts.from:find(CMD_SPECIAL) and opts.from)
  if unsafe then
    return ('lua-mcp: %s holds a character cmd.exe reads as its own (" %% ! ^ & | < > or a line break), and the '
      .. 'loader runs commands with it; give a `dir` and `from` without them'):format(unsafe)
  end
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
  local dir = opts.dir or M.default_dir()
  local refusal = refuse_options(opts, dir)
  if refusal then return nil, refusal end
  local platform, seen = opts.platform or M.platform()
  if not platform then
    return nil, ('lua-mcp: no prebuilt module for this system (%s); build it from source (docs/install.md)'):format(seen)
  end
  local abi = opts.abi or M.abi()
  local made, made_err = private_dir(dir)
  if not made then return nil, made_err end
  local path, entry, refused = installed(dir, opts, platform, abi)
  if refused then return nil, refused end
  if path then return path, entry end

  local manifest, err, text = read_manifest(opts.from, dir)
  if not manifest then return nil, err end
  if opts.version and manifest.version ~= opts.version then
    return nil, ('lua-mcp: %s offers version %s, not %s'):format(opts.from, manifest.version, opts.version)
  end
  local why
  entry, why = choose(manifest, platform, abi)
  if not entry then return nil, why end
  path = join(dir, entry.file)
  local ok, not_ours = matches(path, entry)
  if ok == nil then return nil, not_ours end
  if not ok then
    path, err = install(opts, entry, path)
    if not path then return nil, err end
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
