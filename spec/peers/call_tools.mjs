// call_tools.mjs URL CALLS - the TypeScript SDK's client (v1) over
// Streamable HTTP: makes each call of CALLS (a JSON list of [name,
// arguments]) in turn and prints the text each returned, as one JSON list.
// It answers an elicitation with the name "Grace".
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [url, calls] = process.argv.slice(2);
const client = new Client({ name: 'ts-calls', version: '1.0.0' }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Grace' } }));
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
const texts = [];
for (const [name, args] of JSON.parse(calls)) {
  const result = await client.callTool({ name, arguments: args });
  texts.push(result.content[0]?.text ?? null);
}
console.log(JSON.stringify(texts));
await transport.terminateSession();
await client.close();
