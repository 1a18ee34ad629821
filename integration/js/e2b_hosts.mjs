// Drives what E2B's SDK hands out to be used outside it, unmodified:
// sandbox.getHost(port) for a server in the sandbox, uploadUrl() and
// downloadUrl() for files, and getMetrics(). dend serves the hosts
// PORT-ID.e2b.localhost:PORT on its own listener; Node does not resolve
// *.localhost here, so requests to them connect to 127.0.0.1 through an
// undici Agent whose lookup answers loopback, as a resolver would.
// integration/e2b_hosts_test.go runs it.
//
//   E2B_API_URL=http://127.0.0.1:7070 E2B_SANDBOX_URL=http://127.0.0.1:7070 \
//   E2B_API_KEY=den_... OTHER_KEY=den_... node e2b_hosts.mjs
//
// It prints the sandbox's id, for the test to look at with den's tools.
import assert from "node:assert/strict";
import { Agent } from "undici";
import { Sandbox } from "e2b";

const env = process.env;
const other = env.OTHER_KEY;
assert.ok(env.E2B_API_URL && env.E2B_SANDBOX_URL && env.E2B_API_KEY && other, "E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY and OTHER_KEY are required");
const dendPort = new URL(env.E2B_API_URL).port;

const step = (what) => console.error(`e2b hosts: ${what}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// loopback resolves every name to 127.0.0.1, as *.localhost resolves in
// browsers and curl.
const loopback = new Agent({
  connect: { lookup: (_host, opts, cb) => (opts?.all ? cb(null, [{ address: "127.0.0.1", family: 4 }]) : cb(null, "127.0.0.1", 4)) },
});
const get = (url, init = {}) => fetch(url, { ...init, dispatcher: loopback });

step("create: the domain of its hosts is dend's listener under e2b.localhost");
const sbx = await Sandbox.create({ timeoutMs: 300_000 });
try {
  assert.equal(sbx.sandboxDomain, `e2b.localhost:${dendPort}`);
  const host = sbx.getHost(8000);
  assert.equal(host, `8000-${sbx.sandboxId}.e2b.localhost:${dendPort}`);
  assert.ok(sbx.trafficAccessToken, "create answers a traffic access token");

  step("a dev server started in the background is reached at getHost(port)");
  await sbx.files.write("site/hello.txt", "hello from the sandbox\n");
  await sbx.commands.run("cd site && exec python3 -m http.server 8000 --bind 0.0.0.0", { background: true, timeoutMs: 0 });
  const withToken = { headers: { "e2b-traffic-access-token": sbx.trafficAccessToken } };
  let res;
  for (let i = 0; i < 100; i++) {
    res = await get(`http://${host}/hello.txt`, withToken);
    if (res.status === 200) break;
    await res.arrayBuffer();
    await sleep(100);
  }
  assert.equal(res.status, 200, `the server through its host: ${res.status}`);
  assert.equal(await res.text(), "hello from the sandbox\n");

  step("without the traffic token, or with another sandbox's, or with another owner's den token: refused");
  res = await get(`http://${host}/hello.txt`);
  assert.equal(res.status, 403);
  const refusal = await res.json();
  assert.equal(refusal.code, 403);
  assert.match(refusal.message, /e2b-traffic-access-token/);
  // Another token of the same shape: its last hex digit changed (a fixed
  // suffix would leave one token in 256 as it was).
  const last = sbx.trafficAccessToken.slice(-1);
  const tampered = sbx.trafficAccessToken.slice(0, -1) + (last === "0" ? "1" : "0");
  res = await get(`http://${host}/hello.txt`, { headers: { "e2b-traffic-access-token": tampered } });
  assert.equal(res.status, 403);
  await res.arrayBuffer();
  res = await get(`http://${host}/hello.txt`, { headers: { authorization: `Bearer ${other}` } });
  assert.equal(res.status, 502, "another owner's den token finds no such sandbox");
  await res.arrayBuffer();
  res = await get(`http://8000-nosuchsandbox.e2b.localhost:${dendPort}/hello.txt`);
  assert.deepEqual({ status: res.status, body: await res.json() }, { status: 403, body: { ...refusal, sandboxId: "nosuchsandbox" } }, "an unknown sandbox is refused in the same words");

  step("the owner's den token and the envd access token reach it too");
  res = await get(`http://${host}/hello.txt`, { headers: { authorization: `Bearer ${env.E2B_API_KEY}` } });
  assert.equal(res.status, 200);
  await res.arrayBuffer();

  step("port 49983 of its host is envd: the same files, with the envd access token");
  const envdHost = `http://${sbx.getHost(49983)}`;
  res = await get(`${envdHost}/files?path=site/hello.txt`, { headers: { "x-access-token": sbx.envdAccessToken ?? "" } });
  assert.equal(res.status, 200);
  assert.equal(await res.text(), "hello from the sandbox\n");
  res = await get(`${envdHost}/files?path=site/hello.txt`, { headers: { "x-access-token": sbx.trafficAccessToken } });
  assert.equal(res.status, 401, "the traffic token is not an envd token");
  await res.arrayBuffer();

  step("uploadUrl and downloadUrl: signed, used by plain fetch, without any header");
  const up = await sbx.uploadUrl("signed/up.txt", { useSignatureExpiration: 60 });
  assert.match(up, /[?&]signature=v1_/);
  assert.match(up, /[?&]signature_expiration=\d+/);
  const form = new FormData();
  form.append("file", new Blob(["uploaded by URL\n"]), "up.txt");
  res = await fetch(up, { method: "POST", body: form });
  assert.equal(res.status, 200, `upload by signed URL: ${res.status}`);
  assert.equal((await res.json())[0].path, "/home/user/signed/up.txt");
  assert.equal(await sbx.files.read("signed/up.txt"), "uploaded by URL\n");
  const down = await sbx.downloadUrl("signed/up.txt");
  res = await fetch(down);
  assert.equal(res.status, 200);
  assert.equal(await res.text(), "uploaded by URL\n");
  const downByHost = new URL(down);
  res = await get(`${envdHost}/files${downByHost.search}`);
  assert.equal(res.status, 200, "the signed URL works on the sandbox's own host too");
  await res.arrayBuffer();

  step("a wrong or expired signature: 401, and nothing changes");
  for (const [what, url, method] of [
    ["a download URL used to upload", down, "POST"],
    ["another path", up.replace("signed%2Fup.txt", "signed%2Fother.txt"), "POST"],
    ["a later expiration", up.replace(/signature_expiration=(\d+)/, (_, s) => `signature_expiration=${Number(s) + 3600}`), "POST"],
    ["expired", await sbx.uploadUrl("signed/late.txt", { useSignatureExpiration: -1 }), "POST"],
  ]) {
    const form = new FormData();
    form.append("file", new Blob(["must not land\n"]), "x.txt");
    res = await fetch(url, { method, body: form });
    const body = await res.json();
    assert.equal(res.status, 401, `${what}: ${res.status} ${JSON.stringify(body)}`);
    assert.equal(body.code, 401);
    assert.match(body.message, what === "expired" ? /expired/ : /signature/, what);
  }
  assert.equal(await sbx.files.read("signed/up.txt"), "uploaded by URL\n");
  assert.equal(await sbx.files.exists("signed/other.txt"), false);
  assert.equal(await sbx.files.exists("signed/late.txt"), false);

  step("getMetrics: samples every few seconds while it runs, the CPU of a busy loop seen");
  await sbx.commands.run("timeout 8 sh -c 'while :; do :; done' || true", { timeoutMs: 30_000 });
  let metrics = [];
  for (let i = 0; i < 60 && !metrics.some((m) => m.cpuUsedPct > 20); i++) {
    metrics = await sbx.getMetrics();
    await sleep(500);
  }
  const busy = metrics.find((m) => m.cpuUsedPct > 20);
  assert.ok(busy, `no sample saw the busy loop: ${JSON.stringify(metrics)}`);
  assert.ok(busy.cpuCount >= 1 && busy.memUsed > 0 && busy.memTotal >= busy.memUsed && busy.diskTotal > 0 && busy.diskUsed > 0 && busy.diskUsed < busy.diskTotal, JSON.stringify(busy));
  assert.ok(busy.timestamp instanceof Date && Math.abs(busy.timestamp - Date.now()) < 120_000, `timestamp ${busy.timestamp}`);
  for (let i = 1; i < metrics.length; i++) assert.ok(metrics[i].timestamp > metrics[i - 1].timestamp, "oldest first");
  const around = await sbx.getMetrics({ start: new Date(busy.timestamp.getTime() - 1000), end: new Date(busy.timestamp.getTime() + 1000) });
  assert.deepEqual(around.map((m) => m.timestamp.getTime()), [busy.timestamp.getTime()], "start and end filter");
  assert.deepEqual(await sbx.getMetrics({ start: new Date(Date.now() + 3_600_000) }), []);

  console.log(JSON.stringify({ sandbox: sbx.sandboxId }));
} catch (e) {
  await sbx.kill().catch(() => {});
  throw e;
}
// The dev server's command stream stays open (timeoutMs: 0): leave it.
process.exit(0);
