// Drives den's MCP server with the official MCP TypeScript SDK, unmodified,
// as an agent's client would: over stdio (`den mcp`) or streamable HTTP
// (dend's /mcp). Every step asserts; the first failure exits non-zero
// with what was wrong. integration/mcp_test.go runs it.
//
//   MODE=stdio DEN=bin/den DEN_SOCKET=... NAME=sb node mcp_scenario.mjs
//   MODE=http MCP_URL=http://127.0.0.1:7070/mcp MCP_TOKEN=den_... NAME=sb node mcp_scenario.mjs
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const env = process.env;
const name = env.NAME;
assert.ok(name, "NAME is required");

function transport() {
  if (env.MODE === "stdio") {
    return new StdioClientTransport({
      command: env.DEN,
      args: ["mcp"],
      env: { PATH: env.PATH, DEN_SOCKET: env.DEN_SOCKET },
      stderr: "inherit",
    });
  }
  return new StreamableHTTPClientTransport(new URL(env.MCP_URL), {
    requestInit: { headers: { Authorization: `Bearer ${env.MCP_TOKEN}` } },
  });
}

const client = new Client({ name: "den-integration", version: "1.0.0" });
await client.connect(transport());

const step = (what) => console.error(`mcp scenario: ${what}`);

// call returns a tool's structured result, failing on a tool error.
async function call(tool, args, opts) {
  const res = await client.callTool({ name: tool, arguments: args }, undefined, opts);
  if (res.isError) {
    assert.fail(`${tool}(${JSON.stringify(args)}) failed: ${res.content?.[0]?.text}`);
  }
  assert.ok(res.structuredContent, `${tool} returned no structured content`);
  return res.structuredContent;
}

// refused returns the text of a tool error, failing when the call worked.
async function refused(tool, args) {
  let res;
  try {
    res = await client.callTool({ name: tool, arguments: args });
  } catch (e) {
    return String(e.message); // a protocol error: invalid arguments
  }
  assert.ok(res.isError, `${tool}(${JSON.stringify(args)}) worked; it should have been refused`);
  return res.content[0].text;
}

step("tools and their descriptions");
const { tools } = await client.listTools();
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
for (const t of [
  "sandbox_create", "sandbox_list", "sandbox_get", "sandbox_remove",
  "sandbox_exec", "run_output", "run_kill",
  "file_read", "file_write", "file_list",
  "sandbox_pause", "sandbox_resume", "sandbox_hibernate",
  "checkpoint_create", "sandbox_restore", "sandbox_fork", "port_expose",
]) {
  assert.ok(byName[t], `no tool ${t}; have ${Object.keys(byName)}`);
  assert.ok(byName[t].description.length > 20, `${t} has no real description`);
}
assert.equal(tools.length, 17);
assert.equal(byName.sandbox_list.annotations.readOnlyHint, true);
assert.equal(byName.file_read.annotations.readOnlyHint, true);
assert.equal(byName.sandbox_remove.annotations.destructiveHint, true);
assert.equal(byName.sandbox_pause.annotations.idempotentHint, true);
assert.equal(byName.sandbox_exec.inputSchema.properties.timeout_seconds.type, "number");
assert.equal(byName.port_expose.inputSchema.properties.port.type, "integer");
assert.deepEqual(byName.sandbox_exec.inputSchema.required, ["name"]);
assert.ok(byName.sandbox_exec.outputSchema.properties.exit_code, "sandbox_exec has no output schema");

step("create");
let sb = await call("sandbox_create", { name, image: "busybox", memory: "256M" });
assert.equal(sb.state, "running");
assert.equal(sb.name, name);
const list = await call("sandbox_list", {});
assert.ok(list.sandboxes.some((s) => s.name === name), "the new sandbox is not listed");

step("exec: exit code, both streams, stdin, argv");
let r = await call("sandbox_exec", { name, command: "echo hi; echo err >&2; exit 3" });
assert.equal(r.exit_code, 3);
assert.equal(r.status, "exited");
assert.equal(r.stdout, "hi\n");
assert.equal(r.stderr, "err\n");
assert.ok(r.run_id);
r = await call("sandbox_exec", { name, argv: ["cat"], stdin: "from stdin" });
assert.equal(r.stdout, "from stdin");
r = await call("sandbox_exec", { name, argv: ["pwd"], cwd: "/tmp", env: { X: "1" } });
assert.equal(r.stdout, "/tmp\n");

step("exec: progress while it runs");
const progress = [];
r = await call("sandbox_exec", { name, command: "for i in 1 2 3 4 5; do echo line $i; sleep 1; done" },
  { onprogress: (p) => progress.push(p), timeout: 60000 });
assert.equal(r.exit_code, 0);
assert.ok(progress.length >= 1, "no progress notification during a 5 s command");
assert.match(progress[progress.length - 1].message, /bytes of stdout/);

step("exec: long output keeps its tail");
r = await call("sandbox_exec", { name, command: "i=0; while [ $i -lt 20000 ]; do echo line $i; i=$((i+1)); done" });
assert.equal(r.truncated, true);
assert.ok(r.stdout.length <= 64 * 1024, `stdout of ${r.stdout.length} bytes`);
assert.ok(r.stdout.endsWith("line 19999\n"), "the tail was not kept");
assert.ok(r.stdout_bytes > 64 * 1024);
r = await call("sandbox_exec", { name, command: "sleep 30", timeout_seconds: 1 });
assert.equal(r.status, "timed_out");

