// oauth.js PORT - an MCP server behind OAuth on 127.0.0.1, with its own
// authorization server on the same origin, for what the conformance
// suite's mocks never do: issue refresh tokens, expire and revoke tokens,
// refuse a refreshed token, refuse a refresh, drop PKCE.
//
//   /.well-known/oauth-protected-resource/mcp   the resource's metadata
//   /.well-known/oauth-authorization-server     the issuer's metadata
//   /register   dynamic registration: a client with a secret (Basic)
//   /authorize  sends the browser straight back with a code
//   /token      authorization_code (PKCE and the secret checked) and
//               refresh_token (rotated)
//   /mcp        stateless JSON replies; tool "whoami" returns the token;
//               401 for a token not issued here, revoked or expired
//   /control?K=V&...  expires_in=N, reject_refreshed=1, refuse_refresh=1,
//               no_pkce=1 (metadata without S256), revoke=1 (every access
//               token issued so far), insecure=1 (a plain-HTTP token
//               endpoint elsewhere), no_resource=1 (resource metadata
//               without "resource"), second=1 (401s name other resource
//               metadata, whose issuer is BASE/second: the same endpoints
//               under /second/), wrong_issuer=1 (the issuer's metadata
//               names another issuer), iss=wrong|missing (the redirect's
//               RFC 9207 iss: another issuer's, or none; normally ours),
//               no_iss_support=1 (metadata does not promise iss),
//               remote_issuer=1 (the resource names an issuer on
//               [::ffff:127.0.0.1], a plain-HTTP host that is not loopback
//               as written), stall_token=1|2 (the token endpoint stalls
//               after its headers, or before them), control_token=access|
//               refresh (that token carries CR LF), token_barrier=N (the
//               token endpoint holds each request until N have arrived,
//               then answers them all; the barrier is then spent, and
//               later requests are answered at once; one held 20 s
//               without the barrier filling gets a 503)
//   /mcp/N      another resource (its own metadata, resource BASE/mcp/N),
//               for logins to several resources sharing one store
//
// A client "pre" with the secret "pre-secret" is registered from the start.
//   /stats      {"authorize", "register", "token": {GRANT: N}, "refused",
//               "second": {PATH: N}, "second_refresh", "metadata": {PATH: N}}
//   /arrivals   every request as it arrived, in order: [{"t": ms since the
//               server started, "method", "path", "who": the resource's
//               number (/mcp/N) or client id where the request tells,
//               "port": the client's port, "registered": the client id
//               /register gave}], and the token endpoint's
//               answers: {"t", "path": "/token answered", "status", "who"}
const http = require('http');
const crypto = require('crypto');

const port = Number(process.argv[2] || 0);
const base = `http://127.0.0.1:${port}`;
const config = { expires_in: 3600, reject_refreshed: false, refuse_refresh: false, no_pkce: false, iss: 'right', token_barrier: 0 };
const stats = { authorize: 0, register: 0, token: {}, refused: 0, second: {}, second_refresh: 0, metadata: {} };
const remote = `http://[::ffff:127.0.0.1]:${port}`;
const clients = new Map([['pre', 'pre-secret']]); // id -> secret
const codes = new Map(); // code -> { challenge, redirect_uri, client_id, scope }
const access = new Map(); // token -> { refreshed, expires, revoked }
const refresh = new Map(); // token -> client_id
let counter = 0;
const started = process.hrtime.bigint();
const arrivals = [];
const held = []; // token requests waiting at the barrier
const BARRIER_WAIT = 20000;

function since() { return Number(process.hrtime.bigint() - started) / 1e6; }

// Who a request is from, where it says: the resource's number (/mcp/N in
// its path, or in its resource parameter) or its client id.
function who(req, url, body) {
  const number = (s) => { const m = /\/mcp\/(\d+)/.exec(s || ''); return m ? m[1] : undefined; };
  const form = req.method === 'POST' && !url.pathname.match(/mcp/) ? new URLSearchParams(body) : null;
  const basic = (req.headers.authorization || '').startsWith('Basic ')
    ? Buffer.from(req.headers.authorization.slice(6), 'base64').toString().split(':')[0] : undefined;
  return number(url.pathname) || number(url.searchParams.get('resource')) || number(form && form.get('resource'))
    || basic || url.searchParams.get('client_id') || undefined;
}

