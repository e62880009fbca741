-- conformance_server.lua - the server the official conformance suite
-- grades (its server scenarios), written on mcp.server: the tools,
-- resources and prompts the scenarios name, answering as they expect.
-- It listens on a free loopback port, prints its URL as its first line,
-- and serves until its stdin closes or it is signalled.
--
--   lua5.4 spec/servers/conformance_server.lua
--   conformance server --url URL
local root = (arg and arg[0] or ''):match('^(.*)/spec/servers/[^/]*$') or '.'
package.cpath = root .. '/?.so;' .. root .. '/?.dll;' .. package.cpath
local mcp = require('mcp')

-- A 1x1 red PNG and a header-only WAV, as the scenarios compare them.
local PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=='
local WAV = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA='

local server = mcp.server({ name = 'mcp-conformance-test-server', version = '1.0.0' })

local function text(t) return { type = 'text', text = t } end
local function content(...) return { content = { ... } } end
local NO_ARGS = { type = 'object', properties = mcp.object({}) }

local function tool(name, description, fn, schema)
  server:tool({ name = name, description = description, input_schema = schema or NO_ARGS }, fn)
end

tool('test_simple_text', 'Returns a simple text response', function()
  return 'This is a simple text response for testing.'
end)

tool('test_image_content', 'Returns an image', function()
  return content({ type = 'image', data = PNG, mimeType = 'image/png' })
end)

tool('test_audio_content', 'Returns audio', function()
  return content({ type = 'audio', data = WAV, mimeType = 'audio/wav' })
end)

tool('test_embedded_resource', 'Returns an embedded resource', function()
  return content({ type = 'resource', resource = { uri = 'test://embedded-resource', mimeType = 'text/plain',
    text = 'This is an embedded resource content.' } })
end)

tool('test_multiple_content_types', 'Returns text, an image and a resource', function()
  return content(text('Multiple content types test:'), { type = 'image', data = PNG, mimeType = 'image/png' },
    { type = 'resource', resource = { uri = 'test://mixed-content-resource', mimeType = 'application/json',
      text = '{"test":"data","value":123}' } })
end)

tool('test_tool_with_logging', 'Logs three messages while it runs', function(_, ctx)
  ctx:log('info', 'Tool execution started')
  ctx:log('info', 'Tool processing data')
  ctx:log('info', 'Tool execution completed')
  return 'Tool with logging executed successfully'
end)

tool('test_error_handling', 'Always fails', function()
  return nil, 'This tool intentionally returns an error for testing'
end)

tool('test_tool_with_progress', 'Reports progress in three steps', function(_, ctx)
  for _, done in ipairs({ 0, 50, 100 }) do ctx:progress(done, 100, 'Completed step ' .. done .. ' of 100') end
  return tostring(ctx.progress_token)
end)

tool('test_sampling', 'Asks the client for a completion', function(args, ctx)
  local result, why = ctx:sample({ messages = { { role = 'user', content = text(args.prompt) } }, maxTokens = 100 })
  if not result then return nil, why end
  return 'LLM response: ' .. result.content.text
end, { type = 'object', properties = { prompt = { type = 'string' } }, required = { 'prompt' } })

local function elicited(answer, why)
  if not answer then return nil, why end
  return 'User response: action=' .. answer.action .. ', content=' .. mcp.json_encode(answer.content or mcp.object({}))
end

tool('test_elicitation', 'Asks the user for information', function(args, ctx)
  return elicited(ctx:elicit({ message = args.message, requestedSchema = { type = 'object', properties = {
    username = { type = 'string', description = "User's response" },
    email = { type = 'string', description = "User's email address" } }, required = { 'username', 'email' } } }))
end, { type = 'object', properties = { message = { type = 'string' } }, required = { 'message' } })

tool('test_elicitation_sep1034_defaults', 'Asks with defaults for every primitive type', function(_, ctx)
  return elicited(ctx:elicit({ message = 'Please review and update the form fields with defaults',
    requestedSchema = { type = 'object', required = mcp.array({}), properties = {
      name = { type = 'string', description = 'User name', default = 'John Doe' },
      age = { type = 'integer', description = 'User age', default = 30 },
      score = { type = 'number', description = 'User score', default = 95.5 },
      status = { type = 'string', description = 'User status', enum = { 'active', 'inactive', 'pending' },
        default = 'active' },
      verified = { type = 'boolean', description = 'Verification status', default = true } } } }))
end)

