// The SDK against a real dend, whose address comes from the environment
// (DEN_SOCKET, or DEN_HOST and DEN_TOKEN). integration/typescript_test.go
// starts dend and runs these with `npm test`.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { after, before, describe, test } from "node:test";

import { Client, DenError, isInvalid, isNotFound } from "../dist/index.js";

const den = Client.fromEnv();
const name = `ts-${process.env.DEN_HOST ? "tcp" : "sock"}`;

const sh = (sandbox, line) => den.exec(sandbox, { argv: ["sh", "-c", line] });

/** A public key in authorized_keys form, and its SHA256 fingerprint. */
function sshKey(comment) {
  const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32BE(n); return b; };
  const blob = Buffer.concat([u32(11), Buffer.from("ssh-ed25519"), u32(32), randomBytes(32)]);
  const fp = "SHA256:" + createHash("sha256").update(blob).digest("base64").replace(/=+$/, "");
  return [`ssh-ed25519 ${blob.toString("base64")} ${comment}`, fp];
}

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

  test("events: a pause arrives, and the stream resumes after it", { timeout: 60_000 }, async () => {
    const stream = await den.streamEvents({ sandbox: name }); // from now: open before the pause
    await den.pause(name);
    let paused;
    for await (const ev of stream) {
      if (ev.type === "paused") {
        paused = ev;
        break;
      }
    }
    assert.equal(paused.sandbox, name);
    assert.equal(paused.from, "running");
    assert.equal(paused.to, "paused");
    assert.ok(paused.id && paused.sandbox_id);
    assert.equal(stream.lastId, paused.id);

    await den.resume(name);
    const later = [];
    for await (const ev of await den.streamEvents({ sandbox: name, after: paused.id, follow: false })) {
      if (ev.type !== "gap") later.push(ev.type);
    }
    assert.equal(later[0], "resumed", later.join(" "));
    assert.ok(!later.includes("paused"), later.join(" "));

    const all = [];
    for await (const ev of await den.streamEvents({ sandbox: name, after: "0", follow: false })) all.push(ev);
    assert.ok(all.some((e) => e.type === "created") && all.every((e) => e.type === "gap" || e.sandbox === name));

    await assert.rejects(den.streamEvents({ sandbox: "no-such" }), (e) => isNotFound(e) && e.status === 404);
    await assert.rejects(den.streamEvents({ after: "not-an-id" }), (e) => isInvalid(e));
  });

  test("rebase keeps the kept paths and runs the setup steps again", async () => {
    const n = `${name}-rb`;
    await den.createSandbox({ name: n, image: "busybox", memory: "256M", setup: ["echo ran >> /root/setup.log"], keep: ["/opt/data"] });
    try {
      assert.equal((await sh(n, "mkdir -p /opt/data && echo db > /opt/data/db && echo junk > /etc/junk")).exit_code, 0);
      const steps = ["echo ran >> /root/setup.log", "echo step two | tee /root/two"];
      const set = await den.setSetup(n, { steps });
      assert.deepEqual(set.setup, steps);
      assert.ok(set.keep.includes("/opt/data"), "keep, left out, stays");

      const r = await den.rebase(n);
      assert.ok(r.checkpoint);
      assert.match(r.to, /^busybox@\d+$/);
      assert.ok(r.kept.includes("/opt/data") && r.kept.includes("/root"));
      assert.deepEqual(r.steps.map((s) => [s.step, s.command, s.exit_code]), [[1, steps[0], 0], [2, steps[1], 0]]);
      assert.ok(r.sandbox.generation > set.generation);
      assert.equal((await sh(n, "cat /root/setup.log /opt/data/db /root/two; test -e /etc/junk || echo junk gone")).stdout,
        "ran\nran\ndb\nstep two\njunk gone\n");
      assert.equal(await text(await den.logs(n, r.steps[1].run)), "step two\n", "a step's output is its run's");

      await den.setSetup(n, { steps: ["echo boom; exit 3"] });
      await assert.rejects(den.rebase(n), (e) => e.code === "conflict" && /boom/.test(e.message));
      assert.equal((await sh(n, "cat /opt/data/db /root/two")).stdout, "db\nstep two\n", "a failed rebase rolls back");
      const cleared = await den.setSetup(n, { steps: [], keep: [] });
      assert.deepEqual(cleared.setup ?? [], []);
      assert.ok(!cleared.keep.includes("/opt/data"));

      await assert.rejects(den.rebase("no-such"), (e) => isNotFound(e));
      await assert.rejects(den.rebase(n, { image: "no-such-image" }), (e) => isNotFound(e));
      await assert.rejects(den.setSetup(n, { keep: ["relative/path"] }), (e) => isInvalid(e));
    } finally {
      await den.removeSandbox(n, { force: true }).catch(() => {});
    }
  });

  test("export and import: the archive makes the agent again under a new name", { timeout: 120_000 }, async () => {
    const copy = `${name}-imported`;
    const dir = mkdtempSync(join(tmpdir(), "den-ts-export-"));
    try {
      await sh(name, "mkdir -p /work && echo travels > /work/note");
      const x = await den.exportSandbox(name);
      assert.match(x.key, /^[0-9a-f]{64}$/);
      assert.equal(x.memory, true);
      assert.deepEqual(x.secrets, []);
      const file = join(dir, "agent.den");
      await pipeline(x.archive, createWriteStream(file));
      const sealed = readFileSync(file);
      assert.ok(sealed.length > 0 && !sealed.includes("travels"), "the archive is sealed");

      await assert.rejects(den.importSandbox(createReadStream(file), randomBytes(32).toString("hex"), { name: copy }),
        (e) => isInvalid(e) && e.status === 400);
      await assert.rejects(den.importSandbox(sealed.subarray(0, sealed.length >> 1), x.key, { name: copy }), (e) => isInvalid(e));
      await assert.rejects(den.getSandbox(copy), (e) => isNotFound(e), "a refused import leaves nothing");

      const res = await den.importSandbox(createReadStream(file), x.key, { name: copy });
      assert.equal(res.from, name);
      assert.equal(res.memory, true);
      assert.equal(res.sandbox.name, copy);
      assert.equal(res.sandbox.state, "hibernated");
      assert.equal((await sh(copy, "cat /work/note")).stdout, "travels\n");

      const key = randomBytes(32).toString("hex");
      const fsOnly = await den.exportSandbox(name, { fs_only: true, key });
      assert.equal(fsOnly.key, key);
      assert.equal(fsOnly.memory, false);
      const parts = [];
      for await (const p of fsOnly.archive) parts.push(p);
      await den.removeSandbox(copy, { force: true });
      const again = await den.importSandbox(Buffer.concat(parts), key, { name: copy });
      assert.equal(again.memory, false);
      assert.equal(again.sandbox.state, "stopped");
      await den.startSandbox(copy);
      assert.equal((await sh(copy, "cat /work/note")).stdout, "travels\n");

      await assert.rejects(den.exportSandbox("no-such"), (e) => isNotFound(e));
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await den.removeSandbox(copy, { force: true }).catch(() => {});
    }
  });

  test("peers: a view of another sandbox is readable and read-only", async () => {
    const coder = `${name}-coder`;
    const rev = `${name}-rev`;
    await den.createSandbox({ name: coder, image: "busybox", memory: "256M" });
    await den.createSandbox({ name: rev, image: "busybox", memory: "256M" });
    try {
      await sh(coder, "mkdir -p /work && echo v1 > /work/a.txt");
      const at = `/peers/${coder}`;
      // A paused viewer's den-init, which mounts views outside /peers, is
      // frozen: refused without restart, nothing changed.
      await den.pause(rev);
      await assert.rejects(den.addPeer(rev, { sandbox: coder, at: "/review/x" }), (e) => e.code === "conflict" && /restart/.test(e.message));
      assert.deepEqual(await den.peers(rev), []);
      await den.resume(rev);

      const p = await den.addPeer(rev, { sandbox: coder, restart: true });
      assert.equal(p.at, at);
      assert.equal(p.sandbox, coder);
      assert.ok(p.id && p.sandbox_id && p.taken_at);
      assert.deepEqual((await den.peers(rev)).map((v) => v.id), [p.id]);
      assert.equal((await sh(rev, `cat ${at}/work/a.txt`)).stdout, "v1\n");
      const w = await sh(rev, `echo x > ${at}/work/a.txt`);
      assert.ok(w.exit_code !== 0 && /read-only/i.test(w.stderr), w.stderr);
      await assert.rejects(den.writeFile(rev, `${at}/work/a.txt`, "x"), (e) => e instanceof DenError);
      assert.equal((await sh(coder, "cat /work/a.txt")).stdout, "v1\n");

      await sh(coder, "echo v2 > /work/a.txt");
      const again = await den.refreshPeer(rev, coder, { restart: true });
      assert.equal(again.at, at);
      assert.equal((await sh(rev, `cat ${at}/work/a.txt`)).stdout, "v2\n");
      await den.removePeer(rev, again.id, { restart: true });
      assert.deepEqual(await den.peers(rev), []);

      // A live view, without restart: what coder writes next shows at once.
      const live = await den.addPeer(rev, { sandbox: coder, live: true });
      assert.equal(live.live, true);
      await sh(coder, "echo v3 > /work/a.txt && sync");
      assert.equal((await sh(rev, `cat ${at}/work/a.txt`)).stdout, "v3\n");
      await den.removePeer(rev, live.id);
      assert.deepEqual(await den.peers(rev), []);

      await assert.rejects(den.peers("no-such"), (e) => isNotFound(e));
      await assert.rejects(den.addPeer(rev, { sandbox: "no-such", restart: true }), (e) => isNotFound(e));
      await assert.rejects(den.removePeer(rev, "no-such-view"), (e) => isNotFound(e));
    } finally {
      await den.removeSandbox(rev, { force: true }).catch(() => {});
      await den.removeSandbox(coder, { force: true }).catch(() => {});
    }
  });

  test("services: den-init keeps one running and restarts it", async () => {
    const svc = await den.addService(name, { name: "tick", argv: ["sh", "-c", "echo hi; exec sleep 100000"] });
    assert.equal(svc.name, "tick");
    assert.equal(svc.restart, "always");
    const waitFor = async (cond) => {
      for (let i = 0; i < 300; i++) {
        const s = (await den.services(name)).find((x) => x.name === "tick");
        if (cond(s)) return s;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.fail("the service never got there");
    };
    const first = await waitFor((s) => s.state === "running" && s.run_id);
    await den.restartService(name, "tick");
    const again = await waitFor((s) => s.restarts === 1 && s.state === "running" && s.run_id && s.run_id !== first.run_id);
    assert.notEqual(again.pid, first.pid);
    await assert.rejects(den.addService(name, { name: "tick", argv: ["true"] }), (e) => e.code === "conflict");
    await assert.rejects(den.addService(name, { name: "Bad Name", argv: ["true"] }), (e) => isInvalid(e));
    await den.removeService(name, "tick");
    assert.deepEqual(await den.services(name), []);
    await assert.rejects(den.removeService(name, "tick"), (e) => isNotFound(e));
  });

  test("harness: swapped on the sandbox as it is, a failed step rolled back", async () => {
    const hname = `${name}-harness`;
    await den.createSandbox({ name: hname, image: "busybox", memory: "256M" });
    try {
      const a = await den.setHarness(hname, { steps: ["mkdir -p /opt/h && echo A > /opt/h/v"], services: [{ name: "a", argv: ["sleep", "100000"] }] });
      assert.ok(a.checkpoint && a.steps[0].harness);
      const b = await den.setHarness(hname, { steps: ["echo B > /opt/h/v"], services: [{ name: "b", argv: ["sleep", "100001"] }] });
      assert.equal(b.sandbox.generation, a.sandbox.generation, "no new root");
      assert.deepEqual((await den.services(hname)).map((s) => [s.name, s.harness]), [["b", true]]);
      await assert.rejects(den.setHarness(hname, { steps: ["echo boom >&2; exit 3"] }),
        (e) => e.code === "conflict" && /harness step 1/.test(e.message) && /boom/.test(e.message));
      assert.deepEqual((await den.harness(hname)).services.map((s) => s.name), ["b"]);
      assert.equal((await sh(hname, "cat /opt/h/v")).stdout, "B\n");
      await assert.rejects(den.setHarness(hname, { config_paths: ["/usr"] }), (e) => isInvalid(e));
      await den.removeHarness(hname);
      await assert.rejects(den.harness(hname), (e) => isNotFound(e));
    } finally {
      await den.removeSandbox(hname, { force: true }).catch(() => {});
    }
  });

  test("ssh keys: add, list by fingerprint, remove", async () => {
    const [key, fp] = sshKey("me@laptop");
    const kname = `${name}-key`;
    if (!process.env.DEN_HOST) {
      // Root on the socket has no token to tie a key to.
      await assert.rejects(den.addSSHKey(kname, key), (e) => isInvalid(e) && /token/.test(e.message));
      await assert.rejects(den.removeSSHKey("no-such-key"), (e) => isNotFound(e));
      return;
    }
    const k = await den.addSSHKey(kname, key);
    try {
      assert.equal(k.name, kname);
      assert.equal(k.fingerprint, fp);
      assert.equal(k.type, "ssh-ed25519");
      assert.equal(k.comment, "me@laptop");
      assert.ok((await den.listSSHKeys()).some((x) => x.fingerprint === fp));
      await assert.rejects(den.addSSHKey(`${kname}-bad`, "this is not a key"), (e) => isInvalid(e));
    } finally {
      await den.removeSSHKey(fp);
    }
    assert.ok(!(await den.listSSHKeys()).some((x) => x.fingerprint === fp));
    await assert.rejects(den.removeSSHKey(kname), (e) => isNotFound(e));
  });

  test("warm pools: set, shown on the image with its count, emptied", { timeout: 150_000 }, async () => {
    if (process.env.DEN_HOST) {
      await assert.rejects(den.setWarm("busybox", 1), (e) => e.code === "forbidden" && e.status === 403); // admins only
      return;
    }
    try {
      const p = await den.setWarm("busybox", 1, 256 << 20);
      assert.equal(p.target, 1);
      assert.equal(p.memory_bytes, 256 << 20);
      for (const deadline = Date.now() + 120_000; ; ) {
        const w = (await den.getImage("busybox")).warm;
        assert.equal(w?.target, 1);
        if (w.ready === 1) break;
        assert.ok(Date.now() < deadline, `the pool never filled: ${JSON.stringify(w)}`);
        await new Promise((r) => setTimeout(r, 500));
      }
      await assert.rejects(den.setWarm("no-such-image", 1), (e) => isNotFound(e));
      await assert.rejects(den.setWarm("busybox", 65), (e) => isInvalid(e));
    } finally {
      assert.equal((await den.setWarm("busybox", 0)).target, 0);
    }
  });

  test("withSandbox removes its sandbox however the function ends", async () => {
    await assert.rejects(den.withSandbox({ name: `${name}-tmp`, image: "busybox", memory: "256M" }, async (s) => {
      assert.equal(s.ephemeral, true);
      throw new Error("boom");
    }), /boom/);
    await assert.rejects(den.getSandbox(`${name}-tmp`), (e) => isNotFound(e));
  });
});
