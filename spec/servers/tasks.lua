-- tasks.lua - a 2026-07-28 stdio server whose tool calls become tasks
-- (the Tasks extension) in the ways a real server fails them, which no
-- real server does on demand. A call becomes a task only when its
-- request declares the extension; each tasks/get moves its task one step
-- along the tool's script:
--
--   finishes   working, then completed ("done")
--   cancels    working, then cancelled by the server ("operator stopped it")
--   fails      failed with a JSON-RPC error (-32000 "quota exceeded")
--   restarts   the server exits right after making the task: the next
--              poll meets a new server that never heard of it (-32602)
--   lingers    working for ever, and says it lives 200 ms
--   nameless   a task with no taskId
--   odd        a status nobody knows ("paused")
--   asks       input_required with the key "q", still so on the poll
--              after the answer came (taking it is eventually
--              consistent), then completed with it
--   slow       working until cancelled (tasks/cancel), then cancelled
--   plain      never a task: its result at once
--   impostor   every poll answers about another task ("someone-elses-task")
--   strange    its status is a table of 1 MB with a C1 control in it
--   asks_oddly input_required for an input whose method is 400 KB of
--              terminal escapes (a clipboard write, a screen clear)
--   round_oddly never a task: an input_required round asking what
--              asks_oddly asks
--
-- `seen` lists the requests received so far, one per line: the method,
-- the taskId it names, and "declared" when its envelope declared the
-- extension.
local dir = arg[0]:match('(.*)/') or '.'
package.path = dir .. '/../../lua/?.lua;' .. dir .. '/../../lua/servers/?.lua;' .. package.path
local server = require('stdio_server')
local trace = require('trace')

local EXTENSION = 'io.modelcontextprotocol/tasks'
local seen = {}
-- An input request whose method is terminal escapes (OSC 52 sets the
-- clipboard, ESC [2J clears the screen), 400 KB of them.
local HOSTILE_METHOD = ('\27]52;c;aGk=\7\27[2J'):rep(20000)
local HOSTILE_INPUT = { ['k\27[2J'] = { method = HOSTILE_METHOD, params = {} } }
local tasks = {}
local made = 0

local function declared(msg)
  local meta = type(msg.params) == 'table' and msg.params._meta or {}
  local caps = meta['io.modelcontextprotocol/clientCapabilities'] or {}
  return type(caps.extensions) == 'table' and caps.extensions[EXTENSION] ~= nil
end

local function described(task, extra)
  local out = {
    taskId = task.id, status = task.status, statusMessage = task.message,
    createdAt = '2026-12-01T10:00:00Z', lastUpdatedAt = '2026-12-01T10:00:00Z',
    ttlMs = task.ttl or 60000, pollIntervalMs = 20,
  }
  for k, v in pairs(extra or {}) do out[k] = v end
  return out
end

-- What each tool's task does at each poll: a function of the task.
local steps = {
  finishes = function(t) return t.polls < 2 and {} or { status = 'completed', result = server.text('done') } end,
  cancels = function(t)
    return t.polls < 2 and {} or { status = 'cancelled', message = 'operator stopped it' }
  end,
  fails = function() return { status = 'failed', error = { code = -32000, message = 'quota exceeded' } } end,
  lingers = function() return {} end,
  odd = function() return { status = 'paused' } end,
  asks = function(t)
    if t.answer then return { status = 'completed', result = server.text('answered ' .. t.answer) } end
    t.answer = t.pending
    return { status = 'input_required', inputRequests = { q = {
      method = 'elicitation/create',
      params = { mode = 'form', message = 'Which?', requestedSchema = { type = 'object', properties = {} } },
    } } }
  end,
  slow = function(t) return t.cancelled and { status = 'cancelled' } or {} end,
  impostor = function() return { id = 'someone-elses-task' } end,
  strange = function() return { status = { junk = '\194\155' .. ('x'):rep(1048576) } } end,
  asks_oddly = function() return { status = 'input_required', inputRequests = HOSTILE_INPUT } end,
}

local function step(task)
  task.polls = task.polls + 1
  local now = steps[task.tool](task)
  task.status = now.status or 'working'
  task.message = now.message
  local out = described(task, { result = now.result, error = now.error, inputRequests = now.inputRequests })
  out.taskId = now.id or out.taskId
  return out
end

local function discover(msg)
  server.result(msg.id, {
    resultType = 'complete',
    supportedVersions = { '2026-07-28' },
    capabilities = { tools = {}, extensions = { [EXTENSION] = {} } },
    _meta = { ['io.modelcontextprotocol/serverInfo'] = { name = 'tasks', version = '1.0' } },
  })
end

local function call(msg)
  local name = msg.params.name
  if name == 'seen' then return server.result(msg.id, server.text(table.concat(seen, '\n'))) end
  if name == 'round_oddly' then
    return server.result(msg.id, { resultType = 'input_required', inputRequests = HOSTILE_INPUT })
  end
  if name == 'plain' or not declared(msg) then return server.result(msg.id, server.text('plain ' .. name)) end
  made = made + 1
  local task = { id = 'task-' .. made, tool = name, polls = 0, status = 'working',
    ttl = name == 'lingers' and 200 or nil }
  tasks[task.id] = task
  local answer = described(task, { resultType = 'task' })
  if name == 'nameless' then answer.taskId = nil end
  server.result(msg.id, answer)
  if name == 'restarts' then os.exit(0) end
end

local handlers = {
  ['server/discover'] = discover,
  ['tools/call'] = call,
  ['tasks/get'] = function(msg)
    local task = tasks[msg.params.taskId]
    if not task then return server.error(msg.id, -32602, 'Unknown task: ' .. tostring(msg.params.taskId)) end
    server.result(msg.id, step(task))
  end,
  ['tasks/update'] = function(msg)
    local task = tasks[msg.params.taskId]
    local answer = (msg.params.inputResponses or {}).q
    -- Taken, but seen only after the next poll.
    if task and answer then task.pending = trace.encode(answer) end
    server.result(msg.id, { resultType = 'complete' })
  end,
  ['tasks/cancel'] = function(msg)
    local task = tasks[msg.params.taskId]
    if task then task.cancelled = true end
    server.result(msg.id, { resultType = 'complete' })
  end,
}

server.run({}, {
  hook = function(msg)
    if msg.method == nil then return false end
    local task_id = type(msg.params) == 'table' and msg.params.taskId or nil
    seen[#seen + 1] = msg.method .. (task_id and (' ' .. task_id) or '') .. (declared(msg) and ' declared' or '')
    local handle = handlers[msg.method]
    if handle then handle(msg) end
    return handle ~= nil
  end,
})
