-- Where the reference module is wrong, the native one is right on
-- purpose. Each case pins both behaviours, so the difference is a decision
-- on record rather than drift. The README lists these.
local H = require('helpers')
local trace = require('trace')

local function both(case)
  return H.record(H.reference, case), H.record(H.native, case)
end

local function only_step(record) return record.steps[1] end

describe('deliberate differences from the reference', function()
  it('a surrogate pair decodes to one real character, not CESU-8', function()
    local case = {
      server = { raw = function(r)
        if r.id == 2 then return '{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"smile \\ud83d\\ude00 lone \\ud83d!"}]}}' end
        return trace.encode(r)
      end },
      run = function(c) c.new(); c.step('call', function() return c.client:call('echo') end) end,
    }
    local ref, nat = both(case)
    assert.equal('smile \237\160\189\237\184\128 lone \237\160\189!', only_step(ref).returns[1])
    assert.equal('smile \240\159\152\128 lone \239\191\189!', only_step(nat).returns[1])
    assert.is_true(H.is_utf8(only_step(nat).returns[1]))
    assert.is_false(H.is_utf8(only_step(ref).returns[1]))
  end)

  local function call_with(args)
    return {
      server = {},
      run = function(c) c.new(); c.step('call', function() return c.client:call('store', args) end) end,
    }
  end

  it('a float goes out in the shortest form that reads back the same, not rounded to 14 digits', function()
    local ref, nat = both(call_with({ third = 1 / 3, edge = 1e15, tiny = 1e-7, pi = math.pi, two53 = 2 ^ 53,
      sum = 0.1 + 0.2 }))
    -- (Without an integer subtype the reference writes integral floats
    -- below 2^63 as integers.)
    local edge, two53 = '1e+15', '9.007199254741e+15'
    if not math.type then edge, two53 = '1000000000000000', '9007199254740992' end
    assert.equal('{"edge":' .. edge .. ',"pi":3.1415926535898,"sum":0.3,"third":0.33333333333333,"tiny":1e-07,'
      .. '"two53":' .. two53 .. '}', ref.sent[1]:match('"arguments":(%b{})'))
    assert.equal('{"edge":1000000000000000,"pi":3.141592653589793,"sum":0.30000000000000004,'
      .. '"third":0.3333333333333333,"tiny":1e-7,"two53":9007199254740992}', nat.sent[1]:match('"arguments":(%b{})'))
  end)

  it("an empty table goes out as [] where the discovered tool's inputSchema wants an array", function()
    local schema = { type = 'object', properties = {
      tags = { type = 'array', items = { type = 'string' } },
      meta = { type = 'object' },
      rows = { type = 'array', items = { type = 'object', properties = { cells = { type = 'array' } } } },
    } }
    local case = {
      server = { tools = { { name = 'store', description = 'Stores.', inputSchema = schema } } },
      run = function(c)
        c.new()
        c.step('discover', function() return c.client:discover() end)
        c.step('call', function() return c.client:call('store', { tags = {}, meta = {}, rows = { { cells = {} } } }) end)
        c.step('undiscovered', function() return c.client:call('other', { tags = {} }) end)
      end,
    }
    local ref, nat = both(case)
    assert.equal('{"meta":{},"rows":[{"cells":{}}],"tags":{}}', ref.sent[2]:match('"arguments":(%b{})'))
    assert.equal('{"meta":{},"rows":[{"cells":[]}],"tags":[]}', nat.sent[2]:match('"arguments":(%b{})'))
    -- A tool the client did not discover: the reference's bytes.
    assert.equal(ref.sent[3], nat.sent[3])
  end)

  it('a function in the arguments is refused with the path where it sits', function()
    local ref, nat = both(call_with({ nested = { cb = print } }))
    assert.equal('trace.encode: cannot encode a function', only_step(ref).error)
    assert.equal('MCP: cannot encode a function at arguments.nested.cb', only_step(nat).error)
    assert.same({}, nat.sent)
  end)

  it('NaN and infinity are refused instead of sent as invalid JSON', function()
    local ref, nat = both(call_with({ list = { 1, 0 / 0 } }))
    assert.is_truthy(ref.sent[1]:find('nan'))
    assert.is_nil(trace.decode(ref.sent[1]:match('[^\n]+\n[^\n]+\n([^\n]+)')))
    assert.equal('MCP: cannot encode NaN at arguments.list[2]', only_step(nat).error)
    ref, nat = both(call_with({ x = math.huge }))
    assert.equal('MCP: cannot encode an infinite number at arguments.x', only_step(nat).error)
    assert.same({}, nat.sent)
  end)

  it('a table that contains itself is refused, not a stack overflow', function()
    local loop = { name = 'loop' }
    loop.self = loop
    local ref, nat = both(call_with(loop))
    assert.is_false(only_step(ref).ok)
    assert.is_truthy(tostring(only_step(ref).error):find('stack overflow'))
    assert.equal('MCP: cannot encode a table that contains itself at arguments.self', only_step(nat).error)
    -- A table shared by two branches is not a cycle.
    local shared = { 1 }
    local _, ok = both(call_with({ a = shared, b = shared }))
    assert.is_true(only_step(ok).ok)
  end)

  it('a string that is not UTF-8 is refused instead of sent', function()
    local ref, nat = both(call_with({ blob = 'caf\233' }))
    assert.is_true(only_step(ref).ok)
    assert.equal('MCP: cannot encode a string that is not UTF-8 at arguments.blob', only_step(nat).error)
  end)

  it('a long description is cut on a character boundary', function()
    local desc = string.rep('x', 116) .. 'é is past the cut'
    local case = {
      server = { tools = { { name = 'accent', description = desc } } },
      run = function(c) c.new(); c.step('mount', function() return c.mcp.mount(c.registry, c.client) end) end,
    }
    local ref, nat = both(case)
    local ref_desc = ref.steps[1].registry[1].description
    local nat_desc = nat.steps[1].registry[1].description
    assert.equal(string.rep('x', 116) .. '\195...', ref_desc)
    assert.is_false(H.is_utf8(ref_desc))
    assert.equal(string.rep('x', 116) .. '...', nat_desc)
  end)

  it('a reply with neither result nor error says so', function()
    local case = {
      server = { raw = function(r)
        if r.id == 2 then return '{"jsonrpc":"2.0","id":2}' end
        return trace.encode(r)
      end },
      run = function(c) c.new(); c.step('call', function() return c.client:call('echo') end) end,
    }
    local ref, nat = both(case)
    -- (5.3+ words it "attempt to index a nil value", 5.1 "attempt to index local")
    assert.is_truthy(only_step(ref).error:find('attempt to index'))
    assert.equal('MCP tools/call echo failed: the reply has no result', only_step(nat).error)
  end)

  it('a second discover over a url keeps server_info', function()
    local case = {
      server = {},
      run = function(c)
        c.new({ url = 'http://127.0.0.1:1/mcp' })
        c.step('discover', function() return c.client:discover() end)
        c.step('again', function() return c.client:discover() end)
      end,
    }
    local ref, nat = both(case)
    assert.same(ref.sent, nat.sent)
    -- The reference takes the tools/list reply for the initialize reply.
    assert.is_nil(ref.steps[2].fields.server_info)
    assert.same({ name = 'scripted', version = '1.2.3' }, nat.steps[2].fields.server_info)
    assert.equal('2025-06-18', nat.steps[2].fields.negotiated_version)
  end)

  it('a call without a tool name fails before anything is sent', function()
    local case = {
      server = {},
      run = function(c) c.new(); c.step('call', function() return c.client:call(nil, {}) end) end,
    }
    local ref, nat = both(case)
    assert.equal(1, #ref.sent)
    assert.is_truthy(only_step(ref).error:find('concatenate'))
    assert.same({}, nat.sent)
    assert.equal('client:call: the tool name must be a string, got nil', only_step(nat).error)
  end)
end)
