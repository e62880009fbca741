-- What the servers people run need of a client, each pinned against the
-- real thing: the official filesystem and memory servers (whose zod
-- validators refuse {} where their schema says array), the sqlite server
-- crashing at start on Python's SDK 2.x, a TypeScript SDK server that
-- checks the Host header, a server slow to start, and server-everything's
-- arithmetic for floats with every digit.
local H = require('helpers')
local trace = require('trace')

local mcp = H.native()
local MODULES = H.ROOT .. '/spec/peers/node_modules/@modelcontextprotocol/'
local CLI = H.LUA .. ' ' .. H.ROOT .. '/bin/lua-mcp'

local function filesystem(dir) return { 'node', MODULES .. 'server-filesystem/dist/index.js', dir } end

describe('empty arrays #peer', function()
  local dir

  before_each(function()
    dir = H.tmpname()
    os.execute('mkdir -p ' .. dir .. '/notes && echo hi > ' .. dir .. '/notes/todo.txt')
  end)
  after_each(function() os.execute('rm -rf ' .. dir) end)

  it("the filesystem server's search_files takes an empty excludePatterns, as its schema asks", function()
    local client = mcp.new({ command = filesystem(dir) })
    client:discover()
    local text, is_error = client:call('search_files', { path = dir, pattern = '**/*.txt', excludePatterns = {} })
    client:close()
    assert.is_false(is_error, text)
    assert.equal(dir .. '/notes/todo.txt', text)
  end)

  it('call_async, a mounted tool and a tools/call sent through exchange shape arguments the same way', function()
    local client = mcp.new({ command = filesystem(dir) })
    client:discover()
    local args = function() return { path = dir, pattern = '**/*.txt', excludePatterns = {} } end
    assert.equal(dir .. '/notes/todo.txt', (client:call_async('search_files', args()):wait()))
    local registry = H.registry()
    mcp.mount(registry, client, { prefix = 'fs_' })
    assert.equal(dir .. '/notes/todo.txt', (registry:get('fs_search_files').run(args())))
    local id = client:id()
    local replies = client:exchange({ { jsonrpc = '2.0', id = id, method = 'tools/call',
      params = { name = 'search_files', arguments = args() } } })
    client:close()
    assert.equal(dir .. '/notes/todo.txt', replies[id].result.content[1].text)
  end)

  it('an empty table marked with mcp.array goes out as [] with no schema to say so', function()
    local client = mcp.new({ command = filesystem(dir) })
    local text, is_error = client:call('search_files',
      { path = dir, pattern = '**/*.txt', excludePatterns = mcp.array({}) })
    client:close()
    assert.is_false(is_error, text)
    assert.equal(dir .. '/notes/todo.txt', text)
  end)

  it('the command-line tool sends key=[] and --args arrays as arrays', function()
    local server = "--mcp 'node " .. MODULES .. "server-filesystem/dist/index.js " .. dir .. "'"
    local out, status = H.command(CLI .. ' ' .. server .. ' call search_files path=' .. dir
      .. " pattern='**/*.txt' excludePatterns=[]")
    assert.equal(0, status, out)
    assert.equal(dir .. '/notes/todo.txt\n', out)
    out, status = H.command(CLI .. ' ' .. server .. ' call search_files --args \'{"path":"' .. dir
      .. '","pattern":"**/*.txt","excludePatterns":[]}\'')
    assert.equal(0, status, out)
    assert.equal(dir .. '/notes/todo.txt\n', out)
  end)

  it('the command-line tool prints the empty arrays the server sent with --json', function()
    local memory = 'MEMORY_FILE_PATH=' .. dir .. '/memory.jsonl '
    local server = "--mcp 'node " .. MODULES .. "server-memory/dist/index.js'"
    local out, status = H.command(memory .. CLI .. ' ' .. server .. ' call create_entities --args'
      .. ' \'{"entities":[{"name":"Ada","entityType":"person","observations":[]}]}\'')
    assert.equal(0, status, out)
    out, status = H.command(memory .. CLI .. ' ' .. server .. ' call read_graph --json')
    assert.equal(0, status, out)
    assert.equal('{"entities":[{"entityType":"person","name":"Ada","observations":[]}],"relations":[]}',
      out:match('"structuredContent":(%b{})'), out)
  end)

  it("the memory server creates an entity with nothing observed yet", function()
    local memory = H.tmpname() .. '.jsonl'
    local client = mcp.new({ command = { 'node', MODULES .. 'server-memory/dist/index.js' },
                             env = { MEMORY_FILE_PATH = memory } })
    client:discover()
    local text, is_error = client:call('create_entities',
      { entities = { { name = 'Ada', entityType = 'person', observations = {} } } })
    assert.is_false(is_error, text)
    local graph = trace.decode((client:call('read_graph', {})))
    client:close()
    assert.equal('Ada', graph.entities[1].name)
    assert.same({}, graph.entities[1].observations)
    os.remove(memory)
  end)
end)

