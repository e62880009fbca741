// stdio_client.mjs COMMAND ARGS... | URL - the TypeScript SDK's client (v1)
// over stdio, or Streamable HTTP for a URL, against a server we serve:
// lists the tools, calls two, reads a resource, gets a prompt, and prints
// what it got as one JSON object.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [command, ...args] = process.argv.slice(2);
const transport = /^https?:/.test(command)
  ? new StreamableHTTPClientTransport(new URL(command))
  : new StdioClientTransport({ command, args, stderr: 'ignore' });
const client = new Client({ name: 'ts-peer', version: '1.0.0' }, { capabilities: { elicitation: {} } });
const { ElicitRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Grace' } }));
await client.connect(transport);
const out = {};
out.server = client.getServerVersion();
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.add = (await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } })).content[0].text;
out.note = (await client.callTool({ name: 'note', arguments: { day: 'monday' } })).structuredContent;
out.asked = (await client.callTool({ name: 'ask_name', arguments: {} })).content[0].text;
out.bad = (await client.callTool({ name: 'add', arguments: { a: 'x', b: 1 } })).isError;
out.today = (await client.readResource({ uri: 'notes://today' })).contents[0].text;
out.prompt = (await client.getPrompt({ name: 'review', arguments: { file: 'a.lua' } })).messages[0].content.text;
out.complete = (await client.complete({ ref: { type: 'ref/prompt', name: 'review' }, argument: { name: 'file', value: 'm' } })).completion.values;
console.log(JSON.stringify(out));
if (transport.terminateSession) await transport.terminateSession();
await client.close();
