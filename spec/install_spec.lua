-- The prebuilt-module installer (lua/mcp/install.lua) and the binary
-- rock's chooser (lua/rock/mcp.lua), against a dist/ of one module made
-- here from ./mcp.so, the suite's build for this runtime: what is
-- installed, when nothing is fetched again, and the exact refusals. The
-- real artifacts are installed by scripts/dist-check.sh.
local H = require('helpers')

local describe_unix = H.WINDOWS and pending or describe

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

-- A dist/ holding ./mcp.so under the release's name for `platform`, with
-- a manifest written the way scripts/dist-manifest.sh writes it (one
-- module entry per line). `edit(entry)` may change the entry first.
local function fake_dist(platform, edit)
  local dir = H.tmpname()
  os.execute('mkdir -p ' .. dir)
  local file = ('mcp-0.3.0-%s-%s.so'):format(platform, ABI)
  os.execute(('cp %s/mcp.so %s/%s'):format(H.ROOT, dir, file))
  local entry = { platform = platform, abi = ABI, file = file, size = #read(dir .. '/' .. file),
    sha256 = sha256(dir .. '/' .. file) }
  if edit then edit(entry) end
  write(dir .. '/manifest.json', ([[{
  "name": "lua-mcp",
  "version": "0.3.0",
  "modules": [
    {"platform": "win32-x86_64", "abi": "lua54", "file": "mcp-0.3.0-win32-x86_64-lua54.dll", "size": 1, "sha256": "%s"},
    {"platform": "%s", "abi": "%s", "file": "%s", "size": %d, "sha256": "%s"}
  ],
  "rocks": []
}
]]):format(('0'):rep(64), entry.platform, entry.abi, entry.file, entry.size, entry.sha256))
  return dir, entry
end

describe_unix('mcp.install', function()
  local platform = assert(installer().platform())

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
    local path, err = installer().ensure({ from = from, dir = H.tmpname(), platform = 'freebsd-x86_64' })
    assert.is_nil(path)
    local build = ABI == 'luajit' and 'luajit' or ABI:sub(4, 4) .. '.' .. ABI:sub(5)
    assert.equal(('lua-mcp 0.3.0 has no prebuilt module for freebsd-x86_64 %s (it has: win32-x86_64 lua54, '
      .. '%s %s); build it from source with `make build LUA=%s` (docs/install.md), or use the pure-Lua mcp.lua')
      :format(ABI, platform, ABI, build), err)
    os.execute('rm -rf ' .. from)
  end)

  it('takes nothing but a plain file name from the manifest', function()
    local from = fake_dist(platform, function(entry) entry.file = '../escape.so' end)
    local path, err = installer().ensure({ from = from, dir = H.tmpname() })
    assert.is_nil(path)
    assert.equal(('the manifest at %s has a malformed entry for %s %s'):format(from, platform, ABI), err)
    os.execute('rm -rf ' .. from)
  end)

  it('refuses a release of another version when one is asked for, and a missing manifest', function()
    local from = fake_dist(platform)
    local install = installer()
    local path, err = install.ensure({ from = from, dir = H.tmpname(), version = '9.9.9' })
    assert.is_nil(path)
    assert.equal(('lua-mcp: %s offers version 0.3.0, not 9.9.9'):format(from), err)
    local missing = H.tmpname()
    path, err = install.ensure({ from = missing, dir = H.tmpname() })
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