tool('test_elicitation_sep1330_enums', 'Asks with every kind of enum', function(_, ctx)
  local function titled(prefix, titles)
    local out = {}
    for i, t in ipairs(titles) do out[i] = { const = prefix .. i, title = t } end
    return out
  end
  return elicited(ctx:elicit({ message = 'Please select options from the enum fields',
    requestedSchema = { type = 'object', required = mcp.array({}), properties = {
      untitledSingle = { type = 'string', description = 'Select one option', enum = { 'option1', 'option2', 'option3' } },
      titledSingle = { type = 'string', description = 'Select one option with titles',
        oneOf = titled('value', { 'First Option', 'Second Option', 'Third Option' }) },
      legacyEnum = { type = 'string', description = 'Select one option (legacy)', enum = { 'opt1', 'opt2', 'opt3' },
        enumNames = { 'Option One', 'Option Two', 'Option Three' } },
      untitledMulti = { type = 'array', description = 'Select multiple options', minItems = 1, maxItems = 3,
        items = { type = 'string', enum = { 'option1', 'option2', 'option3' } } },
      titledMulti = { type = 'array', description = 'Select multiple options with titles', minItems = 1, maxItems = 3,
        items = { anyOf = titled('value', { 'First Choice', 'Second Choice', 'Third Choice' }) } } } } }))
end)

tool('json_schema_2020_12_tool', 'Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)',
  function(args) return 'JSON Schema 2020-12 tool called with: ' .. mcp.json_encode(args) end, {
    ['$schema'] = 'https://json-schema.org/draft/2020-12/schema', type = 'object',
    ['$defs'] = { address = { ['$anchor'] = 'addressDef', type = 'object',
      properties = { street = { type = 'string' }, city = { type = 'string' } } } },
    properties = { name = { type = 'string' }, address = { ['$ref'] = '#/$defs/address' },
      contactMethod = { type = 'string', enum = { 'phone', 'email' } }, phone = { type = 'string' },
      email = { type = 'string' } },
    allOf = { { anyOf = { { required = { 'phone' } }, { required = { 'email' } } } } },
    ['if'] = { properties = { contactMethod = { const = 'phone' } }, required = { 'contactMethod' } },
    ['then'] = { required = { 'phone' } }, ['else'] = { required = { 'email' } },
    additionalProperties = false,
  })

tool('test_reconnection', 'Closes its stream before it answers; the client resumes it', function(_, ctx)
  ctx:close_stream()
  return 'Reconnection test completed successfully. If you received this, the client properly reconnected after '
    .. 'stream closure.'
end)

-- What the 2026-07-28 scenarios call besides. On that revision a
-- question to the client ends the request with input_required, and the
-- handler runs again with the answer (ctx:ask names each question).
tool('test_missing_capability', 'Needs sampling, which a client that lacks it is refused for', function(_, ctx)
  local result, why = ctx:sample({ messages = { { role = 'user', content = text('Hi') } }, maxTokens = 10 })
  if not result then return nil, why end
  return 'sampled'
end)

tool('test_streaming_elicitation', 'Asks the user a question', function(_, ctx)
  return elicited(ctx:elicit({ message = 'Your name?', requestedSchema = { type = 'object',
    properties = { name = { type = 'string' } } } }))
end)

tool('test_logging_tool', 'Logs one message, if the client asked for logs', function(_, ctx)
  ctx:log('info', 'a log message')
  return 'logged'
end)

local NAME = { method = 'elicitation/create', params = { message = 'What is your name?',
  requestedSchema = { type = 'object', properties = { name = { type = 'string' } }, required = { 'name' } } } }
local CAPITAL = { method = 'sampling/createMessage', params = { maxTokens = 100,
  messages = { { role = 'user', content = text('What is the capital of France?') } } } }
local ROOTS = { method = 'roots/list', params = mcp.object({}) }
local function confirm(message)
  return { method = 'elicitation/create', params = { message = message,
    requestedSchema = { type = 'object', properties = { ok = { type = 'boolean' } }, required = { 'ok' } } } }
end

tool('test_input_required_result_elicitation', 'Asks the user their name, then greets them', function(_, ctx)
  local answers, why = ctx:ask({ user_name = NAME })
  if not answers then return nil, why end
  return 'Hello, ' .. tostring(answers.user_name.content and answers.user_name.content.name) .. '!'
end)

tool('test_input_required_result_sampling', 'Asks the client\'s model a question', function(_, ctx)
  local answers, why = ctx:ask({ capital_question = CAPITAL })
  if not answers then return nil, why end
  return 'The model said: ' .. tostring(answers.capital_question.content and answers.capital_question.content.text)
end)

tool('test_input_required_result_list_roots', 'Asks the client for its roots', function(_, ctx)
  local answers, why = ctx:ask({ client_roots = ROOTS })
  if not answers then return nil, why end
  return 'Roots: ' .. #(answers.client_roots.roots or {})
end)

tool('test_input_required_result_request_state', 'Asks for a confirmation, kept in signed state', function(_, ctx)
  local answers, why = ctx:ask({ confirm = confirm('Go on?') })
  if not answers then return nil, why end
  return 'state-ok'
end)

