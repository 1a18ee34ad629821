// Drives, with the official e2b SDK unmodified, what an agent written for
// E2B reaches beyond e2b_scenario.mjs: the features the SDK unlocks by
// envd version (file metadata, entries in watch events, watches on
// network mounts), pause without memory and connect that reboots, egress
// rules changed on a running sandbox (read back, never tried: no traffic
// leaves), process tags, the
// envd RPCs the JS SDK itself never calls (Process.StreamInput, the
// polling watchers), lifecycle autoResume, snapshots (den checkpoints)
// and the template list, and more bad input through the SDK's own calls:
// other owners', unknown sandboxes, expired keys, oversized metadata.
// integration/e2b_test.go runs it after the scenario, on the same dend.
//
//   E2B_API_URL=http://127.0.0.1:7070 E2B_SANDBOX_URL=http://127.0.0.1:7070 \
//   E2B_API_KEY=den_... OTHER_KEY=den_... EXPIRED_KEY=den_... node e2b_features.mjs
//
// It kills the sandbox it made, and prints "ok".
import assert from "node:assert/strict";
import { ALL_TRAFFIC, Sandbox, SandboxError, SandboxNotFoundError, AuthenticationError, InvalidArgumentError, FileNotFoundError, CommandExitError } from "e2b";

const env = process.env;
const other = env.OTHER_KEY;
const expired = env.EXPIRED_KEY;
assert.ok(env.E2B_API_URL && env.E2B_SANDBOX_URL && env.E2B_API_KEY && other && expired, "E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY, OTHER_KEY and EXPIRED_KEY are required");

