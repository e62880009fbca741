// host_check.js PORT - an MCP server on the official TypeScript SDK whose
// DNS-rebinding protection allows only "localhost" in the Host header, as
// Playwright's server does. A client that reaches it as 127.0.0.1 gets a
// 403 whose reason is in the body, and no WWW-Authenticate: the refusal
// has nothing to do with credentials.
const path = require('path');
const sdk = (p) => require(path.join(__dirname, '../peers/node_modules/@modelcontextprotocol/sdk/dist/cjs', p));
const { createMcpExpressApp } = sdk('server/express.js');
const { McpServer } = sdk('server/mcp.js');
const { StreamableHTTPServerTransport } = sdk('server/streamableHttp.js');

const port = Number(process.argv[2]);
const app = createMcpExpressApp({ host: '127.0.0.1', allowedHosts: ['localhost'] });
app.post('/mcp', async (req, res) => {
  const server = new McpServer({ name: 'host-check', version: '1' });
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  await server.connect(transport);
  await transport.handleRequest(req, res, req.body);
});
app.listen(port, '127.0.0.1', () => console.log(`listening on ${port}`));
