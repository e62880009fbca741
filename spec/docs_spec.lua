-- The README and the manual (docs/*.md, and bench/README.md) are held to
-- what the module does, so they cannot drift from it.
--
-- A fenced block is run when the line just before its fence is a marker,
-- an HTML comment that does not show once the Markdown is rendered:
--
--   <!-- runs -->                       the block runs and exits 0
--   <!-- runs: expect "TEXT" -->        ... and its output contains TEXT
--                                       (several expects may follow; TEXT
--                                       may be in single quotes; \t and \n
--                                       stand for a tab and a newline)
--
-- From the repository root:
--   ```lua      runs with lua5.4, with ./?.so on package.cpath, lua/?.lua on
--               package.path and the native module in package.preload
--               (lua/mcp.lua, the reference, would be found first)
--   ```sh       runs with sh
--   ```console  a transcript: each `$ COMMAND` line runs with sh, and what
--               it prints (stdout and stderr) must be exactly the lines
--               that follow it, up to the next `$ ` line
--
-- The blocks say lua5.4, so they run in the suite's 5.4 pass (when
-- ./mcp.so is the 5.4 build); elsewhere they are pending. The README's
-- length and every relative link are checked in every pass.
local H = require('helpers')

local MAX_README_LINES = 250

local function read(path)
  local f = assert(io.open(H.ROOT .. '/' .. path, 'rb'), 'cannot read ' .. path)
  local text = f:read('*a')
  f:close()
  return text
end

local function exists(path)
  local f = io.open(H.ROOT .. '/' .. path, 'rb')
  if f then f:close() end
  return f ~= nil
end

local function split_lines(text)
  if text:sub(-1) ~= '\n' then text = text .. '\n' end
  local lines = {}
  for line in text:gmatch('([^\n]*)\n') do lines[#lines + 1] = line end
  return lines
end

-- README.md, every docs/*.md, bench/README.md.
local function doc_files()
  local files = { 'README.md' }
  local p = io.popen('cd ' .. H.ROOT .. ' && ls docs/*.md 2>/dev/null')
  for line in p:lines() do files[#files + 1] = line end
  p:close()
  if exists('bench/README.md') then files[#files + 1] = 'bench/README.md' end
  return files
end

-- A marker's words after `runs`: nothing, or `: expect "TEXT" ...`.
-- Returns the list of expected texts, or nil and why.
local ESCAPES = { t = '\t', n = '\n', ['\\'] = '\\', ['"'] = '"', ["'"] = "'" }
local function parse_marker(rest)
  local expects = {}
  rest = rest:gsub('^%s*:?%s*', '')
  while rest ~= '' do
    local quote, after = rest:match('^expect%s+(["\'])()')
    if not quote then return nil, 'cannot read the marker at: ' .. rest end
    local i, text = after, {}
    while true do
      local c = rest:sub(i, i)
      if c == '' then return nil, 'an expect is not closed: ' .. rest end
      if c == quote then break end
      if c == '\\' then
        local e = ESCAPES[rest:sub(i + 1, i + 1)]
        if not e then return nil, 'unknown escape in an expect: ' .. rest:sub(i, i + 1) end
        text[#text + 1] = e
        i = i + 2
      else
        text[#text + 1] = c
        i = i + 1
      end
    end
    expects[#expects + 1] = table.concat(text)
    rest = rest:sub(i + 1):gsub('^%s*', '')
  end
  return expects
end

-- Every fenced block of a file, with its marker if it has one; and what is
-- wrong with the file's markers and fences.
local function blocks_of(path)
  local lines = split_lines(read(path))
  local blocks, problems = {}, {}
  local marker, marker_line
  local i = 1
  while i <= #lines do
    local line = lines[i]
    local fence, lang = line:match('^(```+)%s*([%w_+-]*)')
    if fence then
      local body = {}
      local j = i + 1
      while j <= #lines and not lines[j]:match('^' .. fence .. '%s*$') do
        body[#body + 1] = lines[j]
        j = j + 1
      end
      if j > #lines then problems[#problems + 1] = path .. ':' .. i .. ': a fence that is never closed' end
      blocks[#blocks + 1] = { path = path, line = i, lang = lang, lines = body, marked = marker ~= nil,
        expects = marker, fence_lines = lines }
      marker = nil
      i = j + 1
    else
      if marker then
        problems[#problems + 1] = path .. ':' .. marker_line .. ': a runs marker not followed by a fence'
        marker = nil
      end
      local rest = line:match('^%s*<!%-%-%s*runs(.-)%-%->%s*$')
      if rest then
        local expects, why = parse_marker(rest)
        if expects then
          marker, marker_line = expects, i
        else
          problems[#problems + 1] = path .. ':' .. i .. ': ' .. why
        end
      elseif line:match('^%s*<!%-%-%s*runs') then
        problems[#problems + 1] = path .. ':' .. i .. ': a runs marker must be a line of its own'
      end
      i = i + 1
    end
  end
  if marker then problems[#problems + 1] = path .. ':' .. marker_line .. ': a runs marker at the end of the file' end
  return blocks, problems
end

-- The lines of a file outside its fenced code, with their numbers.
local function prose_lines(path)
  local out, in_fence = {}, nil
  for n, line in ipairs(split_lines(read(path))) do
    local fence = line:match('^(```+)')
    if in_fence then
      if line:match('^' .. in_fence .. '%s*$') then in_fence = nil end
    elseif fence then
      in_fence = fence
    else
      out[#out + 1] = { n = n, line = line }
    end
  end
  return out
end

-- Headings as GitHub makes anchors of them: lower case, punctuation
-- dropped, spaces as hyphens, repeats numbered.
local function anchors_of(path)
  local anchors, seen = {}, {}
  for _, at in ipairs(prose_lines(path)) do
    local title = at.line:match('^#+%s+(.-)%s*#*%s*$')
    if title then
      local slug = title:lower():gsub('[^%w%s%-_\128-\255]', ''):gsub('%s', '-')
      local n = seen[slug]
      seen[slug] = (n or 0) + 1
      anchors[n and (slug .. '-' .. n) or slug] = true
    end
  end
  return anchors
end

-- The relative links of a file outside its code (fences and `spans`):
-- { line, target } each.
local function links_of(path)
  local links = {}
  for _, at in ipairs(prose_lines(path)) do
    local prose = at.line:gsub('`[^`]*`', '')
    for target in prose:gmatch('%]%(([^)%s]+)%)') do
      if not target:match('^%a[%w+.-]*:') then links[#links + 1] = { line = at.n, target = target } end
    end
  end
  return links
end

local function dir_of(path) return path:match('^(.*)/[^/]*$') end

-- What is wrong with one link of `path`, or nil.
local function broken(path, target)
  local file, fragment = target:match('^([^#]*)#?(.*)$')
  local full = path
  if file ~= '' then
    local dir = dir_of(path)
    full = dir and (dir .. '/' .. file) or file
    if not exists(full) then return 'no file ' .. full end
  end
  if fragment ~= '' and full:match('%.md$') then
    if not anchors_of(full)[fragment] then return 'no heading #' .. fragment .. ' in ' .. full end
  end
  return nil
end

local function write_temp(text, suffix)
  local path = H.tmpname() .. suffix
  local f = assert(io.open(path, 'w'))
  f:write(text)
  f:close()
  return path
end

-- Runs a file with `interpreter` from the root: output and exit status.
local function run_file(interpreter, text, suffix)
  local path = write_temp(text, suffix)
  local out, status = H.command('cd ' .. H.ROOT .. ' && timeout 60 ' .. interpreter .. ' ' .. path)
  os.remove(path)
  return out, status
end

local LUA_PRELUDE = "package.cpath = './?.so;' .. package.cpath; package.path = 'lua/?.lua;' .. package.path; "
  .. "package.preload['mcp'] = assert(package.loadlib('./mcp.so', 'luaopen_mcp'))\n"

-- A console block as its commands, each with the output it shows.
local function transcript(lines)
  local steps = {}
  for _, line in ipairs(lines) do
    local command = line:match('^%$ (.*)$')
    if command then
      steps[#steps + 1] = { command = command, output = {} }
    elseif steps[#steps] then
      table.insert(steps[#steps].output, line)
    else
      return nil, 'a console block must start with a `$ ` line'
    end
  end
  return steps
end

local RUNNERS = {
  lua = function(block)
    local out, status = run_file('lua5.4', LUA_PRELUDE .. table.concat(block.lines, '\n') .. '\n', '.lua')
    assert.equal(0, status, 'exit status ' .. tostring(status) .. ':\n' .. out)
    return out
  end,
  sh = function(block)
    local out, status = run_file('sh', table.concat(block.lines, '\n') .. '\n', '.sh')
    assert.equal(0, status, 'exit status ' .. tostring(status) .. ':\n' .. out)
    return out
  end,
  console = function(block)
    local steps = assert(transcript(block.lines))
    local all = {}
    for _, step in ipairs(steps) do
      local out, status = run_file('sh', step.command .. '\n', '.sh')
      assert.equal(0, status, '$ ' .. step.command .. '\nexit status ' .. tostring(status) .. ':\n' .. out)
      local shown = #step.output > 0 and (table.concat(step.output, '\n') .. '\n') or ''
      assert.equal(shown, out, '$ ' .. step.command)
      all[#all + 1] = out
    end
    return table.concat(all)
  end,
}

-- Everything is read when the spec loads, so each block is a test of its own.
local files = doc_files()
local all_blocks, all_problems = {}, {}
for _, path in ipairs(files) do
  local blocks, problems = blocks_of(path)
  for _, b in ipairs(blocks) do all_blocks[#all_blocks + 1] = b end
  for _, p in ipairs(problems) do all_problems[#all_problems + 1] = p end
end

local run_it = H.LUA == 'lua5.4' and it or pending

describe('the documentation #docs', function()
  it('the README is at most ' .. MAX_README_LINES .. ' lines', function()
    local n = #split_lines(read('README.md'))
    assert.is_true(n <= MAX_README_LINES, 'README.md has ' .. n .. ' lines')
  end)

  it('the manual is there: docs/README.md and the pages it lists', function()
    assert.is_true(exists('docs/README.md'))
    assert.is_true(#files >= 3, table.concat(files, ' '))
  end)

  it('every relative link leads to a file that exists, and to a heading there', function()
    local bad = {}
    for _, path in ipairs(files) do
      for _, link in ipairs(links_of(path)) do
        local why = broken(path, link.target)
        if why then bad[#bad + 1] = string.format('%s:%d: (%s) %s', path, link.line, link.target, why) end
      end
    end
    assert.same({}, bad)
  end)

  it('every runs marker stands on the line before a fence, in a language the spec runs', function()
    local bad = {}
    for _, p in ipairs(all_problems) do bad[#bad + 1] = p end
    for _, b in ipairs(all_blocks) do
      if b.marked and not RUNNERS[b.lang] then
        bad[#bad + 1] = string.format('%s:%d: cannot run a %q block', b.path, b.line, b.lang)
      end
    end
    assert.same({}, bad)
  end)

  it('the README has runnable blocks', function()
    local n = 0
    for _, b in ipairs(all_blocks) do
      if b.marked and b.path == 'README.md' then n = n + 1 end
    end
    assert.is_true(n >= 2, 'README.md has ' .. n .. ' runnable blocks')
  end)

  for _, b in ipairs(all_blocks) do
    if b.marked and RUNNERS[b.lang] then
      local first = ''
      for _, line in ipairs(b.lines) do
        if line:match('%S') and not line:match('^%s*%-%-') then first = line:gsub('^%s+', ''); break end
      end
      run_it(string.format('%s:%d (%s) runs: %s', b.path, b.line, b.lang, first:sub(1, 60)), function()
        local out = RUNNERS[b.lang](b)
        for _, text in ipairs(b.expects) do
          assert.is_truthy(out:find(text, 1, true), 'expected ' .. string.format('%q', text) .. ' in:\n' .. out)
        end
      end)
    end
  end
end)

describe('docs/architecture.md', function()
  it('lists every source file under src/, and none that is gone', function()
    local listed = {}
    for path in read('docs/architecture.md'):gmatch('\n(src/%S+)') do listed[path] = true end
    local files = {}
    local find = io.popen('cd ' .. H.ROOT .. " && find src -name '*.rs' -o -name '*.lua' | sort")
    for path in find:lines() do files[#files + 1] = path end
    find:close()
    local missing, gone = {}, {}
    for _, path in ipairs(files) do
      if not listed[path] then missing[#missing + 1] = path end
      listed[path] = nil
    end
    for path in pairs(listed) do gone[#gone + 1] = path end
    table.sort(gone)
    assert.same({}, missing, 'not in docs/architecture.md: ' .. table.concat(missing, ', '))
    assert.same({}, gone, 'in docs/architecture.md but not in src/: ' .. table.concat(gone, ', '))
  end)
end)

describe('the release', function()
  local version = read('Cargo.toml'):match('\nversion = "([^"]+)"')

  it('doc/lua-mcp.txt is what scripts/vimdoc.lua makes of docs/ (make vimdoc)', function()
    local made, status = H.command('cd ' .. H.ROOT .. ' && lua5.4 scripts/vimdoc.lua')
    assert.equal(0, status, made)
    assert.equal(read('doc/lua-mcp.txt'), made, 'doc/lua-mcp.txt is stale: run make vimdoc')
  end)

  it('has one version: Cargo.toml\'s, in the versioned rockspec, the CHANGELOG and mcp._VERSION', function()
    local rockspec = read('lua-mcp-' .. version .. '-1.rockspec')
    assert.equal(version .. '-1', rockspec:match('\nversion = "([^"]+)"'))
    assert.equal('v' .. version, rockspec:match('tag = "([^"]+)"'))
    assert.equal(version, read('CHANGELOG.md'):match('\n## (%d+%.%d+%.%d+)'))
    if H.MODULE_FILE and exists(H.MODULE_FILE) then
      assert.equal('lua-mcp ' .. version, H.native()._VERSION)
    end
  end)

  it('the versioned rockspec builds and installs what the scm one does', function()
    local scm, versioned = read('lua-mcp-scm-1.rockspec'), read('lua-mcp-' .. version .. '-1.rockspec')
    assert.equal(scm:match('\nbuild = (%b{})'), versioned:match('\nbuild = (%b{})'))
    assert.equal(scm:match('\ndependencies = (%b{})'), versioned:match('\ndependencies = (%b{})'))
  end)
end)

describe('the unsafe code', function()
  -- Each `unsafe` block (and `unsafe impl`) has a SAFETY comment of its
  -- own right above it (or on its line), and each `unsafe fn` a
  -- `# Safety` section in its doc comment: one comment shared by several
  -- blocks says nothing of the later ones.
  it('says why each unsafe block is sound, and what each unsafe fn needs', function()
    local unexplained = {}
    local find = io.popen('cd ' .. H.ROOT .. " && find src -name '*.rs' | sort")
    for path in find:lines() do
      local lines = {}
      for line in io.lines(H.ROOT .. '/' .. path) do lines[#lines + 1] = line end
      for i, line in ipairs(lines) do
        local code = line:gsub('//.*', '')
        local above = {}
        local j = i - 1
        while j >= 1 and (lines[j]:match('^%s*//') or lines[j]:match('^%s*#%[')) do
          above[#above + 1] = lines[j]
          j = j - 1
        end
        local said = table.concat(above, '\n') .. '\n' .. line
        if (code:match('unsafe%s*{') or code:match('unsafe impl')) and not said:find('SAFETY', 1, true) then
          unexplained[#unexplained + 1] = path .. ':' .. i
        end
        if code:match('unsafe fn') and not said:find('# Safety', 1, true) then
          unexplained[#unexplained + 1] = path .. ':' .. i .. ' (unsafe fn)'
        end
      end
    end
    find:close()
    assert.same({}, unexplained)
  end)
end)
