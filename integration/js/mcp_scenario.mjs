// Drives den's MCP server with the official MCP TypeScript SDK, unmodified,
// as an agent's client would: over stdio (`den mcp`) or streamable HTTP
// (dend's /mcp). Every step asserts; the first failure exits non-zero
// with what was wrong. integration/mcp_test.go runs it.
//
//   MODE=stdio DEN=bin/den DEN_HOST=http://127.0.0.1:7070 DEN_TOKEN=den_... NAME=sb node mcp_scenario.mjs
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
      env: env.DEN_HOST
        ? { PATH: env.PATH, DEN_HOST: env.DEN_HOST, DEN_TOKEN: env.DEN_TOKEN }
        : { PATH: env.PATH, DEN_SOCKET: env.DEN_SOCKET },
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
  "sandbox_start", "sandbox_stop", "port_unexpose",
  "network_get", "network_set", "limits_get", "limits_set", "idle_policy_get", "idle_policy_set",
  "peer_list", "peer_add", "peer_refresh", "peer_remove",
  "service_list", "service_add", "service_restart", "service_remove",
  "checkpoint_list", "checkpoint_delete", "run_list", "sandbox_events", "sandbox_setup", "sandbox_rebase",
  "sandbox_recover", "sandbox_metrics", "process_list", "run_stdin", "file_stat", "file_mkdir", "file_move", "file_remove",
  "port_link", "port_links_revoke", "image_list", "image_get", "quota_get", "sandbox_history",
]) {
  assert.ok(byName[t], `no tool ${t}; have ${Object.keys(byName)}`);
  assert.ok(byName[t].description.length > 20, `${t} has no real description`);
  assert.ok(byName[t].outputSchema, `${t} has no output schema`);
  assert.equal(byName[t].inputSchema.type, "object", `${t} has no input schema`);
}
assert.equal(tools.length, 54);
for (const t of ["network_get", "limits_get", "idle_policy_get", "peer_list", "service_list", "checkpoint_list", "run_list", "sandbox_events",
  "sandbox_metrics", "process_list", "file_stat", "image_list", "image_get", "quota_get", "sandbox_history"]) {
  assert.equal(byName[t].annotations.readOnlyHint, true, `${t} is not read-only`);
}
for (const t of ["network_set", "limits_set", "idle_policy_set", "peer_add", "peer_refresh", "peer_remove",
  "service_add", "service_restart", "service_remove",
  "checkpoint_delete", "sandbox_rebase", "sandbox_stop", "sandbox_start", "port_unexpose", "sandbox_setup",
  "sandbox_recover", "run_stdin", "file_mkdir", "file_move", "file_remove", "port_link", "port_links_revoke"]) {
  assert.notEqual(byName[t].annotations.readOnlyHint, true, `${t} says it is read-only`);
}
for (const t of ["peer_remove", "service_remove", "checkpoint_delete", "sandbox_rebase", "sandbox_stop", "port_unexpose",
  "sandbox_recover", "file_move", "file_remove", "port_links_revoke"]) {
  assert.equal(byName[t].annotations.destructiveHint, true, `${t} is not marked destructive`);
}
assert.equal(byName.network_set.annotations.destructiveHint, false);
assert.equal(byName.file_mkdir.annotations.destructiveHint, false);
assert.equal(byName.run_stdin.annotations.destructiveHint, false);
assert.equal(byName.sandbox_metrics.inputSchema.properties.minutes.type, "integer");
assert.equal(byName.file_remove.inputSchema.properties.recursive.type, "boolean");
assert.equal(byName.idle_policy_set.inputSchema.properties.wake_on_boot.type, "boolean");
assert.deepEqual(byName.image_get.inputSchema.required, ["image"]);
assert.ok(byName.quota_get.outputSchema.properties.use, "quota_get has no use");
assert.equal(byName.idle_policy_set.annotations.idempotentHint, true);
assert.equal(byName.limits_set.inputSchema.properties.pids.type, "integer");
assert.equal(byName.sandbox_events.inputSchema.properties.wait_seconds.type, "number");
assert.match(byName.sandbox_events.description, /returns once/);
assert.deepEqual(byName.peer_add.inputSchema.required, ["name", "other"]);
assert.deepEqual(byName.service_add.inputSchema.required, ["name", "service", "command"]);
assert.ok(byName.checkpoint_list.outputSchema.properties.roots, "checkpoint_list has no roots");
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
const killedID = r.run_id;
step("processes");
// The run is started in the background: its shell may not have forked
// sleep yet when the first listing is taken, so list until it has.
let procs;
for (let i = 0; i < 50; i++) {
  procs = await call("process_list", { name });
  if (procs.processes.some((p) => p.command === "sleep 300")) break;
  await new Promise((res) => setTimeout(res, 200));
}
assert.ok(procs.processes.some((p) => p.command === "sleep 300" && p.rss_bytes > 0), `processes: ${JSON.stringify(procs)}`);
assert.ok(procs.processes.every((p) => p.pid !== 1), "den-init is listed");
out = await call("run_kill", { name, run_id: r.run_id, signal: "KILL" });
out = await call("run_output", { name, run_id: r.run_id, wait_seconds: 10 });
assert.equal(out.status, "killed");
procs = await call("process_list", { name });
assert.ok(!procs.processes.some((p) => p.command === "sleep 300"), "the killed command is still listed");

