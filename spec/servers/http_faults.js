// http_faults.js PORT [CERT KEY] - a Streamable HTTP MCP server on
// 127.0.0.1 (HTTPS when given a certificate and its key) that
// misbehaves on demand, for what a real server will not do when asked.
// The behaviour is chosen per request by the path:
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
//               whose tool "slow_task" becomes a task (Tasks extension)
//               working until tasks/cancel names it, and "wide_task" a
//               task whose id is 64 KiB long
//               whose first tools/call reply stream closes after a priming
//               event, before the reply; later calls are answered, but for
//               tool "hang", whose stream stays open with nothing on it
//               until the client closes it (logged as a CLOSED request
//               whose body is the call's id). Its "echo" is annotated
//               read-only; "charge" (destructive, not idempotent) counts
//               its runs, then closes its reply stream unanswered while
//               its runs are at most {broken_runs} (default: always), and
//               answers "charged N" after; "charges" tells the count;
//               "route" marks its region x-mcp-header (Region) and tells
//               the length of the Mcp-Param-Region header it got.
//
// GET /log returns every request seen (method, path, headers, body) and
// clears it. On the GET stream the server sends a ping and a notification
// as soon as a client opens it.
//
// GET /stats returns {"open": N, "paths": {PATH: N}, "streams": {PATH: N},
// "accepted": {PATH: N}}: the connections open right now among those that
// carried a request to a path other than /log and /stats (so the asking
// connection is never counted), in all and by the path of the last request
// each carried; "streams" counts those whose last request was a GET;
// "accepted" every connection ever opened, by the path of its first request.
const http = require('http');
const https = require('https');
const fs = require('fs');

const port = Number(process.argv[2] || 0);
let log = [];
const sessions = new Map(); // id -> { requests, stream }
let counter = 0;
const expired = new Set(); // the /expire paths that forgot a session already
const asking = new Map(); // /ask-slow: elicitation id -> { stream, callId }

const EVIL_ID = "x$(touch /tmp/lua-mcp-pwned)`touch /tmp/lua-mcp-pwned2`;touch${IFS}/tmp/lua-mcp-pwned3";

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

const [certFile, keyFile] = process.argv.slice(3);
const tls = certFile ? { cert: fs.readFileSync(certFile), key: fs.readFileSync(keyFile) } : null;
// Sockets that carried a request to a counted path, for /stats.
const tracked = new Set();
const accepted = {};
const listener = (req, res) => {
  const first = req.url.split('?')[0];
  if (first !== '/log' && first !== '/stats') {
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
      json(res, 200, { open: tracked.size, paths, streams, accepted });
      return;
    }
    log.push({ method: req.method, path, headers: req.headers, body });
    handle(path, req, res, body);
  });
};
const server = tls ? https.createServer(tls, listener) : http.createServer(listener);

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

server.listen(port, '127.0.0.1', () => {
  console.log(`listening on ${server.address().port}`);
});
