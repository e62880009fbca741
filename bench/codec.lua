-- codec.lua - large replies and arguments through call and discover,
-- native against the pure-Lua reference, in one run.
--
--   lua5.4 bench/codec.lua [path/to/mcp.so]     (or from run.lua: make bench)
--
-- Both modules talk to the same fixture transport, a Lua function that
-- hands back a reply text made beforehand, so what is timed is the work
-- each module does at the Lua level: encoding the request, decoding the
-- reply into Lua tables, reading what it needs of them. No pipe, no
-- server: those cost the same for both and would only blur the ratio.
--
-- Payloads: a tool list of realistic tools (name, description, an
-- inputSchema with properties and required keys, an outputSchema on one
-- tool in eight, since discover compiles those), and a call result with a
-- text block and a nested structuredContent. Arguments are nested tables
-- of the same shape. Every figure is a median; the ratio is pure / native.
local here = arg and arg[0] and arg[0]:match('^(.*)/[^/]*$') or 'bench'
package.path = here .. '/../lua/?.lua;' .. here .. '/../spec/?.lua;' .. package.path
local trace = require('trace')

local M = {}

local function median(xs)
  local s = {}
  for i, x in ipairs(xs) do s[i] = x end
  table.sort(s)
  return s[(#s + 1) // 2]
end

local function tool(i)
  local t = {
    name = 'tool_' .. i,
    description = 'Reads rows ' .. i .. ' from the sheet and returns them as text; ' .. string.rep('detail ', 6),
    inputSchema = { type = 'object', properties = {
      sheet = { type = 'string', description = 'the sheet name' },
      row = { type = 'integer', minimum = 1 },
      ratio = { type = 'number', default = 0.25 + i },
      tags = { type = 'array', items = { type = 'string' } },
    }, required = { 'sheet', 'row' } },
  }
  if i % 8 == 0 then
    t.outputSchema = { type = 'object', properties = { rows = { type = 'array' } } }
  end
  return t
end

-- A tool list of about `bytes` of JSON.
local function tool_list(bytes)
  local tools, size = {}, 0
  while size < bytes do
    tools[#tools + 1] = tool(#tools + 1)
    size = size + #trace.encode(tools[#tools])
  end
  return tools
end

-- Nested values of about `bytes` of JSON (as run.lua's codec section).
local function nested(bytes)
  local items, size = {}, 0
  while size < bytes do
    local n = #items
    items[n + 1] = { id = n + 1, name = 'item ' .. n, tags = { 'a', 'b', 'c' }, score = 0.5 + n,
      nested = { deep = { text = string.rep('lorem ipsum ', 4), flag = true } } }
    size = size + 150
  end
  return { items = items }
end

local INIT = '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},'
  .. '"serverInfo":{"name":"bench","version":"1"}}}\n'

-- Each run starts from a collected heap, so that one run's garbage is not
-- collected during the next; the collection its own tables cause is
-- counted, as a caller would pay it. The samples, in ms.
local function time_ms(clock, n, f)
  local xs = {}
  for i = 1, n do
    collectgarbage()
    local t0 = clock()
    f()
    xs[i] = (clock() - t0) * 1e3
  end
  return xs
end

-- The figures for one module: discover of a tool list, call with a large
-- result, call with large arguments, for each size in `sizes` (MB).
local function measure(module, clock, sizes, reps)
  local out = {}
  for _, mb in ipairs(sizes) do
    local bytes = mb * 1000 * 1000
    local n = mb >= 10 and math.max(3, reps // 3) or reps
    local list_reply = '{"jsonrpc":"2.0","id":2,"result":{"tools":' .. trace.encode(tool_list(bytes)) .. '}}\n'
    local lister = module.new({ transport = function() return true, INIT .. list_reply, 200 end })
    out['discover ' .. mb] = time_ms(clock, n, function()
      lister.next_id = 0
      lister:discover()
    end)
    local payload = nested(bytes)
    local result = { content = { { type = 'text', text = string.rep('x', bytes // 4) } },
      structuredContent = payload }
    local call_reply = '{"jsonrpc":"2.0","id":2,"result":' .. trace.encode(result) .. '}\n'
    local caller = module.new({ transport = function() return true, INIT .. call_reply, 200 end })
    out['call result ' .. mb] = time_ms(clock, n, function()
      caller.next_id = 0
      caller:call('read', {})
    end)
    local small = INIT .. '{"jsonrpc":"2.0","id":2,"result":{"content":[]}}\n'
    local sender = module.new({ transport = function() return true, small, 200 end })
    out['call arguments ' .. mb] = time_ms(clock, n, function()
      sender.next_id = 0
      sender:call('store', payload)
    end)
  end
  return out
end

-- Runs the section and returns its rows: { label, native ms, pure ms,
-- pure / native }. `record(section, name, unit, samples)` takes each
-- figure (run.lua's table); without it they are printed.
function M.run(opts)
  local clock, sizes, reps = opts.clock, opts.sizes or { 1, 10 }, opts.reps or 9
  local native = measure(opts.native, clock, sizes, reps)
  local pure = measure(opts.reference, clock, sizes, reps)
  local rows = {}
  for _, mb in ipairs(sizes) do
    for _, what in ipairs({ 'discover', 'call result', 'call arguments' }) do
      local key = what .. ' ' .. mb
      local label = ({ discover = 'discover: a %d MB tool list', ['call result'] = 'call: a %d MB result',
        ['call arguments'] = 'call: %d MB of arguments' })[what]:format(mb)
      local n, p = median(native[key]), median(pure[key])
      rows[#rows + 1] = { label, n, p, p / n, native[key], pure[key] }
    end
  end
  for _, r in ipairs(rows) do
    if opts.record then
      opts.record('codec: ' .. r[1], 'native', 'ms', r[5])
      opts.record('codec: ' .. r[1], 'pure-Lua reference', 'ms', r[6])
    else
      io.write(string.format('%-32s native %9.2f ms   pure %9.2f ms   pure/native %6.1fx\n', r[1], r[2], r[3], r[4]))
    end
  end
  return rows
end

if arg and arg[0] and arg[0]:match('codec%.lua$') then
  local so = arg[1] or (here .. '/../mcp.so')
  local native = assert(package.loadlib(so, 'luaopen_mcp'))()
  local reference = dofile(here .. '/../lua/mcp.lua')
  M.run({ native = native, reference = reference, clock = native.clock,
    reps = tonumber(os.getenv('BENCH_REPS') or '') or 9 })
end

return M
