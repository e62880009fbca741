-- notes_server.lua - an MCP server written in Lua on the native module:
-- any MCP client (Claude Code, an SDK, this module's own client) can start
-- it and call what it serves.
--
--   lua5.4 lua/examples/notes_server.lua                   -- over stdio
--   lua5.4 lua/examples/notes_server.lua --http [FILE]     -- over HTTP
--
-- Over HTTP it listens on a free loopback port, prints its URL, writes a
-- discovery file at FILE if given, and serves until its stdin ends.
-- `loadfile(this)('define')` gives the server without serving it.
--
-- Tools, a resource and a template, a prompt with completion, a tool that
-- asks the user through the client (elicitation), one that reports
-- progress and stops when cancelled, and one that adds a tool while
-- serving (the client hears that the list changed).
local mode, discovery = ...
local root = (arg and arg[0] or ''):match('^(.*)/lua/examples/[^/]*$') or '.'
-- The native module only: lua/mcp.lua (the pure client) serves nothing.
package.cpath = root .. '/?.so;' .. root .. '/?.dll;' .. package.cpath
---@type mcp
local mcp = require('mcp')

local notes = { monday = 'buy milk', tuesday = 'call Ada' }

local server = mcp.server({ name = 'notes', version = '1.0.0', instructions = 'Notes kept by day.' })

server:tool({
  name = 'add',
  description = 'Add two numbers',
  input_schema = { type = 'object', properties = { a = { type = 'number' }, b = { type = 'number' } }, required = { 'a', 'b' } },
  annotations = { readOnlyHint = true },
}, function(args, ctx)
  -- Goes to stderr while serving: stdout carries the protocol alone.
  print('adding', args.a, args.b)
  -- Goes to the client, if it asked for info and above.
  ctx:log('info', 'adding ' .. args.a .. ' and ' .. args.b)
  return args.a + args.b
end)

server:tool({
  name = 'note',
  description = 'The note kept for a day',
  input_schema = { type = 'object', properties = { day = { type = 'string' } }, required = { 'day' } },
  output_schema = { type = 'object', properties = { day = { type = 'string' }, text = { type = 'string' } }, required = { 'day', 'text' } },
}, function(args)
  local text = notes[args.day]
  if not text then return nil, 'no note for ' .. args.day .. '; the days with notes are monday and tuesday' end
  return { day = args.day, text = text }
end)

server:tool({ name = 'ask_name', description = 'Greets the user by the name they give' }, function(_, ctx)
  local answer, why = ctx:elicit({ message = 'Your name?',
    requestedSchema = { type = 'object', properties = { name = { type = 'string' } }, required = { 'name' } } })
  if not answer then return nil, why end
  if answer.action ~= 'accept' then return 'You did not say.' end
  return 'Hello, ' .. answer.content.name
end)

server:tool({ name = 'count', description = 'Counts to n, reporting progress; stops when cancelled',
  input_schema = { type = 'object', properties = { n = { type = 'integer' } } } }, function(args, ctx)
  local n = args.n or 3
  for i = 1, n do
    if ctx:cancelled() then return 'stopped at ' .. (i - 1) end
    ctx:progress(i, n, 'counted ' .. i)
    local t = os.clock() + 0.05
    repeat until os.clock() >= t
  end
  return 'counted to ' .. n
end)

server:tool({ name = 'grow', description = 'Adds the tool "grown"' }, function()
  server:tool({ name = 'grown', description = 'Added while serving' }, function() return 'grown' end)
  return 'added'
end)

server:resource({ uri = 'notes://today', name = 'today', mime_type = 'text/plain' }, function()
  return notes.monday
end)

server:resource_template({ uri_template = 'notes://{day}', name = 'day', mime_type = 'text/plain' }, function(_, vars)
  return notes[vars.day] or ('nothing on ' .. vars.day)
end)

server:prompt({ name = 'review', description = 'Review a file',
  arguments = { { name = 'file', required = true } },
  complete = { file = { 'main.lua', 'mcp.lua', 'notes.md' } } }, function(args)
  return 'Please review ' .. args.file
end)

-- A skill (the Skills extension): instructions an agent loads when a task
-- calls for them, with every file's digest and size in the listing.
server:skill({ name = 'note-taking', description = 'How notes are kept here: one per day, short',
  body = '# Note taking\n\nOne note a day; see references/format.md.\n',
  files = { ['references/format.md'] = '# Format\n\nA line of text, no markup.\n' } })

if mode == 'define' then return server end
if mode == '--http' then
  print(server:listen({ port = 0, discovery = discovery, until_stdin_ends = true }))
  io.stdout:flush()
  server:run()
else
  io.stderr:write('notes: serving on stdio\n')
  server:serve_stdio()
end
io.stderr:write('notes: stdin ended\n')
