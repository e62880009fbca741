-- many_tools.lua [N] - a Lua server of N tools (300 by default), as an
-- agent meets when it mounts a few servers at once: named VERB_NOUN from
-- fixed word lists, each described in a sentence and taking one or two
-- parameters, so that searching them means something. Every tool answers
-- with its name and arguments. `add_tool {name}` adds one more while
-- serving (the client hears that the list changed). `big_text {bytes}`
-- answers with that much text; `big_structured {items}` with that many
-- items of structured content; `picture {bytes}` with an image of about
-- that size. Over stdio.
local root = (arg and arg[0] or ''):match('^(.*)/spec/servers/[^/]*$') or '.'
package.cpath = root .. '/?.so;' .. root .. '/?.dll;' .. package.cpath
local mcp = require('mcp')

local n = tonumber(arg[1]) or 300
local verbs = { 'get', 'list', 'create', 'update', 'delete', 'search', 'export', 'import', 'archive', 'restore',
  'share', 'sync', 'merge', 'validate', 'render' }
local nouns = { 'invoice', 'customer', 'ticket', 'calendar_event', 'repository', 'pull_request', 'deployment',
  'weather_forecast', 'spreadsheet', 'email', 'photo', 'playlist', 'shipment', 'payment', 'recipe', 'flight',
  'hotel_booking', 'contract', 'sensor_reading', 'translation' }

local server = mcp.server({ name = 'many-tools', version = '1.0.0' })

local function echo(name)
  return function(args) return name .. ' ' .. mcp.json_encode(args) end
end

local count = 0
for _, noun in ipairs(nouns) do
  for _, verb in ipairs(verbs) do
    count = count + 1
    if count > n then break end
    local name = verb .. '_' .. noun
    local thing = noun:gsub('_', ' ')
    server:tool({
      name = name,
      description = string.format('%s %s records for the current account; %s them by id or by a free-text filter.',
        verb:sub(1, 1):upper() .. verb:sub(2), thing, verb),
      input_schema = { type = 'object', properties = {
        [noun .. '_id'] = { type = 'string', description = 'Which ' .. thing },
        filter = { type = 'string', description = 'Words the ' .. thing .. ' must contain' } } },
    }, echo(name))
  end
end
-- Past the word lists' 300: numbered tools.
for i = count + 1, n do
  server:tool({ name = 'extra_tool_' .. i, description = 'Extra tool number ' .. i .. ' for scale tests.' }, echo('extra_tool_' .. i))
end

server:tool({ name = 'add_tool', description = 'Adds a tool to this server while it serves',
  input_schema = { type = 'object', properties = { name = { type = 'string' } }, required = { 'name' } } },
  function(args)
    server:tool({ name = args.name, description = 'A tool added while serving: ' .. args.name }, echo(args.name))
    return 'added ' .. args.name
  end)

server:tool({ name = 'big_text', description = 'Answers with that many bytes of text',
  input_schema = { type = 'object', properties = { bytes = { type = 'integer' } }, required = { 'bytes' } } },
  function(args)
    local line = 'line of text, numbered for paging: '
    local parts, size, i = {}, 0, 0
    while size < args.bytes do
      i = i + 1
      local piece = line .. i .. '\n'
      parts[#parts + 1] = piece
      size = size + #piece
    end
    return table.concat(parts):sub(1, args.bytes)
  end)

server:tool({ name = 'big_structured', description = 'Answers with that many items as structured content',
  input_schema = { type = 'object', properties = { items = { type = 'integer' } }, required = { 'items' } },
  output_schema = { type = 'object', properties = { items = { type = 'array' } }, required = { 'items' } } },
  function(args)
    local items = {}
    for i = 1, args.items do items[i] = { id = i, label = 'item ' .. i } end
    return { items = items }
  end)

server:tool({ name = 'picture', description = 'Answers with a PNG of about that many bytes',
  input_schema = { type = 'object', properties = { bytes = { type = 'integer' } }, required = { 'bytes' } } },
  function(args)
    return { content = { { type = 'image', mimeType = 'image/png', data = string.rep('A', math.floor(args.bytes * 4 / 3)) },
                         { type = 'text', text = 'a picture' } } }
  end)

server:serve_stdio()
