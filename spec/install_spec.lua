-- The prebuilt-module installer (lua/mcp/install.lua) and the binary
-- rock's chooser (lua/rock/mcp.lua), against a dist/ of one module made
-- here from ./mcp.so, the suite's build for this runtime: what is
-- installed, when nothing is fetched again, and the exact refusals,
-- those of a manifest, an address or a folder that cannot be trusted
-- included. On Windows (the Windows pass) the loader's own cases there,
-- with ./mcp.dll. The real artifacts are installed by scripts/dist-check.sh.
local H = require('helpers')

local describe_unix = H.WINDOWS and pending or describe
local describe_windows = H.WINDOWS and describe or pending

local function read(path)
  local f = assert(io.open(path, 'rb'))
  local s = f:read('*a')
  f:close()
  return s
end

local function write(path, s)
  local f = assert(io.open(path, 'wb'))
  f:write(s)
  f:close()
end

local function sha256(path)
  return (H.command('sha256sum ' .. path)):match('^(%x+)')
end

-- A fresh installer each time, so that no state carries between cases.
local function installer()
  return assert(loadfile(H.ROOT .. '/lua/mcp/install.lua'))()
end

local ABI = installer().abi()

-- A manifest entry as JSON, its fields in the order scripts/dist-manifest.sh
-- writes them; a field set to false is left out. `pretty` puts each
-- field on a line of its own, as `jq .` would.
local FIELDS = { 'platform', 'abi', 'file', 'size', 'sha256' }
local function entry_json(entry, pretty)
  local fields = {}
  for _, name in ipairs(FIELDS) do
    local value = entry[name]
    if value ~= false then
      fields[#fields + 1] = ('"%s": %s'):format(name, type(value) == 'string' and '"' .. value .. '"'
        or type(value) == 'number' and ('%d'):format(value) or tostring(value))
    end
  end
  if pretty then return '{\n      ' .. table.concat(fields, ',\n      ') .. '\n    }' end
  return '{' .. table.concat(fields, ', ') .. '}'
end

-- The manifest for `entries`: laid out the way scripts/dist-manifest.sh
-- writes it (one module entry per line), or as `layout` says: 'pretty'
-- (every field on a line of its own, as the release's own manifest.json
-- is when pretty-printed) or 'compact' (all on one line).
local function manifest_json(entries, layout)
  local items = {}
  for i, entry in ipairs(entries) do items[i] = entry_json(entry, layout == 'pretty') end
  local text = ([[{
  "name": "lua-mcp",
  "version": "0.3.0",
  "modules": [
    %s
  ],
  "rocks": []
}
]]):format(table.concat(items, ',\n    '))
  if layout == 'compact' then text = text:gsub('%s*\n%s*', '') end
  return text
end

-- A dist/ holding ./mcp.so under the release's name for `platform`, with
-- a manifest that has an entry for Windows first. `edit(entry)` may
-- change this platform's entry first; `layout` is manifest_json's.
local function fake_dist(platform, edit, layout)
  local dir = H.tmpname()
  os.execute('mkdir -p ' .. dir)
  local file = ('mcp-0.3.0-%s-%s.so'):format(platform, ABI)
  os.execute(('cp %s/mcp.so %s/%s'):format(H.ROOT, dir, file))
  local entry = { platform = platform, abi = ABI, file = file, size = #read(dir .. '/' .. file),
    sha256 = sha256(dir .. '/' .. file) }
  if edit then edit(entry) end
  local windows = { platform = 'win32-x86_64', abi = 'lua54', file = 'mcp-0.3.0-win32-x86_64-lua54.dll', size = 1,
    sha256 = ('0'):rep(64) }
  write(dir .. '/manifest.json', manifest_json({ windows, entry }, layout))
  return dir, entry
end

-- What a refusal of `from`'s manifest ends with.
local CHECK_FROM = "`from` should be a lua-mcp release's address or a dist/ that `make dist` made"

-- Runs `source` in a process of the suite's Lua, the loader on its path,
-- after the shell commands `before` (a umask, a PATH); its output and
-- exit status.
local function run_loader(source, before)
  local path = H.tmpname() .. '.lua'
  write(path, ('package.path = %q .. package.path\n'):format(H.ROOT .. '/lua/?.lua;') .. source)
  local out, status = H.command(('%s cd %s && timeout 60 %s %s'):format(before or '', H.ROOT, H.LUA, path))
  os.remove(path)
  return out, status
