// v2_client.mjs COMMAND ARGS... | URL - the TypeScript SDK's client v2
// (@modelcontextprotocol/client) over stdio,
// or Streamable HTTP for a URL, against a server we serve: lists the
// tools, calls two (one asks the user, answered "Grace"), reads a
// resource, gets a prompt, and prints what it got as one JSON object.
// V2_NEGOTIATION=auto makes it probe for 2026-07-28 (its default is the
// 2025 handshake).
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const [command, ...args] = process.argv.slice(2);
const transport = /^https?:/.test(command)
  ? new StreamableHTTPClientTransport(new URL(command))
  : new StdioClientTransport({ command, args, stderr: 'ignore' });
const client = new Client(
  { name: 'ts-v2-peer', version: '2.0.0' },
  { capabilities: { elicitation: {} }, versionNegotiation: { mode: process.env.V2_NEGOTIATION ?? 'legacy' } },
);
client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Grace' } }));
await client.connect(transport);
const out = {};
out.version = client.getNegotiatedProtocolVersion?.() ?? null;
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.add = (await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } })).content[0].text;
out.asked = (await client.callTool({ name: 'ask_name', arguments: {} })).content[0].text;
out.today = (await client.readResource({ uri: 'notes://today' })).contents[0].text;
out.prompt = (await client.getPrompt({ name: 'review', arguments: { file: 'a.lua' } })).messages[0].content.text;
console.log(JSON.stringify(out));
await client.close();