function json(res, status, body, headers = {}) {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function basicClient(req) {
  const auth = req.headers.authorization || '';
  if (!auth.startsWith('Basic ')) return null;
  const [id, secret] = Buffer.from(auth.slice(6), 'base64').toString().split(':').map(decodeURIComponent);
  return clients.get(id) === secret ? id : null;
}

function issue(res, client_id, refreshed, scope) {
  const token = `at-${++counter}` + (config.control_token === 'access' ? '\r\nX-Injected: 1' : '');
  const rt = `rt-${counter}` + (config.control_token === 'refresh' ? '\r\n' : '');
  access.set(token, { refreshed, expires: Date.now() + config.expires_in * 1000, revoked: false });
  refresh.set(rt, client_id);
  json(res, 200, { access_token: token, token_type: 'Bearer', expires_in: config.expires_in, refresh_token: rt, scope });
}

function mcp(req, res, body, path) {
  const token = (req.headers.authorization || '').replace(/^Bearer /, '');
  const known = access.get(token);
  const good = known && !known.revoked && known.expires > Date.now() && !(config.reject_refreshed && known.refreshed);
  if (!good) {
    stats.refused++;
    const metadata = config.second ? 'second' : path.slice(1);
    return json(res, 401, { error: 'invalid_token' }, {
      'WWW-Authenticate': `Bearer error="invalid_token", resource_metadata="${base}/.well-known/oauth-protected-resource/${metadata}"`,
    });
  }
  const msg = JSON.parse(body);
  if (msg.id === undefined) { res.writeHead(202); return res.end(); }
  const reply = (result) => json(res, 200, { jsonrpc: '2.0', id: msg.id, result });
  switch (msg.method) {
    case 'initialize':
      return reply({ protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'oauth', version: '1' } });
    case 'tools/list':
      return reply({ tools: [{ name: 'whoami', inputSchema: { type: 'object' } }] });
    case 'tools/call':
      return reply({ content: [{ type: 'text', text: token }] });
    default:
      return json(res, 200, { jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'no such method' } });
  }
}

function token(req, res, body, second) {
  const form = new URLSearchParams(body);
  const grant = form.get('grant_type');
  if (config.stall_token === '2') return;
  if (config.stall_token === '1') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    return res.write('{"access_token":"at-');
  }
  if (second && grant === 'refresh_token') stats.second_refresh++;
  stats.token[grant] = (stats.token[grant] || 0) + 1;
  const client_id = basicClient(req);
  if (!client_id) return json(res, 401, { error: 'invalid_client' });
  if (grant === 'authorization_code') {
    const code = codes.get(form.get('code'));
    codes.delete(form.get('code'));
    const verifier = form.get('code_verifier') || '';
    const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
    if (!code || code.challenge !== challenge || code.redirect_uri !== form.get('redirect_uri') || code.client_id !== client_id) {
      return json(res, 400, { error: 'invalid_grant', error_description: 'code, verifier or redirect_uri wrong' });
    }
    return issue(res, client_id, false, code.scope);
  }
  if (grant === 'refresh_token') {
    const rt = form.get('refresh_token');
    if (config.refuse_refresh || refresh.get(rt) !== client_id) {
      return json(res, 400, { error: 'invalid_grant', error_description: 'refresh token not accepted' });
    }
    refresh.delete(rt);
    return issue(res, client_id, true, 'mcp');
  }
  json(res, 400, { error: 'unsupported_grant_type' });
}

// The token endpoint behind the barrier: held until config.token_barrier
// requests have arrived (the event loop runs on meanwhile), then all
// answered; a request held BARRIER_WAIT without that gets a 503.
function barrier(req, res, body, second) {
  const entry = { req, res, body, second };
  entry.timer = setTimeout(() => {
    held.splice(held.indexOf(entry), 1);
    json(res, 503, { error: 'temporarily_unavailable', error_description: `the token barrier of ${config.token_barrier} never filled` });
  }, BARRIER_WAIT);
  held.push(entry);
  if (held.length < config.token_barrier) return;
  config.token_barrier = 0;
  for (const e of held.splice(0)) {
    clearTimeout(e.timer);
    token(e.req, e.res, e.body, e.second);
  }
}

