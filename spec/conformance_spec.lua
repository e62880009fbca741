-- The official MCP conformance suite (@modelcontextprotocol/conformance
-- 0.1.16, pinned in spec/peers) grading spec/conformance/client.lua, which
-- drives the native module over Streamable HTTP: every client scenario the
-- suite lists, one at a time. A scenario fails this spec when it fails and
-- is not in spec/conformance/expected-failures.yml, or when it is listed
-- there and passes (the list only shrinks).
--
-- The suite needs node 22 (it imports fs.globSync); spec/peers carries one
-- in node_modules/.bin, put first on the suite's PATH only.
local H = require('helpers')

local bin = H.ROOT .. '/spec/peers/node_modules/.bin'
local suite = 'PATH=' .. bin .. ':"$PATH" ' .. bin .. '/conformance'
local client = H.LUA .. ' ' .. H.ROOT .. '/spec/conformance/client.lua'

local function read(command)
  local p = io.popen(command .. ' 2>&1')
  local out = p:read('*a')
  p:close()
  return out
end

local scenarios = {}
for name in read(suite .. ' list --client'):gmatch('\n  %- ([^ \n]+)') do scenarios[#scenarios + 1] = name end

local expected = {}
for name in (H.slurp(H.ROOT .. '/spec/conformance/expected-failures.yml') or ''):gmatch('\n  %- ([^\n]+)') do
  expected[name] = true
end

describe('conformance #peer', function()
  it('the suite lists the 26 client scenarios of 0.1.16', function()
    assert.equal(26, #scenarios, table.concat(scenarios, ' '))
  end)

  for _, scenario in ipairs(scenarios) do
    local verdict = expected[scenario] and ' fails, as expected-failures.yml says' or ' passes'
    it(scenario .. verdict, function()
      local out = read(suite .. ' client --command "' .. client .. '" --scenario ' .. scenario)
      local passed, total, failed = out:match('Passed: (%d+)/(%d+), (%d+) failed')
      assert.is_truthy(passed, out)
      -- sse-retry warns (without failing) when a loaded machine reconnects
      -- a little after the server's retry time; a warning is not a failure.
      local failing = tonumber(failed) > 0
      if expected[scenario] then
        assert.is_true(failing, scenario .. ' now passes: take it off spec/conformance/expected-failures.yml\n' .. out)
      else
        assert.is_false(failing, out)
      end
    end)
  end
end)
