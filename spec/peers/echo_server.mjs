// echo_server.mjs [http|sse PORT] - the TypeScript SDK's (v1) smallest
// server: one tool, `echo`, for bench/server.lua. Over stdio, over
// Streamable HTTP at /mcp (sessions), or over the 2024-11-05 HTTP+SSE
// transport (a GET stream at /sse naming /messages); PORT 0 picks one, and
// the one line on stdout is `listening PORT`.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';

function build() {
  const server = new McpServer({ name: 'ts-echo', version: '1.0.0' });
  server.tool('echo', { message: z.string().optional() }, async ({ message }) => ({
    content: [{ type: 'text', text: `Echo: ${message}` }],
  }));
  return server;
}

const [mode, port] = process.argv.slice(2);
if (mode === 'http') {
  const sessions = {};
  const http = createServer(async (req, res) => {
    let transport = sessions[req.headers['mcp-session-id']];
    if (!transport) {
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        onsessioninitialized: (id) => { sessions[id] = transport; },
      });
      await build().connect(transport);
    }
    await transport.handleRequest(req, res);
  });
  http.listen(Number(port), '127.0.0.1', () => console.log(`listening ${http.address().port}`));
} else if (mode === 'sse') {
  const sessions = {};
  const http = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://localhost');
    if (req.method === 'GET' && url.pathname === '/sse') {
      const transport = new SSEServerTransport('/messages', res);
      sessions[transport.sessionId] = transport;
      res.on('close', () => delete sessions[transport.sessionId]);
      await build().connect(transport);
    } else if (req.method === 'POST' && url.pathname === '/messages' && sessions[url.searchParams.get('sessionId')]) {
      await sessions[url.searchParams.get('sessionId')].handlePostMessage(req, res);
    } else {
      res.writeHead(404).end('Not found');
    }
  });
  http.listen(Number(port), '127.0.0.1', () => console.log(`listening ${http.address().port}`));
} else {
  await build().connect(new StdioServerTransport());
}