end

local function mode_of(path) return (H.command('stat -c %a ' .. path)):gsub('%s+$', '') end

describe_unix('mcp.install', function()
  local platform = assert(installer().platform())

  -- Folders a case has the loader make, removed after it.
  local made = {}
  local function scratch()
    made[#made + 1] = H.tmpname()
    return made[#made]
  end
  after_each(function()
    for _, dir in ipairs(made) do os.execute('rm -rf ' .. dir) end
    made = {}
  end)

  it('names this machine the way LuaRocks names platforms, and this runtime by its ABI', function()
    local uname = H.command('uname -m'):gsub('%s+$', '')
    local processor = ({ x86_64 = 'x86_64', aarch64 = 'aarch64', arm64 = 'aarch64' })[uname]
    assert.equal('linux-' .. processor, platform)
    local expected = { ['lua5.1'] = 'lua51', ['lua5.3'] = 'lua53', ['lua5.4'] = 'lua54', luajit = 'luajit' }
    assert.equal(expected[H.LUA:match('[^/]*$')], ABI)
  end)

  it('installs the module for this platform and ABI by rename, and loads it as require("mcp")', function()
    local from, entry = fake_dist(platform)
    local dir = H.tmpname()
    local out, status = H.run_lua(([[
      package.path = %q .. package.path
      local install = require('mcp.install')
      local mcp = install.load({ from = %q, dir = %q })
      io.write(tostring(mcp.native), ' ', tostring(require('mcp') == mcp), ' ', install.loaded_from)
    ]]):format(H.ROOT .. '/lua/?.lua;', from, dir))
    assert.equal(0, status, out)
    assert.equal(('true true %s/%s'):format(dir, entry.file), out)
    -- the module and the manifest it was checked against, and no
    -- temporary file beside them
    assert.equal('manifest.from\nmanifest.json\n' .. entry.file .. '\n', (H.command('LC_ALL=C ls ' .. dir)))
    os.execute('rm -rf ' .. from .. ' ' .. dir)
  end)

  it('fetches nothing when a verified copy is installed, and replaces one that fails its check', function()
    local from, entry = fake_dist(platform)
    local dir = H.tmpname()
    local install = installer()
    assert.equal(dir .. '/' .. entry.file, (install.ensure({ from = from, dir = dir })))
    -- the source gone: a verified copy needs nothing from it
    os.rename(from .. '/' .. entry.file, from .. '/moved')
    assert.equal(dir .. '/' .. entry.file, (install.ensure({ from = from, dir = dir })))
    -- nothing at the source at all (offline): the kept manifest answers
    os.rename(from .. '/manifest.json', from .. '/manifest.moved')
    assert.equal(dir .. '/' .. entry.file, (install.ensure({ from = from, dir = dir })))
    os.rename(from .. '/manifest.moved', from .. '/manifest.json')
    -- the installed copy damaged: fetched again
    os.rename(from .. '/moved', from .. '/' .. entry.file)
    write(dir .. '/' .. entry.file, 'damaged')
    assert.equal(dir .. '/' .. entry.file, (install.ensure({ from = from, dir = dir })))
    assert.equal(entry.sha256, sha256(dir .. '/' .. entry.file))
    os.execute('rm -rf ' .. from .. ' ' .. dir)
  end)

  it('refuses a module whose SHA-256 is not the manifest\'s, installing nothing', function()
    local from, entry = fake_dist(platform)
    local dir = H.tmpname()
    local good = entry.sha256
    -- the manifest's digest stands; the file's bytes change
    local bytes = read(from .. '/' .. entry.file)
    write(from .. '/' .. entry.file, bytes:sub(1, 1000) .. 'X' .. bytes:sub(1002))
    local bad = sha256(from .. '/' .. entry.file)
    local path, err = installer().ensure({ from = from, dir = dir })
    assert.is_nil(path)
    assert.equal(('lua-mcp: %s/%s has SHA-256 %s, but the manifest says %s: the download is corrupt or not '
      .. "this release's; nothing was installed"):format(from, entry.file, bad, good), err)
    assert.equal('', (H.command('ls -A ' .. dir)))
    os.execute('rm -rf ' .. from .. ' ' .. dir)
  end)

  it('says what to do when no module fits this runtime', function()
    local from = fake_dist(platform)
    local path, err = installer().ensure({ from = from, dir = scratch(), platform = 'freebsd-x86_64' })
    assert.is_nil(path)
    local build = ABI == 'luajit' and 'luajit' or ABI:sub(4, 4) .. '.' .. ABI:sub(5)
    assert.equal(('lua-mcp 0.3.0 has no prebuilt module for freebsd-x86_64 %s (it has: win32-x86_64 lua54, '
      .. '%s %s); build it from source with `make build LUA=%s` (docs/install.md), or use the pure-Lua mcp.lua')
      :format(ABI, platform, ABI, build), err)
    os.execute('rm -rf ' .. from)
  end)

  it('takes nothing but a plain file name from the manifest', function()
    local from = fake_dist(platform, function(entry) entry.file = '../escape.so' end)
    local path, err = installer().ensure({ from = from, dir = scratch() })
    assert.is_nil(path)
    assert.equal(('lua-mcp: %s/manifest.json is not a lua-mcp manifest (entry 2 of "modules" has a "file" that is not '
      .. 'a plain file name); %s'):format(from, CHECK_FROM), err)
    os.execute('rm -rf ' .. from)
  end)

  it('reads any valid JSON manifest, pretty-printed or on one line, on every runtime', function()
    for _, layout in ipairs({ 'pretty', 'compact' }) do
      local from, entry = fake_dist(platform, nil, layout)
      local dir = H.tmpname()
      local path, got = installer().ensure({ from = from, dir = dir })
      assert.equal(dir .. '/' .. entry.file, path, layout .. ': ' .. tostring(got))
      for _, field in ipairs(FIELDS) do assert.equal(entry[field], got[field], layout .. ' ' .. field) end
      -- the kept copy is read the same way: nothing fetched again
      os.remove(from .. '/' .. entry.file)
      assert.equal(dir .. '/' .. entry.file, (installer().ensure({ from = from, dir = dir })), layout)
      os.execute('rm -rf ' .. from .. ' ' .. dir)
    end
  end)

  it('refuses a damaged manifest or entry, naming the manifest, and raises no Lua error', function()
    local manifest = 'lua-mcp: %s/manifest.json is not a lua-mcp manifest (%s); ' .. CHECK_FROM
    local cases = {
      { function(entry) entry.platform = false end, 'entry 2 of "modules" has no "platform"' },
      { function(entry) entry.size = '12' end, 'entry 2 of "modules" has a "size" that is not a number' },
      { function(entry) entry.sha256 = entry.sha256:sub(2) end, 'entry 2 of "modules" has a "sha256" that is not 64 hex digits' },
      { function(entry) entry.size = -1 end, 'entry 2 of "modules" has a "size" that is not a whole number of bytes' },
    }
    for _, case in ipairs(cases) do
      local from = fake_dist(platform, case[1], 'pretty')
      local ok, path, err = pcall(installer().ensure, { from = from, dir = scratch() })
      assert.is_true(ok, path)
      assert.is_nil(path)
      assert.equal(manifest:format(from, case[2]), err)
      os.execute('rm -rf ' .. from)
    end
    local texts = {
      { '{"version": "0.3.0", "modules": [],}', 'not JSON: a key that is not a string at byte 36' },
      { '{"version": "0.3.0", "modules": [{"platform": "linux-x86_64",\n "abi": nul}]}',
        'not JSON: an unexpected "n" at byte 71' },
      { '{"version": "0.3.0", "modules": [] "rocks": []}', 'not JSON: a missing , or } at byte 36' },
      { '{"version": "0.3.0", "modules": []} {}', 'not JSON: more after the value at byte 37' },
      { '{"version": "0.3.0", "version": "9.9.9", "modules": []}', 'not JSON: "version" given twice at byte 22' },
      { '{"version": "0.3.0", "modules": {}}', 'no "modules" array' },
      { '{"version": 3, "modules": []}', 'no "version" string' },
      { '{"version": "0.3.0", "modules": [null]}', 'entry 1 of "modules" is not an object' },
      { '["0.3.0"]', 'not a JSON object' },
      { '', 'not JSON: an unexpected end at byte 1' },
    }
    for _, case in ipairs(texts) do
      local from = H.tmpname()
      os.execute('mkdir -p ' .. from)
      write(from .. '/manifest.json', case[1])
      local ok, path, err = pcall(installer().ensure, { from = from, dir = scratch() })
      assert.is_true(ok, path)
      assert.is_nil(path)
      assert.equal(manifest:format(from, case[2]), err)
      os.execute('rm -rf ' .. from)
    end
  end)

  it('reads no more than 1 MiB of a manifest, and refuses a larger one', function()
    local from = fake_dist(platform)
    local dir = H.tmpname()
    local text = read(from .. '/manifest.json')
    -- 1 MiB exactly, the rest spaces: taken
    write(from .. '/manifest.json', text .. (' '):rep(1048576 - #text))
    assert.is_truthy((installer().ensure({ from = from, dir = dir })))
    -- one byte more: refused
    write(from .. '/manifest.json', text .. (' '):rep(1048577 - #text))
    local refusal = ('lua-mcp: %s/manifest.json is larger than 1 MiB, which no lua-mcp manifest is; %s')
      :format(from, CHECK_FROM)
    assert.same({ nil, refusal }, { installer().ensure({ from = from, dir = scratch() }) })
    -- 200 MB (sparse): refused by a process that never grows past a few MB
    os.execute('truncate -s 200M ' .. from .. '/manifest.json')
    local empty = H.tmpname()
    local out, status = run_loader(([[
      local path, err = require('mcp.install').ensure({ from = %q, dir = %q })
      local status = io.open('/proc/self/status')
      local peak = status and status:read('*a'):match('VmHWM:%%s*(%%d+) kB')
      io.write(tostring(path), ' | ', err, ' | ', tostring(peak))
    ]]):format(from, empty))
    assert.equal(0, status, out)
    local peak = tonumber(out:match(' | (%d+)$'))
    assert.equal(('nil | %s | '):format(refusal), out:sub(1, -#tostring(peak) - 1))
    if peak then assert.is_true(peak < 32 * 1024, out) end
    assert.equal('', (H.command('ls -A ' .. empty)))
    os.execute('rm -rf ' .. from .. ' ' .. dir .. ' ' .. empty)
  end)

  it('refuses plain http:// but from this machine, saying to use https', function()
    local install = installer()
    for _, from in ipairs({ 'http://example.invalid/v0.3.0', 'HTTP://example.invalid/v0.3.0',
      'http://127.0.0.1.example.invalid/v0.3.0', 'http://localhost@example.invalid/v0.3.0', 'ftp://example.invalid/v0.3.0' }) do
      assert.same({ nil, ('lua-mcp: %s is not an https:// address: a manifest fetched over plain http:// can be changed '
        .. 'on the way, digests and all; use https:// (plain http:// is taken from this machine only: localhost, '
        .. '127.0.0.1, [::1])'):format(from) }, { install.ensure({ from = from, dir = scratch() }) })
    end
    -- loopback: fetched (port 1 answers nothing)
    for _, from in ipairs({ 'http://127.0.0.1:1/dist', 'http://localhost:1/dist', 'http://[::1]:1/dist' }) do
      assert.same({ nil, ('lua-mcp: could not download %s/manifest.json (curl failed)'):format(from) },
        { install.ensure({ from = from, dir = scratch() }) })
    end
  end)

  it('refuses an install folder, manifest or module others can write, naming it', function()
    local from, entry = fake_dist(platform)
    local dir = H.tmpname()
    local install = installer()
    assert.is_truthy((install.ensure({ from = from, dir = dir })))
    local function refused(path, mode)
      return { nil, ('lua-mcp: %s can be written by others (mode %s), who could choose the code this process loads; '
        .. 'run chmod go-w %s, or install into a folder of your own (opts.dir)'):format(path, mode, path) }
    end
    -- a shared folder, as another user planted a manifest and module in it
    os.execute('chmod 777 ' .. dir)
    assert.same(refused(dir, '777'), { install.ensure({ from = from, dir = dir }) })
    os.execute('chmod 770 ' .. dir)
    assert.same(refused(dir, '770'), { install.ensure({ from = from, dir = dir }) })
    os.execute('chmod 700 ' .. dir)
    for _, name in ipairs({ 'manifest.from', 'manifest.json', entry.file }) do
      os.execute(('chmod 666 %s/%s'):format(dir, name))
      assert.same(refused(dir .. '/' .. name, '666'), { install.ensure({ from = from, dir = dir }) })
      os.execute(('chmod 644 %s/%s'):format(dir, name))
    end
    -- the folder's own again: the verified copy answers
    assert.equal(dir .. '/' .. entry.file, (install.ensure({ from = from, dir = dir })))
    os.execute('rm -rf ' .. from .. ' ' .. dir)
  end)

  it('refuses an install folder, manifest or module another user owns, naming it', function()
    if H.command('id -u'):match('%d+') ~= '0' then
      pending('only root can give a file to another user here')
      return
    end
    local from, entry = fake_dist(platform)
    local dir = H.tmpname()
    local install = installer()
    assert.is_truthy((install.ensure({ from = from, dir = dir })))
    local function refused(path)
      return { nil, ('lua-mcp: %s belongs to another user (uid 65534), who could choose the code this process loads; '
        .. 'remove it, or install into a folder of your own (opts.dir)'):format(path) }
    end
    os.execute('chown 65534 ' .. dir)
    assert.same(refused(dir), { install.ensure({ from = from, dir = dir }) })
    os.execute('chown 0 ' .. dir)
    for _, name in ipairs({ 'manifest.from', 'manifest.json', entry.file }) do
      os.execute(('chown 65534 %s/%s'):format(dir, name))
      assert.same(refused(dir .. '/' .. name), { install.ensure({ from = from, dir = dir }) })
      os.execute(('chown 0 %s/%s'):format(dir, name))
    end
    assert.equal(dir .. '/' .. entry.file, (install.ensure({ from = from, dir = dir })))
    os.execute('rm -rf ' .. from .. ' ' .. dir)
  end)

  it('makes its folder 0700, and any it makes above it, and its files 0644 whatever the umask', function()
    local from, entry = fake_dist(platform)
    local dir = H.tmpname()
    local out, status = run_loader(([[
      io.write(tostring(require('mcp.install').ensure({ from = %q, dir = %q })))
    ]]):format(from, dir .. '/lua-mcp'), 'umask 000 &&')
    assert.equal(0, status, out)
    assert.equal(dir .. '/lua-mcp/' .. entry.file, out)
    assert.equal('700', mode_of(dir))
    assert.equal('700', mode_of(dir .. '/lua-mcp'))
    for _, name in ipairs({ 'manifest.from', 'manifest.json', entry.file }) do
      assert.equal('644', mode_of(dir .. '/lua-mcp/' .. name), name)
    end
    os.execute('rm -rf ' .. from .. ' ' .. dir)
  end)

  it('loads the bytes it checked: a module others could swap after its check is refused before it', function()
    -- A sha256sum that swaps the file it has just vouched for, as another
    -- user who can write there could between the check and the load.
    local bin = H.tmpname()
    os.execute('mkdir -p ' .. bin)
    write(bin .. '/sha256sum', ('#!/bin/sh\n%s "$@" || exit\nfor f; do [ "$f" = -- ] || printf swapped > "$f"; done\n')
      :format((H.command('command -v sha256sum')):gsub('%s+$', '')))
    os.execute('chmod 755 ' .. bin .. '/sha256sum')
    local from, entry = fake_dist(platform)
    local function load(dir)
      return run_loader(([[
        local ok, err = pcall(require('mcp.install').load, { from = %q, dir = %q })
        io.write(tostring(ok), ' ', tostring(err))
      ]]):format(from, dir), 'PATH=' .. bin .. ':$PATH &&')
    end
    -- a fresh install into a shared folder
    local shared = H.tmpname()
    os.execute('mkdir -m 777 ' .. shared)
    assert.equal(('false lua-mcp: %s can be written by others (mode 777), who could choose the code this process loads; '
      .. 'run chmod go-w %s, or install into a folder of your own (opts.dir)'):format(shared, shared), load(shared))
    -- an installed module others can write, in the user's own folder
    local dir = H.tmpname()
    assert.is_truthy((installer().ensure({ from = from, dir = dir })))
    local module = dir .. '/' .. entry.file
    os.execute('chmod 666 ' .. module)
    assert.equal(('false lua-mcp: %s can be written by others (mode 666), who could choose the code this process loads; '
      .. 'run chmod go-w %s, or install into a folder of your own (opts.dir)'):format(module, module), load(dir))
    assert.equal(entry.sha256, sha256(module))
    os.execute('rm -rf ' .. bin .. ' ' .. from .. ' ' .. shared .. ' ' .. dir)
  end)

  it('refuses a release of another version when one is asked for, and a missing manifest', function()
    local from = fake_dist(platform)
    local install = installer()
    local path, err = install.ensure({ from = from, dir = scratch(), version = '9.9.9' })
    assert.is_nil(path)
    assert.equal(('lua-mcp: %s offers version 0.3.0, not 9.9.9'):format(from), err)
    local missing = H.tmpname()
    path, err = install.ensure({ from = missing, dir = scratch() })
    assert.is_nil(path)
    assert.equal(('lua-mcp: %s/manifest.json does not exist'):format(missing), err)
    path, err = install.ensure({})
    assert.is_nil(path)
    assert.equal('lua-mcp: install needs `from`: a release address or a dist/ directory', err)
    os.execute('rm -rf ' .. from)
  end)

  it('load raises the refusal as a plain string', function()
    local out, status = H.run_lua(([[
      package.path = %q .. package.path
      local ok, err = pcall(require('mcp.install').load, { from = %q })
      io.write(tostring(ok), ' ', type(err), ' ', err)
    ]]):format(H.ROOT .. '/lua/?.lua;', H.ROOT .. '/no-such-dist'))
    assert.equal(0, status, out)
    assert.equal(('false string lua-mcp: %s/no-such-dist/manifest.json does not exist'):format(H.ROOT), out)
  end)
end)

describe_unix("the binary rock's mcp.lua", function()
  -- A tree laid out as a rock installs it: share/lua/5.x/mcp.lua and
  -- lib/lua/5.x/mcp/ABI.so.
  local function tree_with(abis)
    local tree = H.tmpname()
    os.execute(('mkdir -p %s/share %s/lib/mcp'):format(tree, tree))
    os.execute(('cp %s/lua/rock/mcp.lua %s/share/mcp.lua'):format(H.ROOT, tree))
    for _, abi in ipairs(abis) do os.execute(('cp %s/mcp.so %s/lib/mcp/%s.so'):format(H.ROOT, tree, abi)) end
    return tree
  end

  local function require_from(tree)
    return H.command(('cd %s && %s -e %q'):format(tree, H.LUA, ([[
      package.path = %q
      package.cpath = %q
      local ok, mcp = pcall(require, 'mcp')
      if not ok then io.write('error: ', mcp) return end
      io.write(tostring(mcp.native), ' ', tostring(package.loaded.mcp == mcp), ' ', type(mcp.new))
    ]]):format(tree .. '/share/?.lua', tree .. '/lib/?.so')))
  end

  it('loads the module built for the runtime running it and returns the module itself', function()
    local tree = tree_with({ 'lua51', ABI })
    local out, status = require_from(tree)
    assert.equal(0, status, out)
    assert.equal('true true function', out)
    os.execute('rm -rf ' .. tree)
  end)

  it('says which file it looked for when the rock has no module for this runtime', function()
    local tree = tree_with({ ABI == 'lua52' and 'lua53' or 'lua52' })
    local out = require_from(tree)
    assert.is_truthy(out:find(("error: lua-mcp: this installation has no module built for %s (looked for %s/lib/mcp/%s.so); "
      .. 'install the rock made for this platform, or build from source (docs/install.md)'):format(ABI, tree, ABI), 1, true), out)
    os.execute('rm -rf ' .. tree)
  end)
end)

-- The loader on Windows (the Windows pass, under Wine): its commands go
-- through cmd.exe, and certutil gives the digest.
describe_windows('mcp.install on Windows', function()
  local made = {}
  -- A fresh folder under %TEMP%, removed after the cases.
  local function folder()
    local dir = ('%s\\lua-mcp-spec-%d-%d-%s'):format(os.getenv('TEMP') or H.ROOT, os.time(), #made,
      (tostring({}):gsub('%W', '')))
    os.execute('mkdir "' .. dir .. '"')
    made[#made + 1] = dir
    return dir
  end
  teardown(function()
    for _, dir in ipairs(made) do os.execute('rmdir /s /q "' .. dir .. '"') end
  end)

  -- A dist/ holding the suite's mcp.dll under the release's name, its
  -- manifest giving `digest` as the module's SHA-256.
  local function windows_dist(digest)
    local from = folder()
    local file = ('mcp-0.3.0-win32-x86_64-%s.dll'):format(ABI)
    write(from .. '\\' .. file, read(H.ROOT .. '\\' .. H.MODULE_FILE))
    write(from .. '\\manifest.json', manifest_json({ { platform = assert(installer().platform()), abi = ABI,
      file = file, size = 1, sha256 = digest } }))
    return from, file
  end

  -- Runs `source` in a Windows Lua process of the suite's runtime with
  -- `first` at the head of PATH; its output. Wine now and then fails to
  -- start a process (io.popen's "Invalid argument"): that is tried again.
  local function run_with_path(source, first)
    local script = folder() .. '\\run.lua'
    write(script, ('package.path = %q .. package.path\n'):format(H.ROOT .. '\\lua\\?.lua;') .. source)
    for _ = 1, 5 do
      local pipe = io.popen(('set "PATH=%s;%%PATH%%" && %s %s 2>&1'):format(first, H.LUA, script))
      if pipe then
        local out = pipe:read('*a')
        pipe:close()
        return out
      end
    end
    error('could not start ' .. H.LUA)
  end

  local DIGEST = ('0123456789abcdef'):rep(4)

  it("takes the digest from certutil's own line, whole (Windows 10) or in byte pairs (older Windows)", function()
    local pairs_of = (DIGEST:gsub('..', '%0 ')):sub(1, -2)
    for _, printed in ipairs({ DIGEST, pairs_of }) do
      -- a certutil printing what Windows 10's prints, first on PATH
      local bin = folder()
      write(bin .. '\\certutil.cmd', table.concat({ '@echo off', 'echo SHA256 hash of %~2:', 'echo ' .. printed,
        'echo CertUtil: -hashfile command completed successfully.', '' }, '\r\n'))
      local from, file = windows_dist(DIGEST)
      local dir = folder() .. '\\lua-mcp'
      local out = run_with_path(([[
        local install = require('mcp.install')
        local ok, mcp = pcall(install.load, { from = %q, dir = %q })
        io.write(tostring(ok), ' ', ok and tostring(mcp.native) .. ' ' .. install.loaded_from or tostring(mcp))
      ]]):format(from, dir), bin)
      assert.equal(('true true %s\\%s'):format(dir, file), out)
    end
  end)

  it('refuses a dir or an address holding what cmd.exe reads as its own, and runs none of it', function()
    local marker = folder() .. '\\injected'
    local from = windows_dist(DIGEST)
    local install = installer()
    local refusal = 'lua-mcp: %s holds a character cmd.exe reads as its own (" %% ! ^ & | < > or a line break), and the '
      .. 'loader runs commands with it; give a `dir` and `from` without them'
    local injected = '" & echo injected> ' .. marker .. ' & "'
    local dirs = { folder() .. '\\x' .. injected }
    for _, c in ipairs({ '%TEMP%', '!TEMP!', '^', '&', '|', '<', '>', '\n', '\r' }) do
      dirs[#dirs + 1] = folder() .. '\\a' .. c .. 'b'
    end
    local expected, got = {}, {}
    for _, dir in ipairs(dirs) do
      expected[#expected + 1] = { nil, refusal:format(dir) }
      got[#got + 1] = { install.ensure({ from = from, dir = dir }) }
    end
    local address = 'https://example.invalid/x' .. injected
    expected[#expected + 1] = { nil, refusal:format(address) }
    got[#got + 1] = { install.ensure({ from = address, dir = folder() }) }
    assert.is_nil(io.open(marker), 'cmd.exe ran the echo a dir or an address held')
    assert.same(expected, got)
  end)
end)
