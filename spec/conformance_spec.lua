-- The official MCP conformance suite (@modelcontextprotocol/conformance
-- 0.2.0-alpha.12, pinned in spec/peers) grading spec/conformance/client.lua,
-- which drives the native module over Streamable HTTP: every client
-- scenario at every protocol revision the suite lists (2025-03-26 to
-- 2026-07-28; the suite runs the servers of that revision, and our client
-- finds their era itself), and each extension scenario once. A run fails
-- this spec when it fails and is not in spec/conformance/expected-failures.yml,
-- or when it is listed there and passes (the list only shrinks).
--
-- The suite needs node 22 (it imports fs.globSync); spec/peers carries one
-- in node_modules/.bin, put first on the suite's PATH only.
local H = require('helpers')

local bin = H.ROOT .. '/spec/peers/node_modules/.bin'
local suite = 'PATH=' .. bin .. ':"$PATH" ' .. bin .. '/conformance'
local client = H.LUA .. ' ' .. H.ROOT .. '/spec/conformance/client.lua'
local REVISIONS = { '2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28' }

local function read(command)
  local p = io.popen(command .. ' 2>&1')
  local out = p:read('*a')
  p:close()
  return out
end

-- Each run: a scenario, and the revision it runs at (nil for an extension).
-- Listed when the #peer block is registered, not as the file loads: the
-- passes that leave the peers out (every runtime but 5.4) then start no
-- node for it (five listings, 3 s of processor time a pass).
local function list_runs()
  local runs = {}
  for _, revision in ipairs(REVISIONS) do
    for name in read(suite .. ' list --client --spec-version ' .. revision):gmatch('\n  %- ([^ \n]+)') do
      runs[#runs + 1] = { scenario = name, revision = revision }
    end
  end
  for name in read(suite .. ' list --client'):gmatch('\n  %- ([^ \n]+) %[extension%]') do
    runs[#runs + 1] = { scenario = name }
  end
  return runs
end

local expected = {}
for name in (H.slurp(H.ROOT .. '/spec/conformance/expected-failures.yml') or ''):gmatch('\n  %- "?([^\n"]+)') do
  expected[name] = true
end

describe('conformance #peer', function()
  local runs = list_runs()
  it('the suite lists 69 runs: 59 scenario-revision pairs and 10 extensions', function()
    local extensions = 0
    for _, run in ipairs(runs) do
      if not run.revision then extensions = extensions + 1 end
    end
    assert.equal(69, #runs)
    assert.equal(10, extensions)
  end)

  for _, run in ipairs(runs) do
    -- Named as expected-failures.yml names it: SCENARIO@REVISION, or the
    -- extension's name alone.
    local name = run.revision and (run.scenario .. '@' .. run.revision) or run.scenario
    local verdict = expected[name] and ' fails, as expected-failures.yml says' or ' passes'
    it(name .. verdict, function()
      local at = run.revision and (' --spec-version ' .. run.revision) or ''
      -- The skills scenarios whose task is to use a skill: the client loads
      -- it (and must refuse it); the others only list.
      local task = run.scenario:find('^sep%-2640%-client%-verify') and ' --use-skills' or ''
      local out = read(suite .. ' client --command "' .. client .. task .. '" --scenario ' .. run.scenario .. at)
      local passed, total, failed = out:match('Passed: (%d+)/(%d+), (%d+) failed')
      assert.is_truthy(passed, out)
      if run.scenario:find('^sep%-2640%-client') then
        -- Passed by verifying, not by never reading a skill.
        assert.falsy(out:find('SKIPPED', 1, true) or out:find('Not testable', 1, true), out)
      end
      -- sse-retry warns (without failing) when a loaded machine reconnects
      -- a little after the server's retry time; a warning is not a failure.
      local failing = tonumber(failed) > 0
      if expected[name] then
        assert.is_true(failing, name .. ' now passes: take it off spec/conformance/expected-failures.yml\n' .. out)
      else
        assert.is_false(failing, out)
      end
    end)
  end
end)
