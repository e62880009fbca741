// A 2026-07-28 MCP server built on the official TypeScript SDK v2
// (@modelcontextprotocol/server 2.4.0), the peer the specs use to check the
// client against the newest revision and, from the same process, against the
// 2025 handshake: the SDK's entries serve both eras from one factory.
//
//   node modern_server.mjs stdio
//   node modern_server.mjs http PORT     (Streamable HTTP at /mcp; PORT 0 picks one)
//
// Run it with spec/peers/node_modules/.bin/node: any node >= 20 would do, but
// that one is pinned. Over HTTP the one line on stdout is `listening PORT`;
// over stdio stdout is the protocol alone.
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

import {
  NodeStreamableHTTPServerTransport,
  localhostHostValidation,
  localhostOriginValidation,
  toNodeHandler,
  toWebRequest,
} from '@modelcontextprotocol/node';
import {
  McpServer,
  createMcpHandler,
  createRequestStateCodec,
  fromJsonSchema,
  inputRequired,
  inputResponse,
  isInitializeRequest,
  isLegacyRequest,
} from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod/v4';

const [mode, portArg] = process.argv.slice(2);
if (mode !== 'stdio' && !(mode === 'http' && /^\d+$/.test(portArg ?? ''))) {
  console.error('usage: modern_server.mjs stdio | http PORT');
  process.exit(2);
}

// The requestState of `confirm` comes back from the client, so it is signed;
// the key lives in the process because HTTP builds a server per request and
// the retry reaches another instance than the one that minted it.
const stateCodec = createRequestStateCodec({ key: randomBytes(32), ttlSeconds: 600 });

// `grow` outlives the instance that ran it: over HTTP every request (modern)
// or session (legacy) gets a fresh instance, which must see `extra` too.
let grown = false;
// Set for HTTP only: publishes to the subscriptions/listen streams of every
// modern client, which no single instance owns.
let publish = null;

function addExtra(server) {
  return server.registerTool('extra', { description: 'Exists once grow has run' }, async () => ({
    content: [{ type: 'text', text: 'extra' }],
  }));
}