step("background runs, their output, kill");
r = await call("sandbox_exec", { name, command: "sleep 1; echo done", background: true });
assert.equal(r.status, "running");
let out = await call("run_output", { name, run_id: r.run_id, wait_seconds: 20 });
assert.equal(out.status, "exited");
assert.equal(out.exit_code, 0);
assert.equal(out.stdout, "done\n");
r = await call("sandbox_exec", { name, command: "echo started; sleep 300", background: true });
out = await call("run_kill", { name, run_id: r.run_id, signal: "KILL" });
out = await call("run_output", { name, run_id: r.run_id, wait_seconds: 10 });
assert.equal(out.status, "killed");

step("files");
let w = await call("file_write", { name, path: "/root/notes.txt", content: "first\n" });
assert.equal(w.bytes, 6);
let f = await call("file_read", { name, path: "/root/notes.txt" });
assert.equal(f.content, "first\n");
assert.equal(f.encoding, "utf-8");
await call("file_write", { name, path: "/root/bin.dat", content: Buffer.from([0, 255, 1, 254]).toString("base64"), encoding: "base64", mode: "600" });
f = await call("file_read", { name, path: "/root/bin.dat" });
assert.equal(f.encoding, "base64");
assert.deepEqual([...Buffer.from(f.content, "base64")], [0, 255, 1, 254]);
const ls = await call("file_list", { name, path: "/root" });
const bin = ls.entries.find((e) => e.name === "bin.dat");
assert.ok(bin && ls.entries.some((e) => e.name === "notes.txt"), `listing: ${JSON.stringify(ls.entries)}`);
assert.equal(bin.mode, "600");
assert.equal(bin.size, 4);
f = await call("file_read", { name, path: "/root/notes.txt", max_bytes: 3 });
assert.equal(f.content, "fir");
assert.equal(f.truncated, true);

step("bad input: tool errors with den's message and hint");
let msg = await refused("sandbox_exec", { name: "no-such-sandbox", command: "true" });
assert.match(msg, /no-such-sandbox/);
assert.match(msg, /hint: /);
msg = await refused("sandbox_exec", { name });
assert.match(msg, /no command/);
msg = await refused("file_read", { name, path: "/root" });
assert.match(msg, /is a directory/);
msg = await refused("file_read", { name, path: "/root/missing" });
assert.match(msg, /not|no such/i);
msg = await refused("file_write", { name, path: "/x", content: "!!", encoding: "base64" });
assert.match(msg, /base64/);
msg = await refused("sandbox_exec", { name, command: "true", timeout_seconds: "ten" });
assert.match(msg, /timeout_seconds|number|invalid/i);
msg = await refused("port_expose", { name, port: 70000 });
assert.match(msg, /65535/);
msg = await refused("sandbox_create", { name, image: "busybox" });
assert.match(msg, /exists|already/);

step("sleep and wake");
sb = await call("sandbox_pause", { name });
assert.equal(sb.state, "paused");
r = await call("sandbox_exec", { name, command: "cat /root/notes.txt" });
assert.equal(r.stdout, "first\n");
assert.equal((await call("sandbox_get", { name })).state, "running");
sb = await call("sandbox_hibernate", { name });
assert.equal(sb.state, "hibernated");
f = await call("file_read", { name, path: "/root/notes.txt" });
assert.equal(f.content, "first\n");
assert.equal((await call("sandbox_get", { name })).state, "running");
await call("sandbox_pause", { name });
sb = await call("sandbox_resume", { name });
assert.equal(sb.state, "running");

step("checkpoint, restore, fork");
const ck = await call("checkpoint_create", { name, label: "before" });
assert.equal(ck.name, "before");
assert.equal(ck.memory, true);
await call("file_write", { name, path: "/root/notes.txt", content: "second\n" });
sb = await call("sandbox_restore", { name, checkpoint: "before" });
assert.equal(sb.state, "running");
f = await call("file_read", { name, path: "/root/notes.txt" });
assert.equal(f.content, "first\n");
const detail = await call("sandbox_get", { name });
assert.ok(detail.checkpoints.some((c) => c.name === "before"), "the checkpoint is not listed");
const forked = await call("sandbox_fork", { name, new_name: `${name}-kid` });
assert.equal(forked.sandboxes.length, 1);
f = await call("file_read", { name: `${name}-kid`, path: "/root/notes.txt" });
assert.equal(f.content, "first\n");

step("ports");
const port = await call("port_expose", { name, port: 8080 });
assert.equal(port.port, 8080);
assert.match(port.path, /^\/v1\/sandboxes\/.+\/ports\/8080\/proxy\//);
if (env.MODE === "http") {
  assert.ok(port.url.startsWith(new URL(env.MCP_URL).origin), `url ${port.url}`);
}

step("remove");
await call("sandbox_remove", { name: `${name}-kid` });
await call("sandbox_remove", { name });
const after = await call("sandbox_list", {});
assert.ok(!after.sandboxes.some((s) => s.name === name), "removed sandbox still listed");

await client.close();
console.log("ok");
