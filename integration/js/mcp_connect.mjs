// Connects to dend's /mcp with the official MCP TypeScript SDK, unmodified,
// and prints "connected", or "refused: " and the error the SDK gives its
// caller. integration/mcpsessions_test.go runs it.
//
//   MCP_URL=http://127.0.0.1:7070/mcp MCP_TOKEN=den_... node mcp_connect.mjs
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } },
});
const client = new Client({ name: "den-test", version: "1" });
try {
  await client.connect(transport);
  console.log("connected");
  await client.close();
} catch (e) {
  console.log(`refused: ${e.message}`);
}