tool('test_input_required_result_multiple_inputs', 'Asks three things at once', function(_, ctx)
  local answers, why = ctx:ask({ user_name = NAME, greeting = CAPITAL, client_roots = ROOTS })
  if not answers then return nil, why end
  return 'All three answered'
end)

tool('test_input_required_result_multi_round', 'Asks a name, then a colour', function(_, ctx)
  local first, why = ctx:ask({ step1 = NAME })
  if not first then return nil, why end
  local second
  second, why = ctx:ask({ step2 = { method = 'elicitation/create', params = { message = 'Your favourite colour?',
    requestedSchema = { type = 'object', properties = { color = { type = 'string' } }, required = { 'color' } } } } })
  if not second then return nil, why end
  return tostring(first.step1.content.name) .. ' likes ' .. tostring(second.step2.content.color)
end)

tool('test_input_required_result_tampered_state', 'Asks for a confirmation; a changed state is refused', function(_, ctx)
  local answers, why = ctx:ask({ confirm = confirm('Sure?') })
  if not answers then return nil, why end
  return 'confirmed'
end)

tool('test_input_required_result_capabilities', 'Asks only what the client declared it can answer', function(_, ctx)
  local requests = {}
  if ctx:client_can('elicitation') then requests.user_name = NAME end
  if ctx:client_can('sampling') then requests.greeting = CAPITAL end
  if ctx:client_can('roots') then requests.client_roots = ROOTS end
  if next(requests) == nil then return 'nothing to ask' end
  local answers, why = ctx:ask(requests)
  if not answers then return nil, why end
  return 'answered'
end)

-- A listener (subscriptions/listen) hears that these changed the lists.
tool('test_trigger_tool_change', 'Adds a tool, so that the tool list changes', function()
  server:tool({ name = 'test_added_tool', description = 'Added by test_trigger_tool_change' }, function() return 'added' end)
  return 'the tool list changed'
end)

tool('test_trigger_prompt_change', 'Adds a prompt, so that the prompt list changes', function()
  server:prompt({ name = 'test_added_prompt', description = 'Added by test_trigger_prompt_change' },
    function() return 'added' end)
  return 'the prompt list changed'
end)

tool('test_custom_header', 'Echoes the region it is routed by (Mcp-Param-Region)', function(args)
  return 'region: ' .. args.region
end, { type = 'object', properties = { region = { type = 'string', ['x-mcp-header'] = 'Region' } },
  required = { 'region' } })