step("stdin of a background run");
r = await call("sandbox_exec", { name, argv: ["cat"], stdin: "one\n", background: true, stdin_open: true });
const sent = await call("run_stdin", { name, run_id: r.run_id, text: "two\n" });
assert.equal(sent.bytes, 4);
out = await call("run_output", { name, run_id: r.run_id, wait_seconds: 1 });
assert.equal(out.status, "running", "cat ended before its input was closed");
await call("run_stdin", { name, run_id: r.run_id, close: true });
out = await call("run_output", { name, run_id: r.run_id, wait_seconds: 20 });
assert.equal(out.status, "exited");
assert.equal(out.stdout, "one\ntwo\n");
let msg = await refused("sandbox_exec", { name, argv: ["cat"], stdin: "x", background: true });
assert.match(msg, /stdin_open/);
msg = await refused("run_stdin", { name, run_id: r.run_id });
assert.match(msg, /nothing to send/);

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

step("file operations");
let st = await call("file_stat", { name, path: "/root/notes.txt" });
assert.equal(st.type, "file");
assert.equal(st.size, 6);
assert.equal(st.mode, "644");
assert.equal(st.uid, 0);
assert.equal(st.owner, "root");
await call("file_mkdir", { name, path: "/root/a/b", parents: true, mode: "700" });
st = await call("file_stat", { name, path: "/root/a/b" });
assert.equal(st.type, "dir");
assert.equal(st.mode, "700");
msg = await refused("file_mkdir", { name, path: "/root/x/y" });
assert.match(msg, /x/);
msg = await refused("file_mkdir", { name, path: "/root/z", mode: "999" });
assert.match(msg, /octal/);
const moved = await call("file_move", { name, from: "/root/a/b", to: "/root/c" });
assert.equal(moved.path, "/root/c");
assert.equal((await call("file_stat", { name, path: "/root/c" })).type, "dir");
msg = await refused("file_stat", { name, path: "/root/a/b" });
assert.match(msg, /not|no such/i);
await call("file_write", { name, path: "/root/c/inside.txt", content: "in" });
msg = await refused("file_remove", { name, path: "/root/c" });
assert.match(msg, /empty|recursive/i);
await call("file_remove", { name, path: "/root/c", recursive: true });
await call("file_remove", { name, path: "/root/a" });
const after_rm = await call("file_list", { name, path: "/root" });
assert.ok(!after_rm.entries.some((e) => e.name === "a" || e.name === "c"), `listing: ${JSON.stringify(after_rm.entries)}`);

