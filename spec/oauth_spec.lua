-- Logging in to an MCP server behind OAuth, against the one in
-- spec/servers/http_faults.js (/mcp): a server whose authorization server
-- issues refresh tokens and, on demand, expires, revokes or refuses them,
-- which the conformance suite's mocks never do. What the server saw is
-- read back with curl, never through our client.
local H = require('helpers')
local trace = require('trace')

local mcp = H.native()

describe('OAuth login', function()
  local base, stop, store

  before_each(function()
    base, stop = H.fault_server()
    store = H.tmpname()
  end)
  after_each(function()
    stop()
    os.remove(store)
  end)

  local function stats() return H.get_json(base .. '/stats') end
  local function control(query) H.get_json(base .. '/control?' .. query) end

  -- A browser: opened on the authorization URL, it follows the redirect
  -- to wherever it points (our loopback listener), a moment later.
  local function browser(url)
    os.execute("(sleep 0.2; curl -s -L -o /dev/null '" .. url:gsub("'", '') .. "') &")
  end

  -- Headless: the URL the server sends the browser back to.
  local function headless(url)
    local p = io.popen("curl -s -o /dev/null -w '%{redirect_url}' '" .. url:gsub("'", '') .. "'")
    local location = p:read('*a')
    p:close()
    return location
  end

  local function never(_) error('the user was asked to log in again') end

  local function client(auth)
    return mcp.new({ url = base .. '/mcp', timeout = 10, auth = auth })
  end

  -- What the first request raised when its login failed.
  local function login_error(auth)
    local c = client(auth)
    local ok, err = pcall(c.discover, c)
    c:close()
    assert.is_false(ok)
    return err
  end

  local function authorization_failed(detail) return 'MCP authorization for ' .. base .. '/mcp failed: ' .. detail end

  -- The server's 401 once a login's token is refused too.
  local function token_refused()
    return 'MCP transport failed (401): the server at ' .. base .. '/mcp refused the request (HTTP 401,'
      .. ' WWW-Authenticate: Bearer error="invalid_token", resource_metadata="' .. base
      .. '/.well-known/oauth-protected-resource/mcp"); the token the login gave was not accepted'
  end

  -- How often the user was sent to log in, and how often a token was refreshed.
  local function logins_and_refreshes()
    local s = stats()
    return s.authorize, s.token.refresh_token or 0
  end

  local function saved()
    local f = assert(io.open(store))
    local text = f:read('*a')
    f:close()
    return trace.decode(text)[base .. ' ' .. base .. '/mcp']
  end

  it('a login nobody hands the URL back from waits at the loopback redirect for the browser', function()
    local c = client({ authorize = browser, store = store })
    local tools = c:discover()
    assert.equal('whoami', tools[1].name)
    local token = c:call('whoami', {})
    local s = stats()
    assert.equal(1, s.authorize)
    assert.equal(1, s.register)
    assert.equal(1, s.token.authorization_code)
    assert.equal(token, saved().access_token)
    local mode = H.command('stat -c %a ' .. store)
    assert.equal('600', mode:match('%d+'))
    c:close()
  end)

  it('a saved login is used by the next client without asking the user', function()
    local first = client({ authorize = headless, store = store })
    first:discover()
    first:close()
    local second = client({ authorize = never, store = store })
    assert.equal(saved().access_token, second:call('whoami', {}))
    assert.equal(1, stats().authorize)
    second:close()
  end)

  it('a token about to expire is refreshed before the call, not after a refusal', function()
    control('expires_in=30')
    local c = client({ authorize = headless, store = store })
    c:discover()
    local token = c:call('whoami', {})
    local s = stats()
    assert.equal(1, s.authorize)
    assert.is_true(s.token.refresh_token >= 1)
    assert.equal(0, s.refused - 1) -- only the first, tokenless request
    assert.equal(saved().access_token, token)
    c:close()
  end)

  it('a refresh that fails before a call is not tried again before the next one', function()
    control('expires_in=30')
    local c = client({ authorize = headless })
    c:call('whoami', {})
    control('refuse_refresh=1')
    c:call('whoami', {})
    c:call('whoami', {})
    -- the second call's refresh failed; the third call's rests
    assert.same({ 1, 1 }, { logins_and_refreshes() })
    c:close()
  end)

  it('a pre-registered client refreshes a saved token after a restart without asking the user', function()
    control('expires_in=30')
    local first = client({ authorize = headless, client_id = 'pre', client_secret = 'pre-secret', store = store })
    first:discover()
    first:close()
    local second = client({ authorize = never, client_id = 'pre', client_secret = 'pre-secret', store = store })
    local token = second:call('whoami', {})
    assert.equal(saved().access_token, token)
    local logins, refreshes = logins_and_refreshes()
    assert.equal(1, logins)
    assert.is_true(refreshes >= 1)
    assert.equal(0, stats().register)
    second:close()
  end)

  it('a refused token is refreshed once and the request sent again', function()
    local c = client({ authorize = headless })
    local before = c:call('whoami', {})
    control('revoke=1')
    local after = c:call('whoami', {})
    assert.are_not.equal(before, after)
    assert.same({ 1, 1 }, { logins_and_refreshes() })
    c:close()
  end)

  it('a server that refuses the refreshed token gets a new login, and one that refuses every token an error', function()
    control('reject_refreshed=1')
    local c = client({ authorize = headless })
    c:call('whoami', {})
    control('revoke=1')
    c:call('whoami', {})
    assert.same({ 2, 1 }, { logins_and_refreshes() })
    control('revoke=1')
    control('expires_in=-1')
    local ok, err = pcall(c.call, c, 'whoami', {})
    assert.is_false(ok)
    assert.equal(token_refused(), err)
    assert.equal(3, stats().authorize)
    c:close()
  end)

  it('an async request refused for want of credentials is sent again with new ones, as a blocking one is', function()
    local c = client({ authorize = headless })
    local before = c:call_async('whoami', {}):wait()
    control('revoke=1')
    local after = c:call_async('whoami', {}):wait()
    assert.are_not.equal(before, after)
    assert.same({ 1, 1 }, { logins_and_refreshes() })
    c:close()
  end)

  it('a refresh the authorization server refuses falls back to a new login', function()
    local c = client({ authorize = headless })
    c:call('whoami', {})
    control('refuse_refresh=1')
    control('revoke=1')
    c:call('whoami', {})
    assert.equal(2, stats().authorize)
    c:close()
  end)

  it('a token store that is not JSON is refused by name, not overwritten', function()
    local f = assert(io.open(store, 'w'))
    f:write('my notes')
    f:close()
    assert.equal('mcp: the token store ' .. store .. ' is not a JSON object of saved logins; delete it'
      .. ' (the next login writes it anew) or set opts.auth.store to another path',
      login_error({ authorize = headless, store = store }))
    assert.equal('my notes', H.slurp(store))
    assert.equal(0, stats().authorize)
  end)

  it('a store table keeps the login as JSON text under the issuer and the resource', function()
    local kept = {}
    local table_store = {
      load = function(key) return kept[key] end,
      save = function(key, text) kept[key] = text end,
    }
    local first = client({ authorize = headless, store = table_store })
    local token = first:call('whoami', {})
    first:close()
    local record = trace.decode(kept[base .. ' ' .. base .. '/mcp'])
    assert.equal(token, record.access_token)
    assert.equal(base, record.issuer)
    assert.equal(base .. '/mcp', record.resource)
    assert.is_string(record.refresh_token)
    assert.is_string(record.client.client_secret)
    local second = client({ authorize = never, store = table_store })
    assert.equal(token, second:call('whoami', {}))
    second:close()
  end)

  it('nobody coming back to the redirect within login_timeout ends the login saying what to do', function()
    local port = H.port()
    local err = login_error({ authorize = function() end, login_timeout = 0.3,
                              redirect_uri = 'http://127.0.0.1:' .. port .. '/done' })
    assert.equal('MCP authorization failed: no browser came back to http://127.0.0.1:' .. port .. '/done in time'
      .. ' (open the authorization URL given to opts.auth.authorize, or raise opts.auth.login_timeout)', err)
  end)

  it('SIGINT while the login waits for the browser returns Lua to the host', function()
    local opts = string.format('{ url = %q, auth = { authorize = function() end, login_timeout = 60 } }', base .. '/mcp')
    local seconds, raised, out, status = H.interrupted_call(opts, 'whoami')
    assert.equal(0, status, out)
    assert.is_truthy(raised and raised:find('interrupted!$'), out)
    assert.is_true(seconds < 2, out)
  end)

  it('an authorization server without S256 is refused before anyone is sent to it', function()
    control('no_pkce=1')
    assert.equal(authorization_failed('the authorization server ' .. base .. ' does not advertise PKCE with S256'
      .. ' (code_challenge_methods_supported), which this client requires'), login_error({ authorize = never }))
    assert.equal(0, stats().authorize)
  end)

  it('a server that names another authorization server gets none of the first one\'s tokens or secrets', function()
    local c = client({ authorize = headless })
    local first = c:call('whoami', {})
    control('second=1')
    control('revoke=1')
    local again = c:call('whoami', {})
    assert.are_not.equal(first, again)
    local s = stats()
    assert.equal(0, s.second_refresh)
    assert.equal(1, s.second['/register'])
    assert.equal(1, s.second['/authorize'])
    assert.equal(0, s.token.refresh_token or 0)
    c:close()
  end)

  it('opts.auth.issuer keeps credentials from any other authorization server the server names', function()
    local c = client({ authorize = headless, issuer = base .. '/' })
    c:call('whoami', {})
    control('second=1')
    control('revoke=1')
    local ok, err = pcall(c.call, c, 'whoami', {})
    assert.is_false(ok)
    assert.equal(authorization_failed('it names the authorization server ' .. base .. '/second, and'
      .. ' opts.auth.issuer allows only ' .. base .. '/; nothing was sent there'), err)
    assert.same({}, stats().second)
    c:close()
  end)

  it('authorization-server metadata naming another issuer than the resource named stops the login', function()
    control('wrong_issuer=1')
    assert.equal(authorization_failed('the authorization server metadata at ' .. base
      .. '/.well-known/oauth-authorization-server names the issuer https://elsewhere.example, not ' .. base),
      login_error({ authorize = never }))
    assert.equal(0, stats().authorize)
  end)

  it('resource metadata without a resource, and an endpoint that is not HTTPS, stop the login', function()
    control('no_resource=1')
    assert.equal(authorization_failed('its protected-resource metadata (' .. base
      .. '/.well-known/oauth-protected-resource/mcp) names no resource (RFC 9728 requires it)'),
      login_error({ authorize = never }))
    control('no_resource=0&insecure=1')
    assert.equal(authorization_failed('the authorization server\'s endpoint http://192.0.2.1/token is not HTTPS;'
      .. ' codes and secrets are not sent over it'), login_error({ authorize = never }))
    assert.equal(0, stats().authorize)
  end)

  describe('the redirect names its issuer (RFC 9207 mix-up defence)', function()
    local function mixed_up()
      return authorization_failed('the login came back from the issuer https://attacker.invalid, not from '
        .. base .. ' where it was sent (RFC 9207 mix-up defence); the code was not redeemed')
    end

    it('an iss naming another issuer is refused before the code is redeemed', function()
      control('iss=wrong')
      assert.equal(mixed_up(), login_error({ authorize = headless }))
      assert.equal(1, stats().authorize)
      assert.is_nil(stats().token.authorization_code)
    end)

    it('a missing iss is refused where the metadata promises it, and taken where it does not', function()
      control('iss=missing')
      assert.equal(authorization_failed('the login came back without iss, which the authorization server ' .. base
        .. ' promises (authorization_response_iss_parameter_supported); the code was not redeemed'),
        login_error({ authorize = headless }))
      assert.is_nil(stats().token.authorization_code)
      control('no_iss_support=1')
      local c = client({ authorize = headless })
      assert.is_string(c:call('whoami', {}))
      c:close()
    end)

    it('an iss naming another issuer is refused even where none was promised', function()
      control('iss=wrong&no_iss_support=1')
      assert.equal(mixed_up(), login_error({ authorize = headless }))
    end)
  end)

  describe('plain HTTP off this machine', function()
    -- [::ffff:127.0.0.1] reaches this server, but as written it is not
    -- loopback: it stands in for a remote host reached over plain HTTP.
    local function remote(b) return (b:gsub('127%.0%.0%.1', '[::ffff:7f00:1]')) end

    it('a login for a plain-HTTP server on another host is refused before any metadata is read', function()
      local url = remote(base) .. '/mcp'
      local c = mcp.new({ url = url, timeout = 10, auth = { authorize = never } })
      local ok, err = pcall(c.call, c, 'whoami', {})
      c:close()
      assert.is_false(ok)
      assert.equal('MCP authorization for ' .. url .. ' failed: it is plain HTTP on another host, and a login would'
        .. ' send its tokens in clear; HTTPS is required (plain HTTP is allowed only to this machine: localhost,'
        .. ' 127.0.0.0/8 or [::1])', err)
      assert.same({}, stats().metadata)
    end)

    it('an authorization server reached over plain HTTP on another host is not believed', function()
      control('remote_issuer=1')
      assert.equal(authorization_failed('the authorization server metadata at ' .. remote(base)
        .. '/.well-known/oauth-authorization-server would come over plain HTTP from another host; HTTPS is'
        .. ' required (plain HTTP is allowed only to this machine: localhost, 127.0.0.0/8 or [::1])'),
        login_error({ authorize = never }))
      assert.is_nil(stats().metadata['/.well-known/oauth-authorization-server'])
    end)
  end)

  describe('a pre-registered secret goes only where it was first used', function()
    local function pre(extra)
      local auth = { authorize = headless, client_id = 'pre', client_secret = 'pre-secret', store = store }
      for k, v in pairs(extra or {}) do auth[k] = v end
      return client(auth)
    end
    local function bound_error()
      return authorization_failed('it names the authorization server ' .. base .. '/second, and the pre-registered'
        .. ' client pre is bound to ' .. base .. ', the first it was used with; nothing was sent there'
        .. ' (set opts.auth.issuer to move it)')
    end

    it('another issuer named mid-session gets nothing', function()
      local c = pre()
      c:call('whoami', {})
      control('second=1')
      control('revoke=1')
      local ok, err = pcall(c.call, c, 'whoami', {})
      c:close()
      assert.is_false(ok)
      assert.equal(bound_error(), err)
      assert.same({}, stats().second)
    end)

    it('the binding is kept in the store, and opts.auth.issuer moves it', function()
      local first = pre()
      first:call('whoami', {})
      first:close()
      control('second=1')
      control('revoke=1')
      local restarted = pre()
      local ok, err = pcall(restarted.call, restarted, 'whoami', {})
      restarted:close()
      assert.is_false(ok)
      assert.equal(bound_error(), err)
      assert.same({}, stats().second)
      local moved = pre({ issuer = base .. '/second' })
      assert.is_string(moved:call('whoami', {}))
      moved:close()
      assert.equal(1, stats().second['/token'])
    end)
  end)

  describe('what the token endpoint gives is checked when it arrives', function()
    for _, which in ipairs({ 'access', 'refresh' }) do
      it('an issued ' .. which .. ' token with CR LF is refused and never saved', function()
        control('control_token=' .. which)
        assert.equal(authorization_failed('the token endpoint ' .. base .. '/token gave a ' .. which
          .. ' token with control characters; it was neither used nor saved'),
          login_error({ authorize = headless, store = store }))
        local text = H.slurp(store) or '{}'
        assert.is_nil(trace.decode(text)[base .. ' ' .. base .. '/mcp'])
      end)
    end

    for _, case in ipairs({ { '1', 'after its headers' }, { '2', 'before its headers' } }) do
      it('a token endpoint that stalls ' .. case[2] .. ' is reported as timed out', function()
        control('stall_token=' .. case[1])
        local c = mcp.new({ url = base .. '/mcp', timeout = 1, auth = { authorize = headless } })
        local ok, err = pcall(c.discover, c)
        c:close()
        assert.is_false(ok)
        assert.equal(authorization_failed('the request to ' .. base .. '/token timed out: no whole answer within 1 s'
          .. ' (opts.timeout)'), err)
      end)
    end
  end)

  describe('the token store', function()
    -- Six lua processes started at once, each logging in to its own
    -- resource (/mcp/N) with one shared store, as the headless helper
    -- does. Returns what each wrote (the token, or what it raised) and
    -- the shell's output. `auth` is Lua source for more of opts.auth.
    local function six_logins(auth)
      local script = H.tmpname() .. '.lua'
      local f = assert(io.open(script, 'w'))
      f:write(string.format([[
        package.cpath = %q .. '/?.so;' .. package.cpath
        local mcp = require('mcp')
        local function headless(url)
          local p = io.popen("curl -s -o /dev/null -w '%%{redirect_url}' '" .. url:gsub("'", '') .. "'")
          local location = p:read('*a')
          p:close()
          return location
        end
        local c = mcp.new({ url = %q .. '/mcp/' .. arg[1], timeout = 20,
          auth = { authorize = headless, store = %q, %s } })
        io.write((c:call('whoami', {})))
        c:close()
      ]], H.ROOT, base, store, auth or ''))
      f:close()
      local out = H.command('for i in 1 2 3 4 5 6; do ' .. H.LUA .. ' ' .. script .. ' $i > ' .. script .. '.$i 2>&1 & done; wait')
      local said = {}
      for i = 1, 6 do
        said[i] = H.slurp(script .. '.' .. i)
        os.remove(script .. '.' .. i)
      end
      os.remove(script)
      return said, out
    end

    -- Every process's token is the one kept under its resource.
    local function all_six_kept(said, out)
      local records = trace.decode(H.slurp(store) or '{}')
      for i = 1, 6 do
        local record = records[base .. ' ' .. base .. '/mcp/' .. i]
        assert.is_table(record, 'record ' .. i .. ' lost; the process said: ' .. said[i] .. out)
        assert.equal(record.access_token, said[i], out)
      end
      os.remove(store .. '.lock')
    end

    it('six processes logging in at once keep all six records', function()
      all_six_kept(six_logins())
    end)

    -- Six logins at once against a token endpoint that answers only once
    -- all six asked: nothing may hold one process back for another (a
    -- lock across a request, a shared wait) before its token request.
    local function six_behind_a_barrier(auth, grants)
      control('token_barrier=6')
      local said, out = six_logins(auth)
      -- When the server saw what, for the message of a failure.
      local arrivals = H.get_json(base .. '/arrivals')
      local timeline = {}
      for _, a in ipairs(arrivals) do
        local who = a.who or a.registered or ''
        timeline[#timeline + 1] = string.format('%8.0f ms %s %s %s', a.t, a.method or '', a.path, who)
      end
      timeline = '\nthe server saw:\n' .. table.concat(timeline, '\n')
      local answered = {}
      for _, a in ipairs(arrivals) do
        if a.path == '/token answered' then answered[#answered + 1] = a.status end
      end
      all_six_kept(said, out .. timeline)
      assert.same({ 200, 200, 200, 200, 200, 200 }, answered, timeline)
      assert.same(grants, stats().token)
    end

    it('six processes logging in at once all reach a token endpoint that answers only once all six asked', function()
      six_behind_a_barrier(nil, { authorization_code = 6 })
    end)

    it('the same with a pre-registered client, whose secret is bound to its issuer in the store first', function()
      six_behind_a_barrier("client_id = 'pre', client_secret = 'pre-secret'", { authorization_code = 6 })
    end)

    it('a store others can write is refused, saying how to fix it', function()
      local f = assert(io.open(store, 'w'))
      f:write('{}')
      f:close()
      os.execute('chmod 664 ' .. store)
      assert.equal('mcp: the token store ' .. store .. ' can be written by others (mode 664), who could steer every'
        .. ' login through it; run chmod 600 ' .. store, login_error({ authorize = headless, store = store }))
      assert.equal(0, stats().authorize)
    end)

    it("a store another user owns is refused", function()
      if H.command('id -u'):match('%d+') ~= '0' then
        pending('only root can give a file to another user here')
        return
      end
      local f = assert(io.open(store, 'w'))
      f:write('{}')
      f:close()
      os.execute('chmod 600 ' .. store .. ' && chown 65534 ' .. store)
      assert.equal('mcp: the token store ' .. store .. ' belongs to another user (uid 65534), who could steer every'
        .. ' login through it; use a store of your own (opts.auth.store) or chown it',
        login_error({ authorize = headless, store = store }))
    end)
  end)

  it('idle connections to the loopback listener do not keep the browser waiting', function()
    -- Six connections that send nothing (a port scanner, a browser's
    -- preconnects), then the browser.
    local function crowded(url)
      local port = url:match('redirect_uri=http%%3A%%2F%%2F127%.0%.0%.1%%3A(%d+)')
      os.execute('node -e "for (let i = 0; i < 6; i++) require(\'net\').connect(' .. port
        .. ', \'127.0.0.1\'); setTimeout(() => {}, 15000)" >/dev/null 2>&1 &')
      browser(url)
    end
    local c = client({ authorize = crowded, login_timeout = 8 })
    local t0 = mcp.clock()
    c:discover()
    local took = mcp.clock() - t0
    c:close()
    -- Served one at a time, the six held the browser 12 s.
    assert.is_true(took < 4, string.format('the login took %.1f s', took))
  end)

  it('the conformance driver chooses its grant from the credentials it is given, not from the scenario name', function()
    -- The name says client credentials; the pre-registered client and an
    -- authorization server offering the code flow say a user's login.
    local context = '{"name":"auth/client-credentials-basic","client_id":"pre","client_secret":"pre-secret"}'
    local out, status = H.command('MCP_CONFORMANCE_SCENARIO=auth/client-credentials-basic MCP_CONFORMANCE_CONTEXT=\''
      .. context .. '\' ' .. H.LUA .. ' ' .. H.ROOT .. '/spec/conformance/client.lua ' .. base .. '/mcp')
    assert.equal(0, status, out)
    assert.is_truthy(out:find('whoami -> true at-', 1, true), out)
    assert.same({ authorization_code = 1 }, stats().token)
  end)

  it('what authorize raises reaches the caller unchanged', function()
    local reason = { reason = 'the user closed the window' }
    assert.equal(reason, login_error({ authorize = function() error(reason) end }))
  end)

  it('a refusal from the token endpoint names the error and never the secret', function()
    assert.equal(authorization_failed('the token endpoint ' .. base .. '/token refused the request'
      .. ' (HTTP 401: invalid_client)'),
      login_error({ grant = 'client_credentials', client_id = 'machine', client_secret = 's3cret-value' }))
  end)

  it('login options are checked at mcp.new', function()
    local cases = {
      { { auth = { client_secrt = 'x' } },
        'mcp.new: opts.auth.client_secrt is not an option (opts.auth takes token, or a login: assertion, authorize,'
          .. ' client_id, client_metadata_url, client_name, client_secret, dpop, grant, idp, issuer, login_timeout,'
          .. ' private_key_pem, redirect_uri, store)' },
      { { auth = { dpop = 'yes' } }, 'mcp.new: opts.auth.dpop must be a boolean' },
      { { auth = { token = 'static', dpop = true } },
        'mcp.new: give opts.auth.token or a login (opts.auth.dpop and the like), not both' },
      { { auth = { grant = 'password' } },
        'mcp.new: opts.auth.grant must be "authorization_code", "client_credentials", "identity_assertion" or'
          .. ' "jwt_bearer", got "password"' },
      { { auth = { grant = 'jwt_bearer', client_id = 'workload' } },
        'mcp.new: opts.auth.grant = "jwt_bearer" needs opts.auth.client_id and opts.auth.assertion (the workload\'s'
          .. ' identity token)' },
      { { auth = { grant = 'identity_assertion', client_id = 'c' } },
        'mcp.new: opts.auth.grant = "identity_assertion" needs opts.auth.client_id and opts.auth.idp (token_endpoint, id_token)' },
      { { auth = { idp = { token_endpoint = 'http://idp/token' } } },
        'mcp.new: opts.auth.idp.id_token must be a string (cross-app access needs it)' },
      { { auth = { grant = 'client_credentials', client_id = 'm' } },
        'mcp.new: opts.auth.grant = "client_credentials" needs opts.auth.client_id and either client_secret or private_key_pem' },
      { { auth = { login_timeout = math.huge } },
        'mcp.new: opts.auth.login_timeout must be a number of seconds above 0 and below 1e7' },
      { { auth = { login_timeout = 2 ^ 53 } },
        'mcp.new: opts.auth.login_timeout must be a number of seconds above 0 and below 1e7' },
      { { auth = { private_key_pem = 'not a key' } },
        'mcp.new: opts.auth.private_key_pem is not an EC P-256 private key in PEM (PKCS #8 or SEC1)' },
      { { auth = { store = { load = print } } },
        'mcp.new: opts.auth.store must be a file path or a table with load and save functions' },
      { { auth = {}, headers = { Authorization = 'Bearer x' } },
        'mcp.new: give opts.auth or opts.headers.Authorization, not both' },
      { { auth = {}, url = false, command = 'true' },
        'mcp.new: opts.auth logs in to an HTTP server; give it with opts.url' },
    }
    for _, case in ipairs(cases) do
      local opts = case[1]
      if opts.url == nil then opts.url = base .. '/mcp' elseif opts.url == false then opts.url = nil end
      local ok, err = pcall(mcp.new, opts)
      assert.is_false(ok)
      assert.equal(case[2], err)
    end
  end)
end)
