-- The official MCP conformance suite (0.2.0-alpha.12, pinned in spec/peers)
-- grading spec/servers/conformance_server.lua, a Lua server on mcp.server
-- over Streamable HTTP: every server scenario at every revision the suite
-- lists (pending ones included: --suite all), and each extension once. A
-- scenario fails this spec when it fails and is not in the `server:` part
-- of spec/conformance/expected-failures.yml, or when it is listed there
-- and passes (the list only shrinks). The pass counts per revision are
-- printed.
local H = require('helpers')

local bin = H.ROOT .. '/spec/peers/node_modules/.bin'
local suite = 'PATH=' .. bin .. ':"$PATH" ' .. bin .. '/conformance'
local REVISIONS = { '2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28' }

local function read(command)
  local p = io.popen(command .. ' 2>&1')
  local out = p:read('*a')
  p:close()
  return out
end

local expected = {}
local listed = (H.slurp(H.ROOT .. '/spec/conformance/expected-failures.yml') or ''):match('\nserver:\n(.*)$') or ''
for name in listed:gmatch('\n?  %- "?([^\n"]+)') do expected[name] = true end

-- Scenario name -> passed, failed checks, from a run's summary.
local function summary(out)
  local results = {}
  -- ✓ and ✗ in UTF-8: E2 9C 93 and E2 9C 97
  for mark, name, passed, failed in out:gmatch('\n\226\156([\147\151]) ([^:\n]+): (%d+) passed, (%d+) failed') do
    results[name] = { passed = tonumber(passed), failed = tonumber(failed), ok = mark == '\147' }
  end
  return results
end

describe('conformance of a Lua server #peer', function()
  local url, stdin
  local runs = {}
  setup(function()
    local log = H.tmpname()
    stdin = assert(io.popen(H.LUA .. ' ' .. H.ROOT .. '/spec/servers/conformance_server.lua > ' .. log .. ' 2>&1', 'w'))
    local deadline = os.time() + 15
    repeat
      url = (H.slurp(log) or ''):match('^(http://[^\n]+)\n')
      if not url then os.execute('sleep 0.05') end
    until url or os.time() > deadline
    assert(url, 'the conformance server printed no URL: ' .. tostring(H.slurp(log)))
    for _, revision in ipairs(REVISIONS) do
      runs[revision] = summary(read(suite .. ' server --url ' .. url .. ' --suite all --spec-version ' .. revision))
    end
    local extensions = {}
    for name in read(suite .. ' list --server'):gmatch('\n  %- ([^ \n]+) %[extension%]') do extensions[name] = true end
    local all = summary(read(suite .. ' server --url ' .. url .. ' --suite all'))
    runs.extension = {}
    for name in pairs(extensions) do runs.extension[name] = all[name] or { passed = 0, failed = 1, ok = false } end
  end)
  teardown(function() if stdin then stdin:close() end end)

  it('passes every scenario of every revision but those expected-failures.yml lists', function()
    local table_lines, surprises = {}, {}
    for _, revision in ipairs({ '2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28', 'extension' }) do
      local passing, total = 0, 0
      for name, result in pairs(runs[revision]) do
        total = total + 1
        if result.ok then passing = passing + 1 end
        local key = revision == 'extension' and name or (name .. '@' .. revision)
        if result.ok == (expected[key] == true) then
          surprises[#surprises + 1] = key .. (result.ok and ' passes: take it off the list' or ' fails')
        end
      end
      table_lines[#table_lines + 1] = string.format('  %-11s %3d of %3d scenarios pass', revision, passing, total)
    end
    print('\n  Conformance of spec/servers/conformance_server.lua (server scenarios):\n'
      .. table.concat(table_lines, '\n'))
    table.sort(surprises)
    assert.same({}, surprises)
    assert.is_true(next(runs['2025-11-25']) ~= nil, 'no scenario ran')
  end)
end)
