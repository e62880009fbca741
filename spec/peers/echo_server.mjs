// echo_server.mjs - the TypeScript SDK's (v1) smallest stdio server: one
// tool, `echo`, for bench/server.lua.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'ts-echo', version: '1.0.0' });
server.tool('echo', { message: z.string().optional() }, async ({ message }) => ({
  content: [{ type: 'text', text: `Echo: ${message}` }],
}));
await server.connect(new StdioServerTransport());