const server = http.createServer((req, res) => {
  const t = since();
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    const url = new URL(req.url, base);
    if (url.pathname !== '/arrivals' && url.pathname !== '/stats' && url.pathname !== '/control') {
      const arrival = { t, method: req.method, path: url.pathname, who: who(req, url, body), port: req.socket.remotePort };
      arrivals.push(arrival);
      req.arrival = arrival;
      if (url.pathname.endsWith('/token')) {
        const end = res.end.bind(res);
        res.end = (...a) => {
          arrivals.push({ t: since(), path: `${url.pathname} answered`, status: res.statusCode, who: arrival.who, port: arrival.port });
          return end(...a);
        };
      }
    }
    let path = url.pathname;
    const second = path.startsWith('/second/');
    if (second) {
      path = path.slice('/second'.length);
      stats.second[path] = (stats.second[path] || 0) + 1;
    }
    if (path.startsWith('/.well-known/')) stats.metadata[path] = (stats.metadata[path] || 0) + 1;
    const resource = path.match(/^\/\.well-known\/oauth-protected-resource(\/mcp(\/\d+)?|\/second)$/);
    if (resource) {
      let issuer = path.endsWith('second') ? `${base}/second` : base;
      if (config.remote_issuer) issuer = remote;
      const served = resource[1] === '/second' ? '/mcp' : resource[1];
      const doc = { resource: `${base}${served}`, authorization_servers: [issuer], scopes_supported: ['mcp'] };
      if (config.no_resource) delete doc.resource;
      return json(res, 200, doc);
    }
    if (path === '/.well-known/oauth-authorization-server' || path === '/.well-known/oauth-authorization-server/second') {
      const issuer = path.endsWith('second') ? `${base}/second` : base;
      return json(res, 200, {
        issuer: config.wrong_issuer ? 'https://elsewhere.example' : issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: config.insecure ? 'http://192.0.2.1/token' : `${issuer}/token`,
        registration_endpoint: `${issuer}/register`,
        response_types_supported: ['code'],
        grant_types_supported: ['authorization_code', 'refresh_token'],
        token_endpoint_auth_methods_supported: ['client_secret_basic'],
        code_challenge_methods_supported: config.no_pkce ? ['plain'] : ['S256'],
        authorization_response_iss_parameter_supported: !config.no_iss_support,
      });
    }
    if (path === '/register' && req.method === 'POST') {
      stats.register++;
      const id = `client-${++counter}`;
      const secret = `secret-${counter}`;
      clients.set(id, secret);
      if (req.arrival) req.arrival.registered = id;
      const asked = JSON.parse(body);
      return json(res, 201, { client_id: id, client_secret: secret, token_endpoint_auth_method: 'client_secret_basic', redirect_uris: asked.redirect_uris });
    }
    if (path === '/authorize') {
      stats.authorize++;
      const q = url.searchParams;
      const code = `code-${++counter}`;
      codes.set(code, { challenge: q.get('code_challenge'), redirect_uri: q.get('redirect_uri'), client_id: q.get('client_id'), scope: q.get('scope') });
      const back = new URL(q.get('redirect_uri'));
      back.searchParams.set('code', code);
      back.searchParams.set('state', q.get('state'));
      const issuer = second ? `${base}/second` : base;
      if (config.iss === 'right') back.searchParams.set('iss', issuer);
      if (config.iss === 'wrong') back.searchParams.set('iss', 'https://attacker.invalid');
      res.writeHead(302, { Location: back.toString() });
      return res.end();
    }
    if (path === '/token' && req.method === 'POST') {
      if (config.token_barrier > 0) return barrier(req, res, body, second);
      return token(req, res, body, second);
    }
    if (/^\/mcp(\/\d+)?$/.test(path) && req.method === 'POST') return mcp(req, res, body, path);
    if (path === '/control') {
      for (const [k, v] of url.searchParams) {
        if (k === 'revoke') for (const t of access.values()) t.revoked = true;
        else if (k === 'expires_in' || k === 'token_barrier') config[k] = Number(v);
        else if (['iss', 'stall_token', 'control_token'].includes(k)) config[k] = v;
        else config[k] = v === '1';
      }
      return json(res, 200, config);
    }
    if (path === '/stats') return json(res, 200, stats);
    if (path === '/arrivals') return json(res, 200, arrivals);
    res.writeHead(405);
    res.end();
  });
});
server.listen(port, '127.0.0.1', () => console.log(`listening on ${port}`));
