-- bin/lua-mcp against the bundled counter and server-everything, run as a
-- user would run it: a process, its output and its exit status.
local H = require('helpers')
local trace = require('trace')

local CLI = H.LUA .. ' ' .. H.ROOT .. '/bin/lua-mcp'
local COUNTER = '--mcp ' .. string.format('%q', H.COUNTER)
local EVERYTHING = '--mcp ' .. string.format('%q', 'node ' .. H.EVERYTHING .. ' stdio')
-- Terminal escapes in every string it sends (spec/servers/faulty.lua).
local HOSTILE = '--mcp ' .. string.format('%q', H.faulty_line('hostile'))

-- stdout, stderr and the exit status of one run.
local function cli(args, env)
  local err_file = H.tmpname()
  local out, status = H.command((env and env .. ' ' or '') .. CLI .. ' ' .. args .. ' 2>' .. err_file)
  local err = H.slurp(err_file) or ''
  os.remove(err_file)
  return out, err, status
end

describe('the lua-mcp command', function()
  it('lists tools as a table, with required arguments starred', function()
    local out, err, status = cli(COUNTER .. ' tools')
    assert.equal(0, status, err)
    assert.equal(table.concat({
      'TOOL       ARGUMENTS  DESCRIPTION',
      'get                   Return the counter without changing it.',
      'increment  by         Add to the counter (by 1 unless told otherwise) and return the new value.',
      "whoami                Return the server's process id.",
      '',
    }, '\n'), out)
  end)

  it('calls a tool: key=value values read as JSON when they are JSON, else as strings', function()
    local out, err, status = cli(COUNTER .. ' call increment by=5')
    assert.equal(0, status, err)
    assert.equal('5\n', out)
    out = cli(EVERYTHING .. ' call echo message=hello')
    assert.equal('Echo: hello\n', out)
    out = cli(EVERYTHING .. ' call get-sum a=2 --args \'{"a":1,"b":40}\'')
    assert.equal('The sum of 2 and 40 is 42.\n', out)
  end)

  it('--json prints the raw result', function()
    local out, err, status = cli(EVERYTHING .. ' call get-sum a=1 b=2 --json')
    assert.equal(0, status, err)
    assert.same({ content = { { type = 'text', text = 'The sum of 1 and 2 is 3.' } } }, trace.decode(out))
    out = cli(COUNTER .. ' tools --json')
    assert.equal('increment', trace.decode(out)[2].name)
  end)

  it('resources, read, prompts and prompt against server-everything #peer', function()
    local out, err, status = cli(EVERYTHING .. ' resources')
    assert.equal(0, status, err)
    assert.is_truthy(out:find('^URI%s+NAME%s+TYPE\n'))
    assert.is_truthy(out:find('demo://resource/static/document/architecture.md  architecture.md  text/markdown', 1, true))
    out = cli(EVERYTHING .. ' read demo://resource/static/document/architecture.md')
    assert.is_truthy(out:find('^# Everything Server'))
    out = cli(EVERYTHING .. ' prompts')
    assert.is_truthy(out:find('\nargs%-prompt%s+city%* state%s+A prompt with two arguments'))
    out = cli(EVERYTHING .. ' prompt args-prompt city=Paris')
    assert.equal("user: What's weather in Paris?\n", out)
  end)

  it('ping and info', function()
    local out, err, status = cli(COUNTER .. ' ping')
    assert.equal(0, status, err)
    assert.is_truthy(out:find('^ok %([%d.]+ ms%)\n$'), out)
    out = cli(COUNTER .. ' info')
    assert.equal('server:       counter 1.0\nprotocol:     2025-06-18\ncapabilities: tools\n', out)
    out = cli(COUNTER .. ' info --json')
    assert.same({ name = 'counter', version = '1.0' }, trace.decode(out).server_info)
  end)

  it('a server from a config file', function()
    local path = H.tmpname() .. '.json'
    local f = assert(io.open(path, 'w'))
    f:write(string.format('{"mcpServers": {"count": {"command": %q, "args": [%q]}}}', H.LUA,
      H.ROOT .. '/lua/servers/counter.lua'))
    f:close()
    local out, err, status = cli('--config ' .. path .. ' --server count call increment')
    assert.equal(0, status, err)
    assert.equal('1\n', out)
    out, err, status = cli('--config ' .. path .. ' --server other tools')
    assert.equal(1, status)
    assert.equal('lua-mcp: no server other in ' .. path .. ' (it has: count)\n', err)
    os.remove(path)
  end)

  it('errors go to stderr with status 1: a tool error, a failed call, no server, a wrong command', function()
    -- server-everything answers an unknown tool with isError
    local out, err, status = cli(EVERYTHING .. ' call nope')
    assert.equal(1, status)
    assert.equal('', out)
    assert.equal('lua-mcp: nope reported an error: MCP error -32602: Tool nope not found\n', err)
    -- the counter, with a JSON-RPC error
    out, err, status = cli(COUNTER .. ' call nope')
    assert.equal(1, status)
    assert.equal('lua-mcp: MCP tools/call nope failed: Unknown tool: nope (code -32602)\n', err)
    out, err, status = cli('tools')
    assert.equal(1, status)
    assert.equal('lua-mcp: say which server: --mcp, --url or --config (see lua-mcp --help)\n', err)
    out, err, status = cli(COUNTER .. ' frobnicate')
    assert.equal(1, status)
    assert.equal('lua-mcp: unknown command frobnicate (see lua-mcp --help)\n', err)
    out, err, status = cli(COUNTER .. ' --url http://127.0.0.1:1/mcp tools')
    assert.equal(1, status)
    assert.equal('lua-mcp: give one server: --mcp, --url or --config\n', err)
    out, err, status = cli('--url http://127.0.0.1:1/mcp ping')
    assert.equal(1, status)
    assert.equal('lua-mcp: MCP transport failed (7): cannot reach the MCP server at http://127.0.0.1:1/mcp\n', err)
  end)

  -- A terminal obeys what it is sent: OSC 52 writes the clipboard, CSI 2 J
  -- clears the screen, SGR 8 hides text, and 0x9B or U+009B is a CSI of
  -- its own. The listings show each control character as an escape.
  it('listings escape the control characters in names, arguments, descriptions and MIME types', function()
    local out, err, status = cli(HOSTILE .. ' tools')
    assert.equal(0, status, err)
    assert.equal(table.concat({
      'TOOL                          ARGUMENTS  DESCRIPTION',
      'clip\\e]52;c;cm0gLXJmIH4=\\x07  a\\x9bb*    Copies.\\e[2J\\e[H Cleared.',
      'money                                    Café: 5 €; \\u009b31m red \\x7f',
      'two\\nlines\\r                             line one line two three \\e[8mhidden',
      '',
    }, '\n'), out)
    out = cli(HOSTILE .. ' resources')
    assert.equal('URI             NAME       TYPE\nfile:///x\\e[2J  notes\\x9b  text/plain\\x07\n', out)
    out = cli(HOSTILE .. ' prompts')
    assert.equal('PROMPT      ARGUMENTS  DESCRIPTION\ngreet\\e[5m  who\\x9b*   Says hi\\x07\n', out)
  end)

  it('info escapes the server name, version, capability names and instructions', function()
    local out, err, status = cli(HOSTILE .. ' info')
    assert.equal(0, status, err)
    assert.equal(table.concat({
      'server:       evil\\e]52;c;cm0gLXJmIH4=\\x07 1.0\\e[2J',
      'protocol:     2025-06-18',
      'capabilities: prompts, resources, tools, x\\e[31m (flag\\x9b)',
      'instructions: Be nice. \\e[8mhidden\\e[28m',
      '',
    }, '\n'), out)
  end)

  it('call, read and prompt keep newlines, tabs and CRLF, and escape every other control character', function()
    local out, err, status = cli(HOSTILE .. ' call say')
    assert.equal(0, status, err)
    assert.equal('line 1\n\tindented\r\nline 3 \\e]52;c;cm0gLXJmIH4=\\x07\\e[2J bell\\x07 del\\x7f nul\\x00 cr\\r'
      .. ' c1 \\x9b \\u0085 café €\n', out)
    out = cli(HOSTILE .. ' read file:///r')
    assert.equal('read me\n\\e[31mred\\e[0m\n(file:///b\\e[2J: image/png\\x07, 4 bytes of base64)\n', out)
    out = cli(HOSTILE .. ' prompt greet who=x')
    assert.equal('# A \\e[2Jgreeting\nuser\\e[8m: Hi\n\\e]0;title\\x07there\n', out)
  end)

  it('a tool error and a server error message reach stderr escaped too', function()
    local out, err, status = cli(HOSTILE .. ' call fail')
    assert.equal(1, status)
    assert.equal('', out)
    assert.equal('lua-mcp: fail reported an error: denied\\e[2J\nsee\\x07\n', err)
    out, err, status = cli(HOSTILE .. ' call refuse')
    assert.equal(1, status)
    -- the module itself replaced the server's controls in its message
    assert.equal('lua-mcp: MCP tools/call refuse failed: no\239\191\189]0;owned\239\191\189 (code -32000)\n', err)
  end)

  it('--json prints the server text as it came, for programs to read', function()
    local out, err, status = cli(HOSTILE .. ' read file:///r --json')
    assert.equal(0, status, err)
    assert.equal('[{"text":"read me\\n\\u001b[31mred\\u001b[0m","uri":"file:///r"},'
      .. '{"blob":"AAAA","mimeType":"image/png\\u0007","uri":"file:///b\\u001b[2J"}]\n', out)
  end)

  it('--help, for the tool and for each command', function()
    local out, _, status = cli('--help')
    assert.equal(0, status)
    assert.is_truthy(out:find('^usage: lua%-mcp SERVER %[%-%-json%] COMMAND'))
    for _, command in ipairs({ 'tools', 'call', 'resources', 'read', 'prompts', 'prompt', 'ping', 'info' }) do
      out, _, status = cli(command .. ' --help')
      assert.equal(0, status)
      assert.is_truthy(out:find('^lua%-mcp SERVER ' .. command .. ' '), out)
    end
  end)
  it('--login logs in at the address it prints and keeps the login for the next command', function()
    local base, stop, port = H.fault_server()
    local url = base .. '/mcp'
    local store = H.tmpname()
    local err_file, out_file = H.tmpname(), H.tmpname()
    -- In the background: the command waits for the browser.
    os.execute('LUA_MCP_TOKENS=' .. store .. ' ' .. CLI .. ' --url ' .. url .. ' --login tools >' .. out_file
      .. ' 2>' .. err_file .. ' &')
    local address
    for _ = 1, 100 do
      address = (H.slurp(err_file) or ''):match('\n  (http://%S+)\n')
      if address then break end
      os.execute('sleep 0.1')
    end
    assert.is_string(address)
    assert.equal('lua-mcp: the server asks you to log in; open this address in a browser:\n  ' .. address .. '\n',
      H.slurp(err_file))
    -- The browser: follows the authorization server's redirect back to the command.
    os.execute("curl -s -L -o /dev/null '" .. address .. "'")
    local listed
    for _ = 1, 100 do
      listed = H.slurp(out_file) or ''
      if listed ~= '' then break end
      os.execute('sleep 0.1')
    end
    assert.is_truthy(listed:find('^TOOL%s+ARGUMENTS%s+DESCRIPTION\nwhoami%s*\n$'), listed)
    assert.equal('600', H.command('stat -c %a ' .. store):match('%d+'))
    local out, err, status = cli('--url ' .. url .. ' --login call whoami', 'LUA_MCP_TOKENS=' .. store)
    assert.equal(0, status, err)
    assert.equal('', err)
    assert.equal(trace.decode(H.slurp(store))['http://127.0.0.1:' .. port .. ' ' .. url].access_token .. '\n', out)
    out, err, status = cli('--url ' .. url .. ' tools')
    assert.equal(1, status)
    assert.is_truthy(err:find('it needs credentials', 1, true))
    stop()
    for _, f in ipairs({ store, err_file, out_file }) do os.remove(f) end
  end)
end)