step("bad input: tool errors with den's message and hint");
msg = await refused("sandbox_exec", { name: "no-such-sandbox", command: "true" });
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
await call("file_mkdir", { name, path: "/www" });
await call("file_write", { name, path: "/www/index.html", content: "served\n" });
await call("sandbox_exec", { name, argv: ["busybox", "httpd", "-f", "-p", "8080", "-h", "/www"], background: true });
const base = env.MODE === "http" ? new URL(env.MCP_URL).origin : env.DEN_HOST;
const get = async (link) => {
  const res = await fetch(link.url || base + link.path, { redirect: "follow" });
  return { status: res.status, body: await res.text() };
};
let got;
for (let i = 0; i < 50; i++) {
  got = await get(port);
  if (got.status === 200) break;
  await new Promise((ok) => setTimeout(ok, 200));
}
assert.equal(got.status, 200, `the exposed port through its link: ${JSON.stringify(got)}`);
assert.equal(got.body, "served\n");
const link = await call("port_link", { name, port: 8080, expires_minutes: 5 });
assert.notEqual(link.path, port.path);
const left5 = Date.parse(link.expires) - Date.now();
assert.ok(left5 > 3 * 60e3 && left5 <= 5 * 60e3 + 5e3, `expires ${link.expires}`);
assert.equal((await get(link)).status, 200);
const revoked = await call("port_links_revoke", { name, port: 8080 });
assert.equal(revoked.revoked, true);
for (const old of [port, link]) {
  got = await get(old);
  assert.ok(got.status >= 400, `a revoked link still works: ${JSON.stringify(got)}`);
}
await new Promise((ok) => setTimeout(ok, 1100)); // a new link's time is after the revocation's second
const fresh = await call("port_link", { name, port: 8080 });
assert.equal((await get(fresh)).status, 200, "a link made after the revocation does not work");
msg = await refused("port_link", { name, port: 9090 });
assert.match(msg, /9090|expose/);
const unexposed = await call("port_unexpose", { name, port: 8080 });
assert.equal(unexposed.unexposed, 8080);
assert.deepEqual((await call("sandbox_get", { name })).ports ?? [], []);

step("network policy");
let net = await call("network_get", { name });
assert.equal(net.mode, "none");
net = await call("network_set", { name, allow: ["203.0.113.7:443"] });
assert.equal(net.mode, "allow");
assert.deepEqual(net.allow, ["203.0.113.7:443"]);
assert.deepEqual((await call("network_get", { name })).allow, ["203.0.113.7:443"]);
msg = await refused("network_set", { name, mode: "open", allow: ["203.0.113.7:443"] });
assert.match(msg, /allow alone/);
msg = await refused("network_set", { name, allow: ["127.0.0.1:22"] });
assert.match(msg, /127\.0\.0\.1|loopback/);
net = await call("network_set", { name, mode: "none" });
assert.equal(net.mode, "none");
assert.equal((await call("network_get", { name })).mode, "none");

step("limits");
let lim = await call("limits_get", { name });
assert.equal(lim.memory, "256MiB");
assert.ok(lim.usage && lim.usage.memory, `no usage: ${JSON.stringify(lim)}`);
lim = await call("limits_set", { name, memory: "320M", pids: 300 });
assert.equal(lim.memory, "320MiB");
assert.equal(lim.pids, 300);
lim = await call("limits_get", { name });
assert.equal(lim.memory, "320MiB");
assert.equal(lim.pids, 300);
msg = await refused("limits_set", { name });
assert.match(msg, /no limit given/);
msg = await refused("limits_set", { name, memory: "lots" });
assert.match(msg, /lots/);

step("metrics");
const metrics = await call("sandbox_metrics", { name, minutes: 60 });
assert.ok(metrics.samples.length >= 1, `no samples: ${JSON.stringify(metrics)}`);
const last = metrics.samples[metrics.samples.length - 1];
assert.ok(last.memory_bytes > 0, `sample: ${JSON.stringify(last)}`);
assert.ok([256, 320].map((m) => m * 1024 * 1024).includes(last.memory_limit_bytes), `sample: ${JSON.stringify(last)}`);
msg = await refused("sandbox_metrics", { name, minutes: 61 });
assert.match(msg, /60/);