-- The Tasks extension's tools. A task's work goes on after its handler
-- returned ctx:later(); these wait on timers the serving loop below runs.
local timers = {}
local function after(seconds, fn) timers[#timers + 1] = { at = mcp.clock() + seconds, fn = fn } end
local function run_timers()
  local now, due = mcp.clock(), {}
  for i = #timers, 1, -1 do
    if timers[i].at <= now then due[#due + 1] = table.remove(timers, i) end
  end
  for _, timer in ipairs(due) do timer.fn() end
end

local function task_tool(name, description, support, fn, schema)
  server:tool({ name = name, description = description, input_schema = schema or NO_ARGS,
    execution = { taskSupport = support } }, fn)
end

tool('greet', 'Greets someone', function(args) return 'Hello, ' .. tostring(args.name) .. '!' end,
  { type = 'object', properties = { name = { type = 'string' } } })

task_tool('slow_compute', 'Computes for a number of seconds', 'optional', function(args, ctx)
  local seconds = args.seconds or 1
  if seconds <= 0 then return 'computed ' .. tostring(args.label) end
  after(seconds, function()
    if not ctx:cancelled() then ctx:finish('computed ' .. tostring(args.label)) end
  end)
  return ctx:later()
end, { type = 'object', properties = { seconds = { type = 'number' }, label = { type = 'string' } } })

task_tool('failing_job', 'A job that fails', 'required', function(_, ctx)
  after(1, function() ctx:finish(nil, 'the job failed') end)
  return ctx:later()
end)

task_tool('protocol_error_job', 'A job that ends in a protocol error', 'required', function(_, ctx)
  after(0.2, function() ctx:finish(nil, { code = -32603, message = 'Internal error: the job broke' }) end)
  return ctx:later()
end)

local function confirm_request(message)
  return { message = message, requestedSchema = { type = 'object', properties = {
    name = { type = 'string' }, confirm = { type = 'boolean' } } } }
end

task_tool('confirm_delete', 'Deletes a file once the user confirms', 'optional', function(args, ctx)
  ctx:elicit(confirm_request('Delete ' .. tostring(args.filename) .. '?'), function(answer, why)
    if not answer then return ctx:finish(nil, why) end
    local yes = answer.content and answer.content.confirm
    ctx:finish((yes and 'deleted ' or 'kept ') .. tostring(args.filename))
  end)
  return ctx:later()
end, { type = 'object', properties = { filename = { type = 'string' } } })

task_tool('multi_input', 'Asks two questions at once', 'optional', function(_, ctx)
  local got = {}
  local function answered(answer)
    got[#got + 1] = answer and answer.content and answer.content.name or '?'
    if #got == 2 then ctx:finish('answers: ' .. table.concat(got, ', ')) end
  end
  ctx:elicit(confirm_request('First?'), answered)
  ctx:elicit(confirm_request('Second?'), answered)
  return ctx:later()
end)

task_tool('test_tool_with_task', 'Asks a name, then works on it as a task', 'required', function(_, ctx)
  local answers, why = ctx:ask({ user_name = NAME })
  if not answers then return nil, why end
  after(0.2, function() ctx:finish('Task done for ' .. tostring(answers.user_name.content.name)) end)
  return ctx:later()
end)

local function resource(uri, name, title, description, mime_type, fn)
  server:resource({ uri = uri, name = name, title = title, description = description, mime_type = mime_type }, fn)
end

resource('test://static-text', 'static-text', 'Static Text Resource', 'A static text resource for testing',
  'text/plain', function() return 'This is the content of the static text resource.' end)
resource('test://static-binary', 'static-binary', 'Static Binary Resource',
  'A static binary resource (image) for testing', 'image/png',
  function(uri) return { uri = uri, mimeType = 'image/png', blob = PNG } end)
resource('test://watched-resource', 'watched-resource', 'Watched Resource',
  'A resource that auto-updates every 3 seconds', 'text/plain', function() return 'Watched at ' .. os.time() end)

server:resource_template({ uri_template = 'test://template/{id}/data', name = 'template', title = 'Template Resource',
  description = 'A resource template with an id', mime_type = 'application/json' }, function(uri, vars)
  return mcp.json_encode({ id = vars.id, templateTest = true, data = 'Data for ID: ' .. vars.id })
end)

local function prompt(def, fn) server:prompt(def, fn) end
local function message(content_item) return { role = 'user', content = content_item } end

prompt({ name = 'test_simple_prompt', description = 'A simple prompt without arguments' },
  function() return 'This is a simple prompt for testing.' end)
prompt({ name = 'test_prompt_with_arguments', description = 'A prompt with required arguments', arguments = {
  { name = 'arg1', description = 'First test argument', required = true },
  { name = 'arg2', description = 'Second test argument', required = true } } }, function(args)
  return string.format("Prompt with arguments: arg1='%s', arg2='%s'", args.arg1, args.arg2)
end)
prompt({ name = 'test_prompt_with_embedded_resource', description = 'A prompt that includes an embedded resource',
  arguments = { { name = 'resourceUri', description = 'URI of the resource to embed', required = true } } },
  function(args)
    return { messages = { message({ type = 'resource', resource = { uri = args.resourceUri, mimeType = 'text/plain',
      text = 'Embedded resource content for testing.' } }), message(text('Please process the embedded resource above.')) } }
  end)
prompt({ name = 'test_prompt_with_image', description = 'A prompt that includes image content' }, function()
  return { messages = { message({ type = 'image', data = PNG, mimeType = 'image/png' }),
    message(text('Please analyze the image above.')) } }
end)

prompt({ name = 'test_input_required_result_prompt', description = 'A prompt that asks the user for context first' },
  function(_, ctx)
    local answers, why = ctx:ask({ user_context = { method = 'elicitation/create', params = {
      message = 'What is the context?', requestedSchema = { type = 'object',
        properties = { context = { type = 'string' } }, required = { 'context' } } } } })
    if not answers then return nil, why end
    return 'Context: ' .. tostring(answers.user_context.content and answers.user_context.content.context)
  end)

-- A skill (the Skills extension): its SKILL.md and a file beside it.
server:skill({ name = 'conformance-notes', description = 'How to read this server\'s test fixtures',
  body = '# Conformance notes\n\nThe fixtures are listed in references/fixtures.md.\n',
  files = { ['references/fixtures.md'] = '# Fixtures\n\nTools, resources and prompts named test_*.\n' },
  frontmatter = { version = 1 } })

print(server:listen({ port = 0, until_stdin_ends = true }))
io.stdout:flush()
-- Timers run between turns; the watched resource changes every 3
-- seconds, and its subscribers hear so.
local next_update = mcp.clock() + 3
while server:run(0.05) do
  run_timers()
  if mcp.clock() >= next_update then
    next_update = mcp.clock() + 3
    server:resource_updated('test://watched-resource')
  end
end