const step = (what) => console.error(`e2b features: ${what}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function rejects(p, cls, what) {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof cls, `${what}: got ${e?.name}: ${e?.message}, want ${cls.name}`);
    return e;
  }
  assert.fail(`${what}: it worked; it should have failed with ${cls.name}`);
}

async function waitUntil(ms, what, cond) {
  const end = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const sbx = await Sandbox.create({ metadata: { suite: `features-${process.pid}` }, timeoutMs: 600_000 });
try {
  // rpc calls envd directly, as a Go or Python client would.
  const rpc = (method, body, headers = {}) =>
    fetch(`${env.E2B_SANDBOX_URL}/${method}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "E2b-Sandbox-Id": sbx.sandboxId, "X-Access-Token": sbx.envdAccessToken, ...headers },
      body: typeof body === "string" || body instanceof Blob ? body : JSON.stringify(body),
    });

  step("den claims the envd version whose features it serves");
  assert.equal((await sbx.getInfo()).envdVersion, "0.6.4");

  step("file metadata: written with files, read back by getInfo, list and rename");
  let w = await sbx.files.write("meta/tagged.txt", "m", { metadata: { Owner: "alice", "build.id": "42" } });
  const md = { owner: "alice", "build.id": "42" };
  assert.deepEqual(w.metadata, md);
  assert.deepEqual((await sbx.files.getInfo("meta/tagged.txt")).metadata, md);
  let r = await sbx.commands.run(`python3 -c "import os; print(os.getxattr('meta/tagged.txt', 'user.e2b.owner').decode())"`);
  assert.equal(r.stdout, "alice\n", "metadata is the file's user.e2b.* attributes, seen inside");
  await sbx.commands.run(`python3 -c "import os; os.setxattr('meta/tagged.txt', 'user.e2b.inside', b'yes'); os.setxattr('meta/tagged.txt', 'user.mine', b'kept')"`);
  await sbx.files.write("meta/tagged.txt", "rewritten");
  let ls = await sbx.files.list("meta");
  assert.deepEqual(ls.map((x) => [x.name, x.metadata]), [["tagged.txt", undefined]], "a rewrite without metadata clears the file's, as E2B's does");
  r = await sbx.commands.run(`python3 -c "import os; print(os.getxattr('meta/tagged.txt', 'user.mine').decode())"`);
  assert.equal(r.stdout, "kept\n", "attributes outside user.e2b. stay");
  await sbx.files.write("meta/tagged.txt", "rewritten", { metadata: { Owner: "alice" } });
  const mv = await sbx.files.rename("meta/tagged.txt", "meta/renamed.txt");
  assert.equal(mv.metadata.owner, "alice");
  const batch = await sbx.files.write([{ path: "meta/a.txt", data: "a" }, { path: "meta/b.txt", data: "b" }], { metadata: { batch: "7" } });
  assert.deepEqual(batch.map((x) => x.metadata), [{ batch: "7" }, { batch: "7" }]);
  assert.deepEqual((await sbx.files.getInfo("meta/b.txt")).metadata, { batch: "7" });
  await sbx.files.write("meta/s.txt", "s", { useOctetStream: true, metadata: { via: "octet" } });
  assert.deepEqual((await sbx.files.getInfo("meta/s.txt")).metadata, { via: "octet" });
  assert.equal((await sbx.files.getInfo("meta/a.txt")).metadata.batch, "7");
  await sbx.files.write("plain.txt", "p");
  assert.equal((await sbx.files.getInfo("plain.txt")).metadata, undefined);
  const e = await rejects(sbx.files.write("meta/huge.txt", "h", { metadata: { big: "v".repeat(9000) } }), InvalidArgumentError, "metadata over 8 KiB");
  assert.match(e.message, /at most 8192/, "den's own words");
  assert.equal(await sbx.files.exists("meta/huge.txt"), false, "a refused upload writes nothing");

  step("watchDir with entries, on what could be a network mount");
  await sbx.files.makeDir("w");
  const seen = [];
  const watch = await sbx.files.watchDir("w", (ev) => seen.push(ev), { recursive: true, includeEntry: true, allowNetworkMounts: true, timeoutMs: 0 });
  await sbx.files.write("w/sub/new.txt", "12345", { metadata: { k: "v" } });
  // The entry is read when the event is sent: the file is removed only
  // once it was, or a loaded host could send the event after the removal.
  await waitUntil(5000, `an entry for w/sub/new.txt in ${JSON.stringify(seen)}`, () =>
    seen.some((ev) => ev.name === "sub/new.txt" && ev.entry?.size === 5 && ev.entry.path === "/home/user/w/sub/new.txt" && ev.entry.metadata?.k === "v"));
  await sbx.files.write("w/sub/new.txt", "67890");
  await waitUntil(5000, `a write of w/sub/new.txt in ${JSON.stringify(seen)}`, () => seen.some((ev) => ev.name === "sub/new.txt" && ev.type === "write"));
  assert.ok(!seen.some((ev) => ev.name.includes(".den-write")), `a write shows only the file's own name: ${JSON.stringify(seen)}`);
  await sbx.commands.run("rm w/sub/new.txt");
  await waitUntil(5000, "the removal", () => seen.some((ev) => ev.name === "sub/new.txt" && ev.type === "remove"));
  assert.ok(seen.filter((ev) => ev.type === "remove").every((ev) => ev.entry === undefined), "a removed file has no entry");
  assert.ok(seen.some((ev) => ev.name === "sub" && ev.type === "create" && ev.entry?.type === "dir"), `the new directory: ${JSON.stringify(seen)}`);
  await watch.stop();

  step("the polling watchers (CreateWatcher, GetWatcherEvents, RemoveWatcher)");
  await sbx.files.makeDir("pw");
  let res = await rpc("filesystem.Filesystem/CreateWatcher", { path: "pw", recursive: true, includeEntry: true });
  let got = await res.json();
  assert.equal(res.status, 200, `CreateWatcher: ${JSON.stringify(got)}`);
  const watcherId = got.watcherId;
  assert.ok(watcherId);
  await sbx.files.write("pw/deep/polled.txt", "p");
  let events = [];
  await waitUntil(5000, `polled events ${JSON.stringify(events)}`, async () => {
    res = await rpc("filesystem.Filesystem/GetWatcherEvents", { watcherId });
    events.push(...((await res.json()).events ?? []));
    return events.some((ev) => ev.name === "deep/polled.txt" && ev.type === "EVENT_TYPE_CREATE" && ev.entry?.path === "/home/user/pw/deep/polled.txt");
  });
  res = await rpc("filesystem.Filesystem/RemoveWatcher", { watcherId });
  assert.equal(res.status, 200);
  res = await rpc("filesystem.Filesystem/GetWatcherEvents", { watcherId });
  got = await res.json();
  assert.deepEqual([res.status, got.code], [404, "not_found"], `a removed watcher: ${JSON.stringify(got)}`);
  res = await rpc("filesystem.Filesystem/CreateWatcher", { path: "no/such/dir" });
  got = await res.json();
  assert.deepEqual([res.status, got.code], [404, "not_found"], `watching a missing directory: ${JSON.stringify(got)}`);

  step("Process.StreamInput: one client stream feeds a process's stdin");
  const cat = await sbx.commands.run("cat; echo end", { background: true, stdin: true, timeoutMs: 0 });
  // envelope is one Connect streaming message of JSON.
  const envelope = (obj) => {
    const json = new TextEncoder().encode(JSON.stringify(obj));
    const b = new Uint8Array(5 + json.length);
    new DataView(b.buffer).setUint32(1, json.length);
    b.set(json, 5);
    return b;
  };
  const frames = [
    { start: { process: { pid: cat.pid } } },
    { data: { input: { stdin: btoa("streamed ") } } },
    { keepalive: {} },
    { data: { input: { stdin: btoa("input\n") } } },
  ].map(envelope);
  res = await rpc("process.Process/StreamInput", new Blob(frames), { "Content-Type": "application/connect+json" });
  const wire = new Uint8Array(await res.arrayBuffer());
  assert.equal(res.status, 200);
  assert.equal(wire.at(0) & 2, 0, `a message first, not an error: ${new TextDecoder().decode(wire.subarray(5))}`);
  await cat.closeStdin();
  r = await cat.wait();
  assert.equal(r.stdout, "streamed input\nend\n");
  res = await rpc("process.Process/StreamInput", new Blob([envelope({ data: { input: { stdin: btoa("x") } } })]), { "Content-Type": "application/connect+json" });
  const refused = new Uint8Array(await res.arrayBuffer());
  const end = JSON.parse(new TextDecoder().decode(refused.subarray(5)));
  assert.equal(end.error?.code, "invalid_argument", `input before a start: ${JSON.stringify(end)}`);

  step("pause without memory: connect boots it afresh from its files, with the same token");
  const lost = await sbx.commands.run("sleep 1000", { background: true, timeoutMs: 0 });
  await sbx.files.write("cold.txt", "kept on disk");
  assert.equal(await sbx.pause({ keepMemory: false }), true);
  await lost.wait().catch(() => {});
  assert.equal((await sbx.getInfo()).state, "paused");
  assert.equal(await sbx.isRunning(), false);
  await Sandbox.connect(sbx.sandboxId);
  assert.equal(await sbx.files.read("cold.txt"), "kept on disk", "the old handle's token works after the reboot");
  assert.deepEqual((await sbx.files.getInfo("meta/renamed.txt")).metadata, { owner: "alice" }, "metadata survives a reboot");
  let procs = await sbx.commands.list();
  assert.ok(!procs.some((p) => p.args.join(" ").includes("sleep 1000")), `a reboot runs nothing from before: ${JSON.stringify(procs)}`);

  step("lifecycle onTimeout pause without memory: stopped at its timeout, its files kept; connect boots it afresh");
  const cold = await Sandbox.create({ metadata: { suite: `features-cold-${process.pid}` }, timeoutMs: 2_000, lifecycle: { onTimeout: { action: "pause", keepMemory: false } } });
  try {
    await cold.files.write("kept.txt", "on disk");
    // A process of its own, not a command the door follows: an attached
    // command is use, and would keep the sandbox from its timeout.
    await cold.commands.run("setsid sleep 1000 >/dev/null 2>&1 < /dev/null &");
    await waitUntil(30_000, "the timeout to stop it", async () => (await cold.getInfo()).state === "paused");
    await Sandbox.connect(cold.sandboxId, { timeoutMs: 60_000 });
    assert.equal(await cold.files.read("kept.txt"), "on disk", "its files survive the timeout");
    const ps = await cold.commands.run("pgrep -x sleep || echo none");
    assert.equal(ps.stdout, "none\n", "a stop keeps no process");
  } finally {
    await cold.kill();
  }

  step("connect with onResume reboot: boots one paused without memory, refuses one paused with it");
  assert.equal(await sbx.pause({ keepMemory: false }), true);
  const rebooted = await Sandbox.connect(sbx.sandboxId, { onResume: "reboot" });
  assert.equal(await rebooted.files.read("cold.txt"), "kept on disk");
  const warm = await sbx.commands.run("sleep 2000", { background: true, timeoutMs: 0 });
  assert.equal(await sbx.pause(), true);
  await warm.wait().catch(() => {});
  const refusal = await rejects(Sandbox.connect(sbx.sandboxId, { onResume: "reboot" }), SandboxError, "rebooting a sandbox paused with its memory");
  assert.match(refusal.message, /paused with its memory[\s\S]*hint: connect without onResume/, `den's reason and hint: ${refusal.message}`);
  assert.equal((await sbx.getInfo()).state, "paused", "a refused reboot changes nothing");
  await Sandbox.connect(sbx.sandboxId, { onResume: "restore" });
  procs = await sbx.commands.list();
  assert.ok(procs.some((p) => p.pid === warm.pid), "onResume restore keeps the processes");
  await sbx.commands.kill(warm.pid);

  step("lifecycle autoResume: a sandbox paused at its timeout wakes on traffic to its port, and on an envd call");
  const auto = await Sandbox.create({ metadata: { suite: `features-auto-${process.pid}` }, timeoutMs: 2_000, lifecycle: { onTimeout: "pause", autoResume: true } });
  try {
    let info = await auto.getInfo();
    assert.deepEqual(info.lifecycle, { onTimeout: "pause", autoResume: true });
    assert.deepEqual(info.metadata, { suite: `features-auto-${process.pid}` }, "the label behind autoResume is not E2B metadata");
    await auto.files.write("site/hi.txt", "hi\n");
    // Its own process, not a command the door follows, which is use.
    await auto.commands.run("cd site && setsid python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 < /dev/null &");
    const port = () => fetch(`${env.E2B_SANDBOX_URL}/hi.txt`, {
      headers: { "E2b-Sandbox-Id": auto.sandboxId, "E2b-Sandbox-Port": "8000", "e2b-traffic-access-token": auto.trafficAccessToken },
    });
    await waitUntil(30_000, "the server to listen", async () => (await port()).status === 200);
    await waitUntil(30_000, "the timeout to pause it", async () => (await auto.getInfo()).state === "paused");
    res = await port();
    assert.equal(res.status, 200, "a request to its port wakes it");
    assert.equal(await res.text(), "hi\n");
    assert.equal((await auto.getInfo()).state, "running");
    await waitUntil(30_000, "the timeout to pause it again", async () => (await auto.getInfo()).state === "paused");
    assert.equal(await auto.files.read("site/hi.txt"), "hi\n", "an envd call wakes it");
    assert.equal((await auto.getInfo()).state, "running");
  } finally {
    await auto.kill();
  }
  res = await fetch(`${env.E2B_API_URL}/v2/sandboxes`, {
    method: "POST", headers: { "X-API-KEY": env.E2B_API_KEY, "Content-Type": "application/json" },
    body: JSON.stringify({ templateID: "base", autoPause: true, autoPauseMemory: false, autoResume: { enabled: true } }),
  });
  got = await res.json();
  assert.deepEqual([res.status, got.code], [400, 400], `autoResume without memory, past the SDK's own check: ${JSON.stringify(got)}`);
  assert.match(got.message, /keepMemory: false/);

  step("snapshots: den checkpoints; sandboxes made from one, listed, deleted; another owner's not found");
  await sbx.files.write("snap/data.txt", "snapshot content");
  const snapName = `snap-${process.pid}`;
  const snap = await sbx.createSnapshot({ name: snapName });
  assert.ok(snap.snapshotId.startsWith(`${sbx.sandboxId}:`), `a snapshot id names its sandbox: ${snap.snapshotId}`);
  assert.deepEqual(snap.names, [snapName]);
  const copy = await Sandbox.create(snap.snapshotId, { metadata: { suite: `features-copy-${process.pid}` }, timeoutMs: 120_000 });
  try {
    assert.equal(await copy.files.read("snap/data.txt"), "snapshot content");
    await copy.files.write("snap/data.txt", "changed in the copy");
    assert.equal(await sbx.files.read("snap/data.txt"), "snapshot content", "a sandbox from a snapshot has files of its own");
    await rejects(Sandbox.create(snap.snapshotId, { apiKey: other }), SandboxError, "a sandbox from another owner's snapshot");
  } finally {
    await copy.kill();
  }
  for (const [what, list] of [["all", Sandbox.listSnapshots()], ["the sandbox's", sbx.listSnapshots()], ["by name", Sandbox.listSnapshots({ name: snapName })]]) {
    const items = await list.nextItems();
    assert.ok(items.some((x) => x.snapshotId === snap.snapshotId && x.names[0] === snapName), `${what}: ${JSON.stringify(items)}`);
  }
  assert.deepEqual(await Sandbox.listSnapshots({ name: `${snapName}-does-not-exist` }).nextItems(), []);
  assert.deepEqual(await Sandbox.listSnapshots({ apiKey: other }).nextItems(), [], "another owner lists none of them");
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, { apiKey: other }), false, "another owner's snapshot is not found");
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true);
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false, "deleted once");
  res = await fetch(`${env.E2B_API_URL}/templates`, { headers: { "X-API-KEY": env.E2B_API_KEY } });
  got = await res.json();
  assert.equal(res.status, 200);
  assert.ok(got.some((t) => t.templateID === "base" && t.aliases.includes("e2b-base")), `den's images as templates: ${JSON.stringify(got)}`);
  step("updateNetwork: E2B's egress lists become den's policy at once, read back by getInfo and den's API");
  // Documentation ranges and names only, and never any traffic: the
  // rules are read back, not tried.
  const denSandbox = async () => {
    const res = await fetch(`${env.E2B_API_URL}/v1/sandboxes/${sbx.sandboxId}`, { headers: { Authorization: `Bearer ${env.E2B_API_KEY}` } });
    assert.equal(res.status, 200);
    return res.json();
  };
  let net = await sbx.getInfo();
  assert.deepEqual([net.allowInternetAccess, net.network?.denyOut, net.network?.allowOut], [false, [ALL_TRAFFIC], undefined], `den's default: nothing out: ${JSON.stringify(net)}`);
  await sbx.updateNetwork({ allowOut: ["198.51.100.0/24", "pypi.org"], denyOut: [ALL_TRAFFIC] });
  net = await sbx.getInfo();
  assert.deepEqual([net.network?.allowOut, net.network?.denyOut], [["198.51.100.0/24", "pypi.org"], [ALL_TRAFFIC]], `the allow list: ${JSON.stringify(net.network)}`);
  assert.deepEqual((await denSandbox()).network, { mode: "allow", allow: ["198.51.100.0/24", "pypi.org"] }, "den's own policy is the allow list");
  for (const [what, update, reason] of [
    ["a deny list with the rest let out", { denyOut: ["203.0.113.9"] }, /not what it may not/],
    ["an egress proxy", { allowOut: ["198.51.100.7"], denyOut: [ALL_TRAFFIC], egressProxy: { address: "127.0.0.1:1080" } }, /egressProxy/],
    ["request transforms", { allowOut: ["pypi.org"], rules: { "pypi.org": [{ transform: { headers: { "X-A": "1" } } }] } }, /network rules/],
  ]) {
    const err = await rejects(sbx.updateNetwork(update), SandboxError, `updateNetwork with ${what}`);
    assert.match(err.message, reason, `den's reason for ${what}: ${err.message}`);
    assert.match(err.message, /docs\/agents\.md, section E2B/, `the refusal of ${what} says where to read more: ${err.message}`);
  }
  assert.deepEqual((await denSandbox()).network, { mode: "allow", allow: ["198.51.100.0/24", "pypi.org"] }, "a refused update changes nothing");
  await sbx.updateNetwork({ allowInternetAccess: false });
  net = await sbx.getInfo();
  assert.deepEqual([net.allowInternetAccess, net.network?.allowOut], [false, undefined], `no internet again: ${JSON.stringify(net)}`);
  assert.equal((await denSandbox()).network.mode, "none");
  await rejects(Sandbox.updateNetwork("nosuchsandbox", { denyOut: [ALL_TRAFFIC] }), SandboxNotFoundError, "updateNetwork of an unknown sandbox");

  step("process tags: Start with a tag, list shows it, Connect, SendInput, CloseStdin and SendSignal find by it");
  // The SDK reads tags (commands.list) but starts and selects by pid:
  // the tagged calls are envd's RPCs, as a Go or Python client makes them.
  // firstEvent opens a server stream and returns its first message, then
  // drops the stream (the process outlives it, as envd's does).
  const firstEvent = async (method, body) => {
    const ac = new AbortController();
    const res = await fetch(`${env.E2B_SANDBOX_URL}/${method}`, {
      method: "POST", signal: ac.signal, body: envelope(body),
      headers: { "Content-Type": "application/connect+json", "E2b-Sandbox-Id": sbx.sandboxId, "X-Access-Token": sbx.envdAccessToken },
    });
    assert.equal(res.status, 200, `${method}`);
    const reader = res.body.getReader();
    let buf = new Uint8Array(0);
    for (;;) {
      const { value, done } = await reader.read();
      assert.ok(!done, `${method} ended before its first message`);
      const next = new Uint8Array(buf.length + value.length);
      next.set(buf);
      next.set(value, buf.length);
      buf = next;
      if (buf.length < 5) continue;
      const n = new DataView(buf.buffer).getUint32(1);
      if (buf.length < 5 + n) continue;
      ac.abort();
      return { flags: buf[0], msg: JSON.parse(new TextDecoder().decode(buf.subarray(5, 5 + n))) };
    }
  };
  const started = async (tag, cmd) => {
    const first = await firstEvent("process.Process/Start", { process: { cmd: "/bin/bash", args: ["-l", "-c", cmd] }, tag, stdin: true });
    const pid = first.msg.event?.start?.pid;
    assert.ok(pid > 0, `Start with tag ${tag}: ${JSON.stringify(first)}`);
    return pid;
  };
  const webPid = await started("web", "sleep 600");
  const readerPid = await started("reader", "cat > tagged.out");
  procs = await sbx.commands.list();
  assert.deepEqual(procs.filter((p) => p.tag).map((p) => [p.pid, p.tag]).sort(), [[readerPid, "reader"], [webPid, "web"]].sort(),
    `commands.list shows the tags: ${JSON.stringify(procs)}`);
  const connected = await firstEvent("process.Process/Connect", { process: { tag: "web" } });
  assert.equal(connected.msg.event?.start?.pid, webPid, `Connect by tag: ${JSON.stringify(connected)}`);
  res = await rpc("process.Process/SendInput", { process: { tag: "reader" }, input: { stdin: btoa("by tag\n") } });
  assert.equal(res.status, 200, `SendInput by tag: ${await res.text()}`);
  res = await rpc("process.Process/CloseStdin", { process: { tag: "reader" } });
  assert.equal(res.status, 200, `CloseStdin by tag: ${await res.text()}`);
  await waitUntil(10_000, "the tagged reader to end", async () => !(await sbx.commands.list()).some((p) => p.pid === readerPid));
  assert.equal(await sbx.files.read("tagged.out"), "by tag\n");
  const runsRes = await fetch(`${env.E2B_API_URL}/v1/sandboxes/${sbx.sandboxId}/runs`, { headers: { Authorization: `Bearer ${env.E2B_API_KEY}` } });
  const denRuns = (await runsRes.json()).runs;
  assert.equal(denRuns.find((r) => r.pid === webPid)?.labels?.tag, "web", "den's run record carries the tag as its label");
  res = await rpc("process.Process/SendSignal", { process: { tag: "web" }, signal: "SIGNAL_SIGKILL" });
  assert.equal(res.status, 200, `SendSignal by tag: ${await res.text()}`);
  await waitUntil(10_000, "the tagged process to die", async () => !(await sbx.commands.list()).some((p) => p.pid === webPid));
  res = await rpc("process.Process/SendSignal", { process: { tag: "web" }, signal: "SIGNAL_SIGKILL" });
  got = await res.json();
  assert.deepEqual([res.status, got.code], [404, "not_found"], `a tag no running process carries: ${JSON.stringify(got)}`);
  assert.match(got.message, /no running process tagged "web"/);

  step("bad input through the SDK: others' and unknown sandboxes, expired keys; nothing changes");
  const id = sbx.sandboxId;
  for (const [what, call] of [
    ["pause", (o) => Sandbox.pause(id, o)],
    ["setTimeout", (o) => Sandbox.setTimeout(id, 1000, o)],
    ["getMetrics", (o) => Sandbox.getMetrics(id, o)],
    ["fork", (o) => Sandbox.fork(id, o)],
    ["updateNetwork", (o) => Sandbox.updateNetwork(id, { denyOut: [ALL_TRAFFIC] }, o)],
  ]) {
    await rejects(call({ apiKey: other }), SandboxNotFoundError, `another owner's ${what}`);
  }
  for (const [what, call] of [
    ["pause", () => Sandbox.pause("nosuchsandbox")],
    ["getMetrics", () => Sandbox.getMetrics("nosuchsandbox")],
  ]) {
    await rejects(call(), SandboxNotFoundError, `${what} of an unknown sandbox`);
  }
  for (const [what, call] of [
    ["list", () => Sandbox.list({ apiKey: expired }).nextItems()],
    ["create", () => Sandbox.create({ apiKey: expired })],
    ["connect", () => Sandbox.connect(id, { apiKey: expired })],
    ["kill", () => Sandbox.kill(id, { apiKey: expired })],
  ]) {
    const err = await rejects(call(), AuthenticationError, `${what} with an expired key`);
    assert.match(err.message, /expired/, `${what} with an expired key says so`);
  }
  res = await fetch(`${env.E2B_API_URL}/sandboxes/${id}/pause`, { method: "POST", headers: { "X-API-KEY": other } });
  got = await res.json();
  assert.equal(res.status, 404);
  assert.equal(got.code, 404);
  assert.match(got.message, new RegExp(id), `den's message names the sandbox: ${got.message}`);
  res = await fetch(`${env.E2B_API_URL}/v2/sandboxes?nextToken=!!`, { headers: { "X-API-KEY": env.E2B_API_KEY } });
  got = await res.json();
  assert.deepEqual([res.status, got.code], [400, 400]);
  assert.match(got.message, /X-Next-Token/, `a bad page token says where a good one comes from: ${got.message}`);
  await rejects(Sandbox.list({ nextToken: "!!" }).nextItems(), SandboxError, "a bad page token through the SDK");
  await rejects(sbx.files.watchDir("plain.txt", () => {}), InvalidArgumentError, "watching a file");
  await rejects(sbx.files.read("no/such/file"), FileNotFoundError, "reading a missing file");
  await rejects(sbx.commands.run("exit 9"), CommandExitError, "a failing command");
  const info = await sbx.getInfo();
  assert.equal(info.state, "running", "the sandbox is untouched");
  assert.ok(info.endAt - Date.now() > 60_000, `no one shortened its timeout: ${info.endAt}`);
} finally {
  await sbx.kill().catch(() => {});
}
console.log("ok");