describe('what a failing server said #peer', function()
  it("a Python server's startup crash is quoted from its end, where the exception is", function()
    -- mcp-server-sqlite 2025.4.25 on the Python SDK 2.3.0 (spec/peers/requirements.txt)
    local sqlite = H.ROOT .. '/spec/peers/python/bin/mcp-server-sqlite'
    local db = H.tmpname() .. '.db'
    local client = mcp.new({ command = { sqlite, '--db-path', db } })
    local ok, err = pcall(client.discover, client)
    client:close()
    os.remove(db)
    assert.is_false(ok)
    assert.is_truthy(err:find("\nAttributeError: 'Server' object has no attribute 'list_resources'$"), err)
    assert.is_truthy(err:find('^MCP transport failed %(1%): MCP server produced no output %(' .. sqlite:gsub('%p', '%%%0')
      .. ' %-%-db%-path .-%): %.%.%.\n'), err)
  end)

  it("a 403 that is not about credentials gives the server's reason, and suggests none", function()
    local base, stop = H.fault_server()
    local client = mcp.new({ url = base .. '/host-check' })
    local ok, err = pcall(client.discover, client)
    client:close()
    stop()
    assert.is_false(ok)
    assert.equal('MCP initialize failed: Invalid Host: 127.0.0.1 (code -32000)', err)
  end)
end)

describe('a slow start', function()
  it('is waited for whatever the request timeout, and the server started once #slow', function()
    local starts = H.tmpname()
    local slow = { 'sh', '-c', 'echo started >> ' .. starts .. '; sleep 2.5; exec ' .. H.COUNTER }
    local client = mcp.new({ command = slow, timeout = 1 })
    assert.equal('1', (client:call('increment', {})))
    client:close()
    assert.equal('started\n', H.slurp(starts))
    os.remove(starts)
  end)

  it('has its own bound, opts.connect_timeout, named when it is met', function()
    local waiting = 'echo "waiting for the database at db:5432" >&2; sleep 5; exec ' .. H.COUNTER
    local client = mcp.new({ command = { 'sh', '-c', waiting }, connect_timeout = 0.5 })
    assert.has_error(function() client:discover() end, 'MCP initialize timed out after 0.5 s (opts.connect_timeout);'
      .. ' its stderr ends: waiting for the database at db:5432')
    client:close()
  end)
end)

describe('numbers #peer', function()
  it('a float with 17 significant digits, and 2^53 + 2, reach the server unchanged', function()
    local client = mcp.new({ command = H.everything_argv() })
    assert.equal('The sum of 0.30000000000000004 and 0 is 0.30000000000000004.',
      (client:call('get-sum', { a = 0.1 + 0.2, b = 0 })))
    assert.equal('The sum of 9007199254740994 and 0 is 9007199254740994.',
      (client:call('get-sum', { a = 2 ^ 53 + 2, b = 0 })))
    client:close()
  end)
end)
