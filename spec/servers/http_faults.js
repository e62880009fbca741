// http_faults.js PORT [CERT KEY] - the specs' own HTTP server, on
// 127.0.0.1 (HTTPS when given a certificate and its key; with PORT 0, on
// the port the kernel chose), printing "listening on PORT" once it is.
// It does what a real server will not do when asked, and what a request
// meets is chosen by its path: MCP servers that misbehave on demand, an
// MCP server behind OAuth with its own authorization server, and a server
// on the official TypeScript SDK that allows only "localhost" as Host.
// A spec starts one of its own with H.fault_server (spec/helpers.lua);
// the Windows pass, with scripts/windows-pass.sh.
//
// MCP servers that misbehave on demand (a path this header does not name
// is a well-behaved one):
//
//   /plain      a well-behaved server (JSON replies, a GET stream)
//   /expire     forgets its first session after 3 requests (404), as after a restart
//   /expire-*   the same, each such path once on its own (/expire-timeout, ...)
//   /drop       answers tools/call over SSE, but closes the stream after a
//               priming event; the reply is there on resumption (GET with
//               Last-Event-ID)
//   /errors     tools/call "bad" gets 400 with a JSON-RPC error body,
//               "html" a 500 with an HTML page
//   /slow       tools/call "slow" answers after 3 s
//   /evil       hands out a session id full of shell metacharacters
//   /nostream   a GET gets 405: no server stream
//   /get-drop   a normal session whose GET stream sends a priming event
//               (id g-1, retry 50 ms) and ends 300 ms later; a GET with
//               Last-Event-ID gets a stream that brings a log message
//               naming the id it resumed from, and stays open
//   /keepalive  a normal session whose GET stream sends only SSE comments
//               (": ping") every 100 ms and never ends; DELETE gets 405
//   /slow-delete  as /keepalive, but DELETE is answered (200) only after 3 s
//   /hang-get   a normal session whose GET stream is accepted and never
//               answered: no status line, no headers, ever
//   /away       every request gets 302 to http://localhost:PORT/landing:
//               the same server under another host name, another origin
//   /landing    where /away points: a well-behaved server, as /plain (a
//               request here is one that should not have been sent)
//   /moved      every request gets 307 to the relative /plain (same origin)
//   /login      a POST gets 200 with an HTML sign-in page
//   /auth       a POST gets 401 with a WWW-Authenticate challenge naming the
//               resource metadata, and the JSON body {"error":"invalid_token"}
//   /forbidden  a POST gets 403 with no WWW-Authenticate and no body
//   /forbidden-reason  a POST gets 403 with no WWW-Authenticate and its
//               reason as plain text, as a proxy or an origin check says it
//   /unauthorized-reason  a POST gets 401 with no WWW-Authenticate and its
//               reason as plain text, quoting the Authorization it got
//   /bearer     a well-behaved server for requests with "Authorization:
//               Bearer right" (or "Bearer right-N"); 401 with a challenge
//               for any other
//   /many-headers  a POST gets 200 with 200 distinct response headers
//   /huge-header   a POST gets 200 with one response header of 100 KB
//   /cut-big    a well-behaved server, but a POST whose body is over 1 MB has
//               its connection reset as soon as its headers arrive
//   /slow-init  a well-behaved server slow at every step of its handshake:
//               initialize is answered after 2 s, notifications/initialized
//               after 2 s, and its GET stream's headers come after 1.5 s
//   /trickle    a POST's answer (a JSON-RPC error, -32601) comes a byte each
//               100 ms, its response head included (about 10 s in all)
//   /ask-slow   answers tools/call over SSE after asking the client an
//               elicitation/create on that stream; the reply ("Echo: " and
//               the answer's action) follows the answer at once, but the
//               answer's own POST is answered (202) only after 2 s. Tool
//               "ask6" asks six at once, answers each POST after 300 ms,
//               and replies "Echo: 6 answers" once all six came
//   /sse        answers tools/call over SSE, ending the stream after the reply
//               (tool "slow": a comment at once, the reply after 3 s)
//   /sse-linger as /sse, but a log notification follows the reply and the
//               stream ends after it, each in a write of its own
//   /sse-open   as /sse, but the stream never ends (a log notification
//               follows the reply)
//   /modern-drop  a 2026-07-28 server (no sessions; GET and DELETE get 405)
//               whose first tools/call reply stream closes after a priming
//               event, before the reply; later calls are answered, but for
//               tool "hang", whose stream stays open with nothing on it
//               until the client closes it (logged as a CLOSED request
//               whose body is the call's id). Its tool "slow_task" becomes
//               a task (Tasks extension) working until tasks/cancel names
//               it, and "wide_task" a task whose id is 64 KiB long. Its
//               "echo" is annotated read-only; "charge" (destructive, not
//               idempotent) counts its runs, then closes its reply stream
//               unanswered while its runs are at most {broken_runs}
//               (default: always), and answers "charged N" after;
//               "charges" tells the count; "route" marks its region
//               x-mcp-header (Region) and tells the length of the
//               Mcp-Param-Region header it got.
//
// On the GET stream of a session the server sends a ping and a
// notification as soon as a client opens it.
//
// Behind OAuth: an MCP server whose authorization server, on the same
// origin (BASE, the issuer), does what the conformance suite's mocks
// never do: issue refresh tokens, expire and revoke tokens, refuse a
// refreshed token, refuse a refresh, drop PKCE.
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
//
// Any other path under /.well-known/ or /second/, and a request to one of
// these paths by a method it does not take, gets 405.
//
// On the official TypeScript SDK (spec/peers/node_modules, loaded at the
// first such request):
//
//   /host-check  the SDK's own Express app and Streamable HTTP transport
//               (stateless), whose DNS-rebinding protection allows only
//               "localhost" in the Host header, as Playwright's server
//               does: a client that reaches it as 127.0.0.1 gets a 403
//               whose reason is in the body, and no WWW-Authenticate (the
//               refusal has nothing to do with credentials)
//
// What the server saw, read back with node (never with the client under
// test); these requests are themselves neither logged nor counted:
//
//   /log        every request seen (method, path, headers, body) but
//               /host-check's, which the SDK takes whole; clears it
//   /stats      {"open": N, "paths": {PATH: N}, "streams": {PATH: N},
//               "accepted": {PATH: N}}: the connections open right now
//               among those that carried a request to a path other than
//               these four (so the asking connection is never counted),
//               in all and by the path of the last request each carried;
//               "streams" counts those whose last request was a GET;
//               "accepted" every connection ever opened, by the path of
//               its first request. Beside them, the OAuth side's counts:
//               "authorize", "register", "token": {GRANT: N}, "refused",
//               "second": {PATH: N}, "second_refresh", "metadata": {PATH: N}
//   /arrivals   every request to the OAuth side as it arrived, in order:
//               [{"t": ms since the server started, "method", "path",
//               "who": the resource's number (/mcp/N) or client id where
//               the request tells, "port": the client's port,
//               "registered": the client id /register gave}], and the
//               token endpoint's answers: {"t", "path": "/token
//               answered", "status", "who"}
//   /control    (above)
const http = require('http');
const https = require('https');
const fs = require('fs');
const crypto = require('crypto');