step("idle policy");
let pol = await call("idle_policy_get", { name });
assert.ok(pol.pause_after && pol.stop_after && pol.running_for, `policy: ${JSON.stringify(pol)}`);
assert.equal(pol.wake_on_boot, false);
pol = await call("idle_policy_set", { name, pause_after: "10m", stop_after: "2h", keep_last: 5, wake_on_boot: true });
assert.equal(pol.wake_on_boot, true);
assert.equal(pol.pause_after, "10m");
assert.equal(pol.stop_after, "2h");
assert.equal(pol.keep_last, 5);
assert.match(pol.next, /^pause at /);
pol = await call("idle_policy_get", { name });
assert.equal(pol.stop_after, "2h");
assert.equal(pol.pause_after, "10m");
assert.equal(pol.wake_on_boot, true);
msg = await refused("idle_policy_set", { name, stop_after: "soon" });
assert.match(msg, /soon/);

step("run history");
const runs = await call("run_list", { name, limit: 100 });
const killedRun = runs.runs.find((x) => x.run_id === killedID);
assert.ok(killedRun, `run ${killedID} not in the history`);
assert.equal(killedRun.status, "killed");
assert.equal(killedRun.background, true);
assert.ok(runs.runs.some((x) => x.status === "exited" && x.exit_code === 3), "the exit 3 run is not listed");
assert.equal((await call("run_list", { name, limit: 1 })).runs.length, 1);

step("checkpoints as a tree");
const after = await call("checkpoint_create", { name, label: "after", files_only: true });
let tree = await call("checkpoint_list", { name });
const node = (id) => tree.checkpoints.find((c) => c.id === id);
assert.equal(tree.head, after.id);
assert.equal(node(after.id).parent, ck.id, "the checkpoint after a restore descends from the restored one");
assert.ok(node(ck.id).children.includes(after.id), `children of before: ${JSON.stringify(node(ck.id))}`);
assert.ok(tree.roots.length >= 1 && tree.roots.every((id) => node(id)), `roots ${tree.roots}`);
const del = await call("checkpoint_delete", { name, checkpoint: "after" });
assert.equal(del.deleted, "after");
tree = await call("checkpoint_list", { name });
assert.ok(!node(after.id), "the deleted checkpoint is still listed");
assert.ok(node(ck.id), "the restored checkpoint is gone");
msg = await refused("checkpoint_delete", { name, checkpoint: "no-such-checkpoint" });
assert.match(msg, /no-such-checkpoint/);

step("peers");
const kid = `${name}-kid`;
// A view outside /peers is bound in place while the reader runs, as one
// under /peers appears.
const placed = await call("peer_add", { name: kid, other: name, at: "/review/x" });
assert.equal(placed.at, "/review/x");
r = await call("sandbox_exec", { name: kid, command: "cat /review/x/root/notes.txt" });
assert.equal(r.stdout, "first\n");
await call("peer_remove", { name: kid, peer: placed.id });
r = await call("sandbox_exec", { name: kid, command: "ls /review/x 2>/dev/null | wc -l" });
assert.equal(r.stdout.trim(), "0", "a removed view leaves nothing at its place");
let peer = await call("peer_add", { name: kid, other: name });
assert.equal(peer.sandbox, name);
assert.equal(peer.at, `/peers/${name}`);
r = await call("sandbox_exec", { name: kid, command: `cat /peers/${name}/root/notes.txt` });
assert.equal(r.stdout, "first\n");
let peers = await call("peer_list", { name: kid });
assert.equal(peers.peers.length, 1);
assert.equal(peers.peers[0].id, peer.id);
await call("file_write", { name, path: "/root/notes.txt", content: "third\n" });
const refreshed = await call("peer_refresh", { name: kid, peer: name, restart: true });
assert.ok(refreshed.taken_at > peer.taken_at, `taken_at ${refreshed.taken_at} after ${peer.taken_at}`);
r = await call("sandbox_exec", { name: kid, command: `cat /peers/${name}/root/notes.txt` });
assert.equal(r.stdout, "third\n");
peers = await call("peer_list", { name: kid });
assert.deepEqual(peers.peers.map((p) => p.id), [refreshed.id], "a refresh names the view anew");
const gone = await call("peer_remove", { name: kid, peer: refreshed.id, restart: true });
assert.equal(gone.removed, refreshed.id);
assert.deepEqual((await call("peer_list", { name: kid })).peers, []);

