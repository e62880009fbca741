// A stdio MCP server that works on many requests at once, for the async
// specs: `sleep` answers after `ms` milliseconds whatever else is running,
// so ten calls of 300 ms finish in about 300 ms if the client really has
// them in flight together. A cancellation stops the sleeper (no reply is
// ever sent for it) and is written to $CANCEL_LOG, so a spec can see that
// the server heard it. `crash` exits with status 3.
const fs = require('fs');
const readline = require('readline');

const sleepers = new Map();
const send = (msg) => process.stdout.write(JSON.stringify(msg) + '\n');
const text = (t) => ({ content: [{ type: 'text', text: t }] });
const log = (line) => process.env.CANCEL_LOG && fs.appendFileSync(process.env.CANCEL_LOG, line + '\n');

const tools = [
  { name: 'sleep', description: 'Answers after ms milliseconds with label.', inputSchema: { type: 'object', properties: { ms: { type: 'number' }, label: { type: 'string' } } } },
  { name: 'crash', description: 'Exits with status 3.', inputSchema: { type: 'object' } },
  { name: 'chatty', description: 'Sends n log notifications, then answers.', inputSchema: { type: 'object', properties: { n: { type: 'number' } } } },
];

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  let msg;
  try { msg = JSON.parse(line); } catch { return; }
  const { id, method, params = {} } = msg;
  if (method === 'initialize') {
    send({ jsonrpc: '2.0', id, result: { protocolVersion: params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'concurrent', version: '1' } } });
  } else if (method === 'tools/list') {
    send({ jsonrpc: '2.0', id, result: { tools } });
  } else if (method === 'ping') {
    send({ jsonrpc: '2.0', id, result: {} });
  } else if (method === 'notifications/cancelled') {
    const key = JSON.stringify(params.requestId);
    if (sleepers.has(key)) {
      clearTimeout(sleepers.get(key));
      sleepers.delete(key);
      log('cancelled ' + key + ' ' + (params.reason || ''));
    }
  } else if (method === 'tools/call') {
    const args = params.arguments || {};
    if (params.name === 'sleep') {
      const key = JSON.stringify(id);
      sleepers.set(key, setTimeout(() => {
        sleepers.delete(key);
        send({ jsonrpc: '2.0', id, result: text(args.label || ('slept ' + args.ms)) });
      }, args.ms || 0));
    } else if (params.name === 'crash') {
      process.stderr.write('crashing on purpose\n');
      process.exit(3);
    } else if (params.name === 'chatty') {
      for (let i = 1; i <= (args.n || 1); i++) {
        send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'line ' + i } });
      }
      send({ jsonrpc: '2.0', id, result: text('chatted') });
    } else {
      send({ jsonrpc: '2.0', id, error: { code: -32602, message: 'Unknown tool: ' + params.name } });
    }
  } else if (id !== undefined && method) {
    send({ jsonrpc: '2.0', id, error: { code: -32601, message: 'Method not found' } });
  }
});
