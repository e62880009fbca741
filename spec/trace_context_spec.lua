-- opts.meta and mcp.traceparent: a request's own _meta entries reach the
-- server beside what the client puts there, on every method and every
-- page; W3C trace context made and continued; the refusals word for word.
local H = require('helpers')

local mcp = H.native()

-- A live server that logs each request's method and params._meta.
local function logged_client(opts)
  local log = H.tmpname()
  local o = { command = H.faulty('paged'), env = { META_LOG = log }, era = 'legacy' }
  for k, v in pairs(opts or {}) do o[k] = v end
  return mcp.new(o), log
end

-- What the server saw: { {method, meta}, ... }, initialize and the probe left out.
local function seen(log)
  local out = {}
  local f = io.open(log)
  if not f then return out end
  for line in f:lines() do
    local method, meta = line:match('^(%S+) (.*)$')
    if method ~= 'initialize' then out[#out + 1] = { method, mcp.json_decode(meta) } end
  end
  f:close()
  return out
end

local PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'

describe('opts.meta', function()
  it('puts its entries in a call\'s params._meta, beside the progress token', function()
    local c, log = logged_client()
    c:discover()
    local progress
    c:call('echo', { message = 'hi' }, {
      meta = { traceparent = PARENT, ['com.example/turn'] = 7 },
      on_progress = function(p) progress = p end,
    })
    c:close()
    local calls = seen(log)
    local last = calls[#calls]
    assert.equal('tools/call', last[1])
    assert.equal(PARENT, last[2].traceparent)
    assert.equal(7, last[2]['com.example/turn'])
    assert.is_not_nil(last[2].progressToken)
    assert.is_nil(progress)
    os.remove(log)
  end)

  it('goes with every page of a listing, and with the async forms', function()
    local c, log = logged_client()
    local tools = c:list_tools({ meta = { traceparent = PARENT } })
    assert.is_true(#tools >= 3)
    local handle = c:call_async('echo', { message = 'a' }, { meta = { ['com.example/turn'] = 'async' } })
    assert.equal('Echo: a', (handle:wait()))
    c:close()
    local pages, async = 0, nil
    for _, entry in ipairs(seen(log)) do
      if entry[1] == 'tools/list' then
        pages = pages + 1
        assert.equal(PARENT, entry[2].traceparent)
      elseif entry[1] == 'tools/call' then
        async = entry[2]['com.example/turn']
      end
    end
    assert.equal(3, pages)
    assert.equal('async', async)
    os.remove(log)
  end)

  it('without it, a request carries no _meta of its own', function()
    local c, log = logged_client()
    c:discover()
    c:call('echo', { message = 'hi' })
    c:call('echo', { message = 'hi' }, { meta = {} })
    c:close()
    local metas = {}
    for _, entry in ipairs(seen(log)) do
      if entry[1] == 'tools/call' then metas[#metas + 1] = entry[2] end
    end
    -- both calls reached the server, and neither with entries of its own
    assert.same({ {}, {} }, metas)
    os.remove(log)
  end)

  it('must map names to values', function()
    local c = logged_client()
    assert.has_error(function() c:call('echo', {}, { meta = 'x' }) end, 'client:call: opts.meta must be a table')
    assert.has_error(function() c:call('echo', {}, { meta = { 1, 2 } }) end,
      'client:call: opts.meta must map _meta names to values')
    assert.has_error(function() c:ping({ meta = true }) end, 'client:request: opts.meta must be a table')
    c:close()
  end)
end)

describe('mcp.traceparent', function()
  local FORMAT = '^00%-(%x+)%-(%x+)%-(%x%x)$'

  it('makes a new sampled trace with no argument, a new one each time', function()
    local a, b = mcp.traceparent(), mcp.traceparent()
    local trace, span, flags = a:match(FORMAT)
    assert.equal(32, #trace)
    assert.equal(16, #span)
    assert.equal('01', flags)
    assert.are_not.equal(a, b)
  end)

  it('continues a traceparent the host was given as a child span: same trace and flags', function()
    local child = mcp.traceparent(PARENT)
    local trace, span, flags = child:match(FORMAT)
    assert.equal('4bf92f3577b34da6a3ce929d0e0e4736', trace)
    assert.are_not.equal('00f067aa0ba902b7', span)
    assert.equal('01', flags)
  end)

  it("names the host's own trace and span, sampled or not", function()
    assert.equal(PARENT, mcp.traceparent({ trace_id = '4bf92f3577b34da6a3ce929d0e0e4736', span_id = '00f067aa0ba902b7' }))
    local unsampled = mcp.traceparent({ trace_id = '4bf92f3577b34da6a3ce929d0e0e4736', sampled = false })
    assert.is_truthy(unsampled:match('^00%-4bf92f3577b34da6a3ce929d0e0e4736%-%x+%-00$'), unsampled)
  end)

  it('refuses what is not trace context, saying what it wants', function()
    assert.has_error(function() mcp.traceparent('00-abc-def-01') end,
      'mcp.traceparent: "00-abc-def-01" is not a traceparent (00-32 hex digits-16 hex digits-2 hex digits)')
    assert.has_error(function() mcp.traceparent({ trace_id = string.rep('0', 32) }) end,
      'mcp.traceparent: trace_id must be 32 lowercase hex digits, not all zero')
    assert.has_error(function() mcp.traceparent({ trace_id = '4bf92f3577b34da6a3ce929d0e0e4736', span_id = 'XYZ' }) end,
      'mcp.traceparent: span_id must be 16 lowercase hex digits, not all zero')
    assert.has_error(function() mcp.traceparent({ span_id = '00f067aa0ba902b7' }) end,
      'mcp.traceparent: opts.span_id needs opts.trace_id')
    assert.has_error(function() mcp.traceparent(42) end,
      'mcp.traceparent: expected nothing, a traceparent string or a table, got number')
  end)
end)