step("services");
msg = await refused("service_add", { name: kid, service: "web", command: [] });
assert.match(msg, /command/);
let svc = await call("service_add", { name: kid, service: "web", command: ["sh", "-c", "echo svc up; exec sleep 100000"] });
assert.equal(svc.restart, "always");
const running = async (other) => {
  for (let i = 0; i < 100; i++) {
    const l = await call("service_list", { name: kid });
    const s = l.services.find((x) => x.name === "web");
    if (s && s.state === "running" && s.run_id && s.run_id !== other) return s;
    await new Promise((ok) => setTimeout(ok, 200));
  }
  assert.fail("service web never ran");
};
svc = await running("");
out = await call("run_output", { name: kid, run_id: svc.run_id, wait_seconds: 1 });
assert.match(out.stdout, /svc up/);

step("stop and start");
sb = await call("sandbox_stop", { name: kid });
assert.equal(sb.state, "stopped");
sb = await call("sandbox_start", { name: kid });
assert.equal(sb.state, "running");
const cold = await running(svc.run_id); // a cold boot starts it again
assert.notEqual(cold.run_id, svc.run_id);
assert.equal((await call("service_remove", { name: kid, service: "web" })).done, "removed");
assert.deepEqual((await call("service_list", { name: kid })).services, []);

step("events: a bounded read with a cursor");
let evs = await call("sandbox_events", { name });
assert.ok(evs.events.length >= 3, `events: ${JSON.stringify(evs)}`);
assert.ok(evs.cursor, "no cursor");
assert.ok(evs.events.every((e) => e.sandbox === name || e.type === "gap"), "another sandbox's event");
assert.ok(evs.events.some((e) => e.type === "run.ended" && e.exit_code === 3), "no run.ended of the exit 3 run");
assert.ok(evs.events.some((e) => e.type === "hibernated" || e.to === "hibernated"), "no hibernation event");
for (const t of ["network", "limits", "policy", "checkpoint", "restored"]) {
  assert.ok(evs.events.some((e) => e.type === t), `no ${t} event in ${evs.events.map((e) => e.type)}`);
}
const two = await call("sandbox_events", { name, limit: 2 });
assert.deepEqual(two.events.map((e) => e.id), evs.events.slice(-2).map((e) => e.id), "limit keeps the newest");
const page = await call("sandbox_events", { name, after: evs.events[0].id, limit: 1 });
assert.equal(page.events.length, 1);
assert.equal(page.events[0].id, evs.events[1].id);
assert.equal(page.more, true);
assert.equal(page.cursor, evs.events[1].id);
const none = await call("sandbox_events", { name, after: evs.cursor });
assert.deepEqual(none.events, []);
assert.equal(none.cursor, evs.cursor);
const waiting = call("sandbox_events", { name, after: evs.cursor, wait_seconds: 30 });
await call("sandbox_exec", { name, command: "true" });
let next = await waiting;
assert.ok(next.events.length >= 1, "waiting saw no event");
assert.notEqual(next.cursor, evs.cursor);
// Another run's end (a server started earlier) may come first: page on
// until the exec's start is seen.
const seen = [...next.events];
while (!seen.some((e) => e.type === "run.started")) {
  next = await call("sandbox_events", { name, after: next.cursor, wait_seconds: 10 });
  assert.ok(next.events.length >= 1, `no run.started after ${JSON.stringify(seen)}`);
  seen.push(...next.events);
}
msg = await refused("sandbox_events", { name, limit: 5000 });
assert.match(msg, /1000/);

