// ts_client.mjs - the official TypeScript SDK client (Client with
// StdioClientTransport or StreamableHTTPClientTransport), timed the same
// way bench/run.lua times the Lua modules.
//
//   node bench/ts_client.mjs stdio '["node","server.js","stdio"]' TOOL ARGS_JSON N OUT_FILE
//   node bench/ts_client.mjs http URL TOOL ARGS_JSON N OUT_FILE
// Writes JSON to OUT_FILE: { connect_ms, list_ms, calls_us: [...] }.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const sdk = (p) => import(pathToFileURL(path.join(here, '../spec/peers/node_modules/@modelcontextprotocol/sdk/dist/esm', p)).href);
const { Client } = await sdk('client/index.js');

const [mode, target, tool, argsJson, nText, outFile] = process.argv.slice(2);
const n = Number(nText);
const args = JSON.parse(argsJson);
let transport;
if (mode === 'stdio') {
  const { StdioClientTransport } = await sdk('client/stdio.js');
  const argv = JSON.parse(target);
  transport = new StdioClientTransport({ command: argv[0], args: argv.slice(1), stderr: 'ignore' });
} else {
  const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
  transport = new StreamableHTTPClientTransport(new URL(target));
}
const client = new Client({ name: 'bench', version: '1' });
const t0 = performance.now();
await client.connect(transport);
const t1 = performance.now();
await client.listTools();
const t2 = performance.now();
const calls = [];
for (let i = 0; i < n; i++) {
  const s = performance.now();
  await client.callTool({ name: tool, arguments: args });
  calls.push((performance.now() - s) * 1000);
}
await client.close();
// To a file: a large write to a pipe is cut short by process.exit, and a
// synchronous one can fail with EAGAIN on node's non-blocking stdout.
fs.writeFileSync(outFile, JSON.stringify({ connect_ms: t1 - t0, list_ms: t2 - t1, calls_us: calls }) + '\n');
process.exit(0);