function build() {
  const server = new McpServer(
    { name: 'modern-ts', version: '1.0.0' },
    {
      instructions: 'Test peer for lua-mcp: add, echo, route, confirm, grow, steps, declared, link and sample tools, a greet prompt, a memo://note resource.',
      // subscribe: a 2025-era client may watch memo://note; the note never
      // changes, so keeping the subscription is all there is to do.
      // logging: the steps tool logs; a 2026-07-28 request gets its
      // messages only when its envelope asks (logLevel).
      // extensions: what a client reads in client.server_capabilities.
      capabilities: {
        resources: { subscribe: true },
        logging: {},
        extensions: { 'io.github.lua-mcp/test': { version: '1' } },
      },
      requestState: { verify: stateCodec.verify },
    },
  );

  server.registerTool(
    'add',
    {
      description: 'Adds two numbers',
      inputSchema: z.object({ a: z.number(), b: z.number() }),
      outputSchema: z.object({ sum: z.number() }),
    },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }], structuredContent: { sum: a + b } }),
  );

  server.registerTool(
    'echo',
    { description: 'Returns its text', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );

  // A plain JSON Schema rather than zod: the x-mcp-header annotation has to
  // reach tools/list exactly as written for clients to mirror it into the
  // Mcp-Param-Region header.
  server.registerTool(
    'route',
    {
      description: 'Echoes region and query, and the Mcp-Param-Region header when there is one',
      inputSchema: fromJsonSchema({
        type: 'object',
        properties: { region: { type: 'string', 'x-mcp-header': 'Region' }, query: { type: 'string' } },
        required: ['region', 'query'],
      }),
    },
    async ({ region, query }, ctx) => {
      const content = [{ type: 'text', text: `${region}:${query}` }];
      const header = ctx.http?.req?.headers.get('mcp-param-region');
      if (header != null) content.push({ type: 'text', text: `header=${header}` });
      return { content };
    },
  );

  // Written once for both eras: on 2026-07-28 the input_required result
  // goes to the client, which retries; on a 2025 session the SDK's shim sends
  // a real elicitation/create and re-enters the handler with the answer.
  server.registerTool(
    'confirm',
    { description: 'Asks the user to confirm an action', inputSchema: z.object({ action: z.string() }) },
    async ({ action }, ctx) => {
      const answer = inputResponse(ctx.mcpReq.inputResponses, 'confirm');
      const state = ctx.mcpReq.requestState();
      if (answer.kind === 'missing' || state?.action !== action) {
        return inputRequired({
          inputRequests: {
            confirm: inputRequired.elicit({
              message: `Confirm ${action}?`,
              requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
            }),
          },
          requestState: await stateCodec.mint({ action }),
        });
      }
      const ok = answer.kind === 'elicit' && answer.action === 'accept' && answer.content?.ok === true;
      return { content: [{ type: 'text', text: `${ok ? 'confirmed' : 'declined'} ${action}` }] };
    },
  );

  // Every call announces a change, not just the first, so a spec sees the
  // notification whatever ran before it on a shared server. Registering on
  // this instance sends tools/list_changed on its own connection (a 2025
  // session, or the listen streams serveStdio keeps); over HTTP the entry's
  // notifier reaches the modern clients, which no single instance serves.
  let extra = null;
  // What the client declared: the request's envelope on 2026-07-28, its
  // initialize on a 2025 session.
  server.registerTool('declared', { description: 'Returns the capabilities the client declared' }, async (ctx) => {
    const declared =
      ctx.mcpReq.envelope?.['io.modelcontextprotocol/clientCapabilities'] ?? server.server.getClientCapabilities();
    return { content: [{ type: 'text', text: JSON.stringify(declared ?? null) }] };
  });

  // URL-mode elicitation, written once for both eras as confirm is: the
  // SDK asks only a client that declared elicitation.url.
  server.registerTool('link', { description: 'Sends the user to a page to sign in' }, async (ctx) => {
    const answer = inputResponse(ctx.mcpReq.inputResponses, 'link');
    if (answer.kind === 'missing') {
      return inputRequired({
        inputRequests: {
          link: inputRequired.elicitUrl({ message: 'Sign in to continue', url: 'https://example.com/sign-in' }),
        },
      });
    }
    return { content: [{ type: 'text', text: `link ${answer.kind === 'elicit' ? answer.action : answer.kind}` }] };
  });

  // Sampling with a tool offered to the client's model: the SDK asks only a
  // client that declared sampling.tools.
  server.registerTool('sample', { description: "Asks the client's model, offering it a tool" }, async (ctx) => {
    const answer = inputResponse(ctx.mcpReq.inputResponses, 'sample');
    if (answer.kind === 'missing') {
      return inputRequired({
        inputRequests: {
          sample: inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: 'What is 2 + 2?' } }],
            maxTokens: 50,
            tools: [{ name: 'calc', description: 'Adds', inputSchema: { type: 'object' } }],
            toolChoice: { mode: 'auto' },
          }),
        },
      });
    }
    const text = answer.kind === 'sampling' ? answer.result.content?.text : answer.kind;
    return { content: [{ type: 'text', text: `model said ${text}` }] };
  });

  server.registerTool('steps', { description: 'Logs three steps' }, async (ctx) => {
    for (const step of [1, 2, 3]) await ctx.mcpReq.log('info', `step ${step}`, 'steps');
    return { content: [{ type: 'text', text: 'done' }] };
  });

  server.registerTool('grow', { description: 'Adds the tool extra' }, async () => {
    grown = true;
    if (extra) server.sendToolListChanged();
    else extra = addExtra(server);
    publish?.();
    return { content: [{ type: 'text', text: 'grown' }] };
  });
  if (grown) extra = addExtra(server);

  server.registerPrompt(
    'greet',
    { description: 'Greets someone', argsSchema: z.object({ name: z.string() }) },
    async ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Hello, ${name}` } }] }),
  );

  server.registerResource('note', 'memo://note', { description: 'A note', mimeType: 'text/plain' }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'a note' }],
  }));
  server.server.setRequestHandler('resources/subscribe', () => ({}));
  server.server.setRequestHandler('resources/unsubscribe', () => ({}));

  return server;
}

if (mode === 'stdio') {
  serveStdio(build);
} else {
  // The SDK's HTTP entry serves 2025 clients statelessly, one instance per
  // POST, which leaves no channel for the elicitation/create of `confirm`
  // nor for list_changed. So 2025 traffic goes to sessions of the SDK's
  // Streamable HTTP transport, as its legacy-routing example does, and the
  // entry itself is kept strict for 2026-07-28.
  const modern = createMcpHandler(build, { legacy: 'reject' });
  publish = () => modern.notify.toolsChanged();
  const serveModern = toNodeHandler(modern);
  const sessions = new Map();

  const serveLegacy = async (req, res, body) => {
    const id = req.headers['mcp-session-id'];
    if (id && sessions.has(id)) return sessions.get(id).handleRequest(req, res, body);
    if (id) return reply(res, 404, -32001, 'Session not found');
    if (req.method !== 'POST' || !isInitializeRequest(body)) return reply(res, 400, -32000, 'Bad Request: Session ID required');
    const transport = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      onsessioninitialized: (sid) => sessions.set(sid, transport),
    });
    transport.onclose = () => sessions.delete(transport.sessionId);
    await build().connect(transport);
    return transport.handleRequest(req, res, body);
  };

  const validHost = localhostHostValidation();
  const validOrigin = localhostOriginValidation();
  const route = async (req, res) => {
    if (!validHost(req, res) || !validOrigin(req, res)) return;
    if (new URL(req.url, 'http://localhost').pathname !== '/mcp') return void res.writeHead(404).end();
    if (req.method !== 'POST') return serveLegacy(req, res);
    // Read once: the classifier, then whichever leg serves it, need the body.
    // Unparsable bytes go to the strict entry, which owns the parse error.
    let body;
    try {
      body = JSON.parse(Buffer.concat(await req.toArray()).toString('utf8'));
    } catch {
      return serveModern(req, res);
    }
    const legacy = await isLegacyRequest(await toWebRequest(req, body), body);
    return legacy ? serveLegacy(req, res, body) : serveModern(req, res, body);
  };
  // A throw here would otherwise be an unhandled rejection, which ends node.
  const http = createServer((req, res) =>
    route(req, res).catch((err) => {
      console.error(err);
      if (!res.headersSent) reply(res, 500, -32603, 'Internal error');
      else res.end();
    }),
  );
  http.listen(Number(portArg), '127.0.0.1', () => {
    console.log(`listening ${http.address().port}`);
  });
}

function reply(res, status, code, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}