step("permanent history");
const hist = await call("sandbox_history", { name, limit: 1000 });
const htypes = hist.events.map((e) => e.type);
for (const t of ["created", "checkpoint", "restored", "network", "limits", "policy"]) {
  assert.ok(htypes.includes(t), `no ${t} in the history: ${htypes}`);
}
assert.equal(hist.events[0].type, "created");
assert.ok(hist.events.some((e) => e.type === "hibernated" || e.to === "hibernated"), "no hibernation in the history");
assert.ok(!htypes.includes("run.started"), "commands are in the permanent history");
assert.equal(hist.total, hist.events.length);
const hist2 = await call("sandbox_history", { name, limit: 2 });
assert.deepEqual(hist2.events.map((e) => e.seq), hist.events.slice(-2).map((e) => e.seq), "limit keeps the newest");
assert.equal(hist2.total, hist.total);

step("recover refuses a sandbox not in error");
msg = await refused("sandbox_recover", { name });
assert.match(msg, /error|running/);
msg = await refused("sandbox_recover", { name, mode: "later" });
assert.match(msg, /retry, cold or rollback/);
msg = await refused("sandbox_recover", { name, checkpoint: "before" });
assert.match(msg, /rollback/);

step("images and quota");
const imgs = await call("image_list", {});
const bb = imgs.images.find((i) => i.name === "busybox");
assert.ok(bb && bb.version >= 1 && bb.size_bytes > 0, `images: ${JSON.stringify(imgs)}`);
const img = await call("image_get", { image: "busybox" });
assert.equal(img.name, "busybox");
assert.equal(img.version, bb.version);
msg = await refused("image_get", { image: "no-such-image" });
assert.match(msg, /no-such-image/);
const quota = await call("quota_get", {});
assert.ok(quota.owner, "no owner");
assert.ok(quota.use.sandboxes >= 2, `use: ${JSON.stringify(quota.use)}`);
assert.ok(quota.use.memory_bytes >= 2 * 256 * 1024 * 1024, `use: ${JSON.stringify(quota.use)}`);
assert.ok(quota.quota.sandboxes === 0 || quota.quota.sandboxes >= quota.use.sandboxes, `quota: ${JSON.stringify(quota.quota)}`);

step("setup and rebase");
const setup = await call("sandbox_setup", { name, steps: ["echo set up > /root/setup.txt"] });
assert.deepEqual(setup.steps, ["echo set up > /root/setup.txt"]);
assert.ok(setup.keep.includes("/root"), `keep ${setup.keep}`);
assert.deepEqual((await call("sandbox_setup", { name })).steps, setup.steps);
await call("file_write", { name, path: "/etc/dropped.txt", content: "x" });
const rb = await call("sandbox_rebase", { name });
assert.ok(rb.checkpoint, "no undo checkpoint");
assert.match(rb.to, /^busybox@\d+$/);
assert.equal(rb.steps.length, 1);
assert.equal(rb.steps[0].exit_code, 0);
assert.equal(rb.sandbox.state, "running");
f = await call("file_read", { name, path: "/root/setup.txt" });
assert.equal(f.content, "set up\n");
f = await call("file_read", { name, path: "/root/notes.txt" });
assert.equal(f.content, "third\n");
msg = await refused("file_read", { name, path: "/etc/dropped.txt" });
assert.match(msg, /not|no such/i);

step("remove");
await call("sandbox_remove", { name: `${name}-kid` });
await call("sandbox_remove", { name });
const left = await call("sandbox_list", {});
assert.ok(!left.sandboxes.some((s) => s.name === name), "removed sandbox still listed");

await client.close();
console.log("ok");
