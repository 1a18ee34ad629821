// The SDK against a real dend, whose address comes from the environment
// (DEN_SOCKET, or DEN_HOST and DEN_TOKEN). integration/typescript_test.go
// starts dend and runs these with `npm test`.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { Client, DenError, isNotFound } from "../dist/index.js";

const den = Client.fromEnv();
const name = `ts-${process.env.DEN_HOST ? "tcp" : "sock"}`;

async function text(stream) {
  const parts = [];
  for await (const p of stream) parts.push(p);
  return Buffer.concat(parts).toString("utf8");
}

describe("den TypeScript SDK", () => {
  before(async () => {
    const sb = await den.createSandbox({ name, image: "busybox", memory: "256M" });
    assert.equal(sb.state, "running");
  });
  after(async () => {
    await den.removeSandbox(name, { force: true }).catch(() => {});
  });

  test("lists and describes the sandbox", async () => {
    const all = await den.listSandboxes();
    assert.ok(all.some((s) => s.name === name));
    const sb = await den.getSandbox(name);
    assert.equal(sb.image, "busybox");
    assert.equal(sb.memory_bytes, 256 << 20);
  });

  test("exec streams both outputs and returns the exit code", async () => {
    const r = await den.exec(name, { argv: ["sh", "-c", "echo out; echo err >&2; exit 7"] });
    assert.equal(r.exit_code, 7);
    assert.equal(r.status, "exited");
    assert.equal(r.stdout, "out\n");
    assert.equal(r.stderr, "err\n");

    const seen = [];
    let started;
    const r2 = await den.exec(name, { argv: ["sh", "-c", "for i in 1 2 3; do echo $i; done"] }, {
      onStdout: (b) => seen.push(Buffer.from(b).toString()),
      onStarted: (run) => (started = run),
    });
    assert.equal(seen.join(""), "1\n2\n3\n");
    assert.equal(r2.stdout, "", "output given to a callback is not gathered too");
    assert.equal(started.id, r2.id);
  });

  test("exec feeds stdin and carries large output whole", async () => {
    const input = randomBytes(300_000).toString("base64");
    const r = await den.exec(name, { argv: ["sh", "-c", "cat | wc -c"] }, { stdin: input });
    assert.equal(r.stdout.trim(), String(input.length));
    const big = await den.exec(name, { argv: ["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x"] });
    assert.equal(big.stdout.length, 3_000_000);
  });

  test("exec's timeout kills the command", async () => {
    const r = await den.exec(name, { argv: ["sleep", "30"], timeout: "1s" });
    assert.equal(r.status, "timed_out");
  });

  test("background runs, their logs and signals", async () => {
    const run = await den.execDetached(name, { argv: ["sh", "-c", "echo a; sleep 1; echo b"] });
    assert.equal(run.status, "running");
    const out = await text(await den.logs(name, run.id, { follow: true }));
    assert.equal(out, "a\nb\n");
    const done = await den.getRun(name, run.id);
    assert.equal(done.exit_code, 0);

    const long = await den.execDetached(name, { argv: ["sleep", "300"] });
    await den.signal(name, long.id, "KILL");
    const killed = await text(await den.logs(name, long.id, { follow: true }));
    assert.equal(killed, "");
    assert.equal((await den.getRun(name, long.id)).status, "killed");
    assert.ok((await den.runs(name)).some((r) => r.id === long.id));
  });

  test("files both ways", async () => {
    const data = randomBytes(5 << 20);
    async function* chunks() {
      for (let i = 0; i < data.length; i += 1 << 20) yield data.subarray(i, i + (1 << 20));
    }
    await den.writeFile(name, "/root/blob", chunks());
    const back = await den.readFile(name, "/root/blob");
    assert.equal(createHash("sha256").update(back).digest("hex"), createHash("sha256").update(data).digest("hex"));
    const streamed = await den.readFileStream(name, "/root/blob");
    let n = 0;
    for await (const p of streamed) n += p.length;
    assert.equal(n, data.length);

    await den.writeFile(name, "/root/run.sh", "#!/bin/sh\necho hi\n", { mode: 0o755 });
    const st = await den.stat(name, "/root/run.sh");
    assert.equal(st.mode, 0o755);
    await den.mkdir(name, { path: "/root/a/b", parents: true });
    await den.move(name, "/root/run.sh", "/root/a/b/run.sh");
    const ls = await den.listFiles(name, "/root/a/b");
    assert.deepEqual(ls.map((f) => f.name), ["run.sh"]);
    await den.removeFile(name, "/root/a", { recursive: true });
    await assert.rejects(den.stat(name, "/root/a"), (e) => isNotFound(e));
  });

  test("sleep, wake, checkpoint, restore, fork", async () => {
    await den.writeFile(name, "/root/v", "1");
    assert.equal((await den.pause(name)).state, "paused");
    assert.equal((await den.exec(name, { argv: ["cat", "/root/v"] })).stdout, "1", "exec wakes a paused sandbox");
    assert.equal((await den.hibernate(name)).state, "hibernated");
    assert.equal((await den.resume(name)).state, "running");

    const ck = await den.checkpoint(name, { name: "v1" });
    assert.equal(ck.name, "v1");
    await den.writeFile(name, "/root/v", "2");
    await den.restore(name, "v1");
    assert.equal(Buffer.from(await den.readFile(name, "/root/v")).toString(), "1");
    assert.ok((await den.checkpoints(name)).some((c) => c.id === ck.id));

    const kids = await den.fork(name, { name: `${name}-kid` });
    assert.equal(kids.length, 1);
    assert.equal(Buffer.from(await den.readFile(`${name}-kid`, "/root/v")).toString(), "1");
    await den.removeSandbox(`${name}-kid`, { force: true });
  });

  test("policy, limits, network and ports", async () => {
    let sb = await den.setPolicy(name, { pause_after: "7m" });
    assert.equal(sb.policy.pause_after, "7m");
    sb = await den.setLimits(name, { cpus: 0.5 });
    assert.equal(sb.cpus, 0.5);
    sb = await den.setNetwork(name, { mode: "none" });
    assert.equal(sb.network.mode, "none");
    sb = await den.exposePort(name, 8080);
    assert.deepEqual(sb.ports.map((p) => p.port), [8080]);
    const u = await den.portURL(name, 8080, { expires: "1h" });
    assert.match(u.path, /\/v1\/sandboxes\/.+\/ports\/8080\/proxy\//);
    if (process.env.DEN_HOST) assert.ok(u.url.startsWith(process.env.DEN_HOST), u.url);
    await den.unexposePort(name, 8080);
  });

  test("bad input: den's errors with their hints, nothing created", async () => {
    await assert.rejects(den.getSandbox("no-such"), (e) => e instanceof DenError && e.code === "not_found" && e.status === 404);
    await assert.rejects(den.exec("no-such", { argv: ["true"] }), (e) => e instanceof DenError && e.code === "not_found");
    await assert.rejects(den.createSandbox({ name: "bad-size", image: "busybox", memory: "lots" }),
      (e) => e.code === "invalid" && /memory/.test(e.message) && e.hint !== undefined);
    await assert.rejects(den.createSandbox({ name: "bad name!" }), (e) => e.code === "invalid");
    await assert.rejects(den.readFile(name, "/root/../etc/passwd"), (e) => e.code === "invalid");
    await assert.rejects(den.exec(name, { argv: [] }), (e) => e instanceof DenError && e.code === "invalid");
    const names = (await den.listSandboxes()).map((s) => s.name);
    assert.ok(!names.includes("bad-size") && !names.includes("bad name!"), `left behind: ${names}`);
  });

  test("withSandbox removes its sandbox however the function ends", async () => {
    await assert.rejects(den.withSandbox({ name: `${name}-tmp`, image: "busybox", memory: "256M" }, async (s) => {
      assert.equal(s.ephemeral, true);
      throw new Error("boom");
    }), /boom/);
    await assert.rejects(den.getSandbox(`${name}-tmp`), (e) => isNotFound(e));
  });
});