const port = Number(process.argv[2] || 0);
const [certFile, keyFile] = process.argv.slice(3);
const tls = certFile ? { cert: fs.readFileSync(certFile), key: fs.readFileSync(keyFile) } : null;
const started = process.hrtime.bigint();

function since() { return Number(process.hrtime.bigint() - started) / 1e6; }

function json(res, status, body, headers = {}) {
  res.writeHead(status, { 'Content-Type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function result(id, value) {
  return { jsonrpc: '2.0', id, result: value };
}

function toolResult(text, isError) {
  return { content: [{ type: 'text', text }], ...(isError ? { isError: true } : {}) };
}

// ---------------------------------------------------------------------
// MCP servers that misbehave on demand
// ---------------------------------------------------------------------

let log = [];
const sessions = new Map(); // id -> { requests, stream }
let counter = 0;
const expired = new Set(); // the /expire paths that forgot a session already
const asking = new Map(); // /ask-slow: elicitation id -> { stream, callId }

const EVIL_ID = "x$(touch /tmp/lua-mcp-pwned)`touch /tmp/lua-mcp-pwned2`;touch${IFS}/tmp/lua-mcp-pwned3";

// Writes the whole answer to the socket itself, a byte at a time.
function trickle(req, res, body) {
  let id = null;
  try { id = JSON.parse(body).id; } catch (e) { /* a GET or a DELETE */ }
  const text = JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32601, message: 'Method not found' } });
  const whole = `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;
  const socket = res.socket;
  let at = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || at >= whole.length) {
      clearInterval(timer);
      return;
    }
    socket.write(whole[at++]);
  }, 100);
}

let modernCalls = 0;
let taskCount = 0;
const tasks = {};
let charges = 0;
function modern(req, res, body) {
  if (req.method !== 'POST') {
    res.writeHead(405);
    return res.end();
  }
  const msg = JSON.parse(body);
  const version = req.headers['mcp-protocol-version'];
  const meta = (msg.params && msg.params._meta) || {};
  if (!version || version !== meta['io.modelcontextprotocol/protocolVersion']) {
    return json(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32020, message: 'Header mismatch' } });
  }
  if (msg.id === undefined) {
    res.writeHead(202);
    return res.end();
  }
  if (msg.method === 'server/discover') {
    return json(res, 200, result(msg.id, { resultType: 'complete', supportedVersions: ['2026-07-28'],
      capabilities: { tools: {}, extensions: { 'io.modelcontextprotocol/tasks': {} } },
      _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'modern-drop', version: '1' } },
      ttlMs: 0, cacheScope: 'public' }));
  }
  if (msg.method === 'tools/list') {
    return json(res, 200, result(msg.id, { resultType: 'complete', tools: [
      { name: 'echo', inputSchema: { type: 'object', properties: { message: { type: 'string' } } },
        annotations: { readOnlyHint: true } },
      { name: 'charge', inputSchema: { type: 'object' },
        annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false } },
      { name: 'charges', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true } },
      { name: 'route', inputSchema: { type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } } },
        annotations: { readOnlyHint: true } }] }));
  }
  if (msg.method === 'tools/call' && /_task$/.test(msg.params.name)) {
    const id = msg.params.name === 'wide_task' ? 'w'.repeat(65536) : `http-task-${++taskCount}`;
    tasks[id] = 'working';
    return json(res, 200, result(msg.id, { resultType: 'task', taskId: id, status: 'working',
      pollIntervalMs: 20, ttlMs: 60000, createdAt: '2026-12-01T10:00:00Z', lastUpdatedAt: '2026-12-01T10:00:00Z' }));
  }
  if (msg.method === 'tasks/get' || msg.method === 'tasks/cancel') {
    const id = msg.params.taskId;
    if (!(id in tasks)) return json(res, 200, { jsonrpc: '2.0', id: msg.id, error: { code: -32602, message: 'Unknown task' } });
    if (msg.method === 'tasks/cancel') tasks[id] = 'cancelled';
    return json(res, 200, result(msg.id, { resultType: 'complete', taskId: id, status: tasks[id],
      pollIntervalMs: 20, ttlMs: 60000, createdAt: '2026-12-01T10:00:00Z', lastUpdatedAt: '2026-12-01T10:00:00Z' }));
  }
  if (msg.method === 'tools/call' && msg.params.name === 'route') {
    const header = req.headers['mcp-param-region'] || '';
    return json(res, 200, result(msg.id, toolResult(`Mcp-Param-Region of ${header.length} bytes`)));
  }
  if (msg.method === 'tools/call' && msg.params.name === 'charges') {
    return json(res, 200, result(msg.id, toolResult(String(charges))));
  }
  if (msg.method === 'tools/call' && msg.params.name === 'charge') {
    charges++;
    const broken = (msg.params.arguments || {}).broken_runs;
    if (broken === undefined || charges <= broken) {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write('id: evt-c\nretry: 200\ndata: \n\n');
      return res.end();
    }
    return json(res, 200, result(msg.id, toolResult(`charged ${charges}`)));
  }
  if (msg.method !== 'tools/call') {
    return json(res, 404, { jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } });
  }
  if (msg.params.name === 'hang') {
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    res.write(': working\n\n');
    res.on('close', () => log.push({ method: 'CLOSED', path: '/modern-drop', headers: {}, body: JSON.stringify(msg.id) }));
    return;
  }
  modernCalls++;
  if (modernCalls === 1) {
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    res.write('id: evt-1\nretry: 200\ndata: \n\n');
    return res.end();
  }
  return json(res, 200, result(msg.id, toolResult(`Echo: ${msg.params.arguments.message} (call ${modernCalls})`)));
}

function handle(path, req, res, body) {
  const sid = req.headers['mcp-session-id'];
  const port = server.address().port;
  if (path === '/modern-drop') return modern(req, res, body);
  if (path === '/trickle') return trickle(req, res, body);
  if (path === '/away') {
    res.writeHead(302, { Location: `http://localhost:${port}/landing` });
    res.end();
    return;
  }
  if (path === '/moved') {
    res.writeHead(307, { Location: '/plain' });
    res.end();
    return;
  }
  if (req.method === 'POST' && path === '/login') {
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end('<html><body>Sign in</body></html>');
    return;
  }
  if (req.method === 'POST' && path === '/auth') {
    return json(res, 401, { error: 'invalid_token' }, {
      'WWW-Authenticate': `Bearer resource_metadata="http://127.0.0.1:${port}/.well-known/oauth-protected-resource"`,
    });
  }
  if (path === '/bearer' && !/^Bearer right(-\d+)?$/.test(req.headers.authorization || '')) {
    return json(res, 401, { error: 'invalid_token' }, { 'WWW-Authenticate': 'Bearer error="invalid_token"' });
  }
  if (req.method === 'POST' && path === '/forbidden') {
    res.writeHead(403);
    res.end();
    return;
  }
  if (req.method === 'POST' && (path === '/forbidden-reason' || path === '/unauthorized-reason')) {
    res.writeHead(path === '/forbidden-reason' ? 403 : 401, { 'Content-Type': 'text/plain' });
    const given = req.headers.authorization ? ` (${req.headers.authorization})` : '';
    res.end(path === '/forbidden-reason' ? 'Origin http://evil.example is not allowed\n' : `Your API key has expired${given}\n`);
    return;
  }
  if (req.method === 'POST' && path === '/many-headers') {
    const headers = { 'Content-Type': 'application/json' };
    for (let i = 1; i <= 200; i++) headers[`X-Filler-${i}`] = String(i);
    res.writeHead(200, headers);
    res.end('{}');
    return;
  }
  if (req.method === 'POST' && path === '/cut-big' && Number(req.headers['content-length']) > 1024 * 1024) {
    // Reset, with the body unread: the client is still writing it.
    req.socket.resetAndDestroy();
    return;
  }
  if (req.method === 'POST' && path === '/huge-header') {
    res.writeHead(200, { 'Content-Type': 'application/json', 'X-Huge': 'h'.repeat(100 * 1024) });
    res.end('{}');
    return;
  }
  if (req.method === 'DELETE') {
    sessions.delete(sid);
    if (path === '/slow-delete') {
      setTimeout(() => { res.writeHead(200); res.end(); }, 3000);
      return;
    }
    res.writeHead(path === '/plain' || path === '/landing' || path === '/bearer' ? 200 : 405);
    res.end();
    return;
  }
  if (req.method === 'GET' && path === '/slow-init' && !req.slowed) {
    req.slowed = true;
    return setTimeout(() => handle(path, req, res, body), 1500);
  }
  if (req.method === 'GET') {
    if (path === '/nostream') {
      res.writeHead(405);
      res.end();
      return;
    }
    if (path === '/drop' && req.headers['last-event-id']) {
      // Resumption: replay what was missed on the dropped stream.
      const s = sessions.get(sid);
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      if (s && s.pending) {
        res.write(`id: ${s.pending.eventId}\ndata: ${JSON.stringify(s.pending.msg)}\n\n`);
        s.pending = null;
      }
      res.end();
      return;
    }
    if (path === '/drop') {
      res.writeHead(405);
      res.end();
      return;
    }
    if (path === '/get-drop') {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      const from = req.headers['last-event-id'];
      if (from) {
        const note = { level: 'info', data: `resumed after ${from}` };
        res.write(`id: g-2\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: note })}\n\n`);
        return; // kept open until the client goes away
      }
      res.write('id: g-1\nretry: 50\ndata: \n\n');
      setTimeout(() => res.end(), 300);
      return;
    }
    if (path === '/hang-get') {
      return; // accepted, never answered
    }
    if (path === '/keepalive' || path === '/slow-delete') {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write(': ping\n\n');
      const timer = setInterval(() => res.write(': ping\n\n'), 100);
      res.on('close', () => clearInterval(timer));
      return; // never ends
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    res.write(': server stream\n\n');
    res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', id: 'server-ping-1', method: 'ping' })}\n\n`);
    res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'hello from the server stream' } })}\n\n`);
    const s = sessions.get(sid);
    if (s) s.stream = res;
    return; // kept open until the client goes away
  }
  let msg;
  try { msg = JSON.parse(body); } catch (e) { return json(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } }); }
  if (msg.method === 'initialize') {
    const id = path === '/evil' ? EVIL_ID : `session-${++counter}`;
    sessions.set(id, { requests: 0, survivor: expired.has(path) });
    const answer = () => json(res, 200, result(msg.id, {
      protocolVersion: msg.params.protocolVersion,
      capabilities: { tools: {} },
      serverInfo: { name: 'http-faults' + path, version: '1.0' },
    }), { 'mcp-session-id': id });
    if (path === '/slow-init') return setTimeout(answer, 2000);
    return answer();
  }
  const s = sessions.get(sid);
  if (!s) return json(res, 404, { jsonrpc: '2.0', id: msg.id ?? null, error: { code: -32001, message: 'Session not found' } });
  s.requests++;
  if (path.startsWith('/expire') && s.requests > 3 && !s.survivor) {
    sessions.delete(sid);
    expired.add(path);
    return json(res, 404, { jsonrpc: '2.0', id: msg.id ?? null, error: { code: -32001, message: 'Session not found' } });
  }
  if (path === '/ask-slow' && msg.method === undefined && asking.has(msg.id)) {
    const pending = asking.get(msg.id);
    asking.delete(msg.id);
    const action = (msg.result && msg.result.action) || 'no action';
    const { stream, callId, group } = pending;
    if (group) {
      group.answered++;
      if (group.answered === group.asked) {
        stream.write(`data: ${JSON.stringify(result(callId, toolResult(`Echo: ${group.answered} answers`)))}\n\n`);
        stream.end();
      }
      return setTimeout(() => { res.writeHead(202); res.end(); }, 300);
    }
    stream.write(`data: ${JSON.stringify(result(callId, toolResult(`Echo: ${action}`)))}\n\n`);
    stream.end();
    return setTimeout(() => { res.writeHead(202); res.end(); }, 2000);
  }
  if (msg.id === undefined || msg.method === undefined) {
    if (path === '/slow-init' && msg.method === 'notifications/initialized') {
      return setTimeout(() => { res.writeHead(202); res.end(); }, 2000);
    }
    res.writeHead(202);
    res.end();
    return;
  }
  if (msg.method === 'tools/list') {
    return json(res, 200, result(msg.id, { tools: [
      { name: 'echo', description: 'Echo', inputSchema: { type: 'object', properties: { message: { type: 'string' } } } },
      { name: 'whoami', description: 'Session id and request count', inputSchema: { type: 'object' } },
    ] }));
  }
  if (msg.method === 'ping') return json(res, 200, result(msg.id, {}));
  if (msg.method !== 'tools/call') {
    return json(res, 200, { jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } });
  }
  const name = msg.params.name;
  const args = msg.params.arguments || {};
  if (path === '/errors' && name === 'bad') {
    return json(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32602, message: 'Invalid params: message is required' } });
  }
  if (path === '/errors' && name === 'html') {
    res.writeHead(500, { 'Content-Type': 'text/html' });
    res.end('<html><body><h1>Internal Server Error</h1></body></html>');
    return;
  }
  const reply = result(msg.id, toolResult(name === 'whoami' ? `${sid} ${s.requests}` : `Echo: ${args.message}`));
  if (path === '/slow' && name === 'slow') {
    setTimeout(() => json(res, 200, reply), 3000);
    return;
  }
  if (path === '/drop') {
    // Priming event (an id, empty data, a retry hint), then the stream
    // closes before the reply; the reply waits for resumption.
    s.pending = { eventId: 'evt-2', msg: reply };
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    res.write('id: evt-1\nretry: 200\ndata: \n\n');
    res.end();
    return;
  }
  if (path === '/ask-slow') {
    const count = name === 'ask6' ? 6 : 1;
    const group = count > 1 ? { asked: count, answered: 0 } : null;
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    for (let i = 1; i <= count; i++) {
      const askId = `ask-${msg.id}-${i}`;
      asking.set(askId, { stream: res, callId: msg.id, group });
      const ask = { jsonrpc: '2.0', id: askId, method: 'elicitation/create',
        params: { message: 'Go on?', requestedSchema: { type: 'object', properties: {} } } };
      res.write(`data: ${JSON.stringify(ask)}\n\n`);
    }
    return;
  }
  if (path === '/sse' || path === '/sse-linger' || path === '/sse-open') {
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    if (name === 'slow') {
      res.write(': working\n\n');
      setTimeout(() => { res.write(`data: ${JSON.stringify(reply)}\n\n`); res.end(); }, 3000);
      return;
    }
    res.write(`data: ${JSON.stringify(reply)}\n\n`);
    const after = { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: `after ${msg.id}` } };
    if (path === '/sse') {
      res.end();
    } else if (path === '/sse-linger') {
      setImmediate(() => {
        res.write(`data: ${JSON.stringify(after)}\n\n`);
        setImmediate(() => res.end());
      });
    } else {
      res.write(`data: ${JSON.stringify(after)}\n\n`);
    }
    return;
  }
  json(res, 200, reply);
}

// ---------------------------------------------------------------------
// Behind OAuth: the resources /mcp and /mcp/N and their authorization
// server, at the origin and again under /second/
// ---------------------------------------------------------------------

// BASE, the issuer, and the same server as a host that is not loopback as
// written: known once the server listens.
let base = '';
let remote = '';
// What /control set.
const config = { expires_in: 3600, reject_refreshed: false, refuse_refresh: false, no_pkce: false, iss: 'right', token_barrier: 0 };
const oauthStats = { authorize: 0, register: 0, token: {}, refused: 0, second: {}, second_refresh: 0, metadata: {} };
const clients = new Map([['pre', 'pre-secret']]); // id -> secret
const codes = new Map(); // code -> { challenge, redirect_uri, client_id, scope }
const access = new Map(); // token -> { refreshed, expires, revoked }
const refresh = new Map(); // token -> client_id
let serial = 0; // numbers the clients, codes and tokens issued
const arrivals = [];
const held = []; // token requests waiting at the barrier
const BARRIER_WAIT = 20000;

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

function basicClient(req) {
  const auth = req.headers.authorization || '';
  if (!auth.startsWith('Basic ')) return null;
  const [id, secret] = Buffer.from(auth.slice(6), 'base64').toString().split(':').map(decodeURIComponent);
  return clients.get(id) === secret ? id : null;
}

function issue(res, client_id, refreshed, scope) {
  const token = `at-${++serial}` + (config.control_token === 'access' ? '\r\nX-Injected: 1' : '');
  const rt = `rt-${serial}` + (config.control_token === 'refresh' ? '\r\n' : '');
  access.set(token, { refreshed, expires: Date.now() + config.expires_in * 1000, revoked: false });
  refresh.set(rt, client_id);
  json(res, 200, { access_token: token, token_type: 'Bearer', expires_in: config.expires_in, refresh_token: rt, scope });
}

function oauthMcp(req, res, body, path) {
  const token = (req.headers.authorization || '').replace(/^Bearer /, '');
  const known = access.get(token);
  const good = known && !known.revoked && known.expires > Date.now() && !(config.reject_refreshed && known.refreshed);
  if (!good) {
    oauthStats.refused++;
    const metadata = config.second ? 'second' : path.slice(1);
    return json(res, 401, { error: 'invalid_token' }, {
      'WWW-Authenticate': `Bearer error="invalid_token", resource_metadata="${base}/.well-known/oauth-protected-resource/${metadata}"`,
    });
  }
  const msg = JSON.parse(body);
  if (msg.id === undefined) { res.writeHead(202); return res.end(); }
  const reply = (value) => json(res, 200, result(msg.id, value));
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
  if (second && grant === 'refresh_token') oauthStats.second_refresh++;
  oauthStats.token[grant] = (oauthStats.token[grant] || 0) + 1;
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

// Whether the OAuth side answers this path.
function oauthPath(path) {
  return path.startsWith('/.well-known/') || path.startsWith('/second/') || /^\/mcp(\/\d+)?$/.test(path)
    || ['/register', '/authorize', '/token', '/control', '/arrivals'].includes(path);
}

// A request to the OAuth side, whose body has come; `t` is when the
// request itself came.
function oauthRoute(req, res, body, t) {
  const url = new URL(req.url, base);
  if (url.pathname !== '/arrivals' && url.pathname !== '/control') {
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
    oauthStats.second[path] = (oauthStats.second[path] || 0) + 1;
  }
  if (path.startsWith('/.well-known/')) oauthStats.metadata[path] = (oauthStats.metadata[path] || 0) + 1;
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
    oauthStats.register++;
    const id = `client-${++serial}`;
    const secret = `secret-${serial}`;
    clients.set(id, secret);
    if (req.arrival) req.arrival.registered = id;
    const asked = JSON.parse(body);
    return json(res, 201, { client_id: id, client_secret: secret, token_endpoint_auth_method: 'client_secret_basic', redirect_uris: asked.redirect_uris });
  }
  if (path === '/authorize') {
    oauthStats.authorize++;
    const q = url.searchParams;
    const code = `code-${++serial}`;
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
  if (/^\/mcp(\/\d+)?$/.test(path) && req.method === 'POST') return oauthMcp(req, res, body, path);
  if (path === '/control') {
    for (const [k, v] of url.searchParams) {
      if (k === 'revoke') for (const a of access.values()) a.revoked = true;
      else if (k === 'expires_in' || k === 'token_barrier') config[k] = Number(v);
      else if (['iss', 'stall_token', 'control_token'].includes(k)) config[k] = v;
      else config[k] = v === '1';
    }
    return json(res, 200, config);
  }
  if (path === '/arrivals') return json(res, 200, arrivals);
  res.writeHead(405);
  res.end();
}

// ---------------------------------------------------------------------
// On the official TypeScript SDK: /host-check
// ---------------------------------------------------------------------

let hostCheckApp = null;
function hostCheck() {
  if (hostCheckApp) return hostCheckApp;
  const sdk = (p) => require(require('path').join(__dirname, '../peers/node_modules/@modelcontextprotocol/sdk/dist/cjs', p));
  const { createMcpExpressApp } = sdk('server/express.js');
  const { McpServer } = sdk('server/mcp.js');
  const { StreamableHTTPServerTransport } = sdk('server/streamableHttp.js');
  hostCheckApp = createMcpExpressApp({ host: '127.0.0.1', allowedHosts: ['localhost'] });
  hostCheckApp.post('/host-check', async (req, res) => {
    const server = new McpServer({ name: 'host-check', version: '1' });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  return hostCheckApp;
}

// ---------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------

// What reads back what the server saw, itself neither logged nor counted.
const READ_BACK = new Set(['/log', '/stats', '/arrivals', '/control']);
// Sockets that carried a request to a counted path, for /oauthStats.
const tracked = new Set();
const accepted = {};
const listener = (req, res) => {
  const t = since();
  const first = req.url.split('?')[0];
  // The SDK reads the body itself.
  if (first === '/host-check') return hostCheck()(req, res);
  if (!READ_BACK.has(first)) {
    const sock = req.socket;
    sock.lastPath = first;
    sock.lastMethod = req.method;
    if (!tracked.has(sock)) {
      tracked.add(sock);
      accepted[first] = (accepted[first] || 0) + 1;
      sock.on('close', () => tracked.delete(sock));
    }
  }
  let chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString();
    const path = req.url.split('?')[0];
    if (path === '/log') {
      json(res, 200, log);
      log = [];
      return;
    }
    if (path === '/stats') {
      const paths = {};
      const streams = {};
      for (const sock of tracked) {
        paths[sock.lastPath] = (paths[sock.lastPath] || 0) + 1;
        if (sock.lastMethod === 'GET') streams[sock.lastPath] = (streams[sock.lastPath] || 0) + 1;
      }
      json(res, 200, { open: tracked.size, paths, streams, accepted, ...oauthStats });
      return;
    }
    if (!READ_BACK.has(path)) log.push({ method: req.method, path, headers: req.headers, body });
    if (oauthPath(path)) return oauthRoute(req, res, body, t);
    handle(path, req, res, body);
  });
};
const server = tls ? https.createServer(tls, listener) : http.createServer(listener);

server.listen(port, '127.0.0.1', () => {
  base = `http://127.0.0.1:${server.address().port}`;
  remote = `http://[::ffff:127.0.0.1]:${server.address().port}`;
  console.log(`listening on ${server.address().port}`);
});
