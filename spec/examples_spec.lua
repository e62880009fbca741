-- The examples run as a user would run them, and do what they say.
local H = require('helpers')

local function run(example)
  return H.command('cd ' .. H.ROOT .. ' && timeout 60 ' .. H.LUA .. ' lua/examples/' .. example)
end

describe('examples', function()
  it('luv.lua: a 10 ms timer never stalls near a call\'s length while three slow calls complete', function()
    local out, status = run('luv.lua')
    assert.equal(0, status, out)
    for _, ms in ipairs({ 300, 500, 700 }) do
      assert.is_truthy(out:find('slept ' .. ms .. ' ms', 1, true), out)
    end
    local ticks, stall = out:match('timer ticks: (%d+), longest stall: (%S+) ms')
    assert.is_truthy(stall, out)
    -- the calls take 700 ms: a loop blocked by any of them would tick far less
    assert.is_true(tonumber(ticks) >= 30, out)
    -- and stall 300 ms at least, the shortest call's sleep. The bound
    -- leaves room for a loaded machine: with the suite's builds beside
    -- it, the scheduler alone once held a tick back 60 ms.
    assert.is_true(tonumber(stall) < 150, out)
  end)

  it('parallel.lua: five calls to two servers end with the slowest, each result reported', function()
    local out, status = run('parallel.lua')
    assert.equal(0, status, out)
    for _, what in ipairs({ 'fetched the weather', 'searched the docs', 'read the calendar', 'counter.increment -> 5',
      'counter.get -> 5' }) do
      assert.is_truthy(out:find(what, 1, true), out)
    end
    local total = tonumber(out:match('five calls in (%d+) ms'))
    -- in series: 950 ms of sleeping alone
    assert.is_true(total < 900, out)
  end)
end)
