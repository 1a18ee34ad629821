// Drives E2B's file calls, with the official e2b SDK unmodified, as the
// sandbox's `user` and as root: every one is done with the permissions of
// the user it acts as. As `user`, root's 0600 files and /etc/shadow cannot
// be read, /etc/passwd cannot be written, by an upload or a signed upload
// URL, nor moved, removed or listed where root's directory is closed, and
// nothing of root's changes; a file in the user's home is written and is
// the user's. Directories missing on the way to a file written or made
// as `user` are made by root and given to the user, as E2B's envd does
// (writing /0/x.txt works); the file is still written as the user, so
// a new file in /etc, or one beneath a directory the user cannot reach,
// is refused. As root, all of it works. integration/e2b_files_user_test.go
// runs it.
//
//   E2B_API_URL=http://127.0.0.1:7070 E2B_SANDBOX_URL=http://127.0.0.1:7070 \
//   E2B_API_KEY=den_... node e2b_files_user.mjs
//
// It prints "ok".
import assert from "node:assert/strict";
import { Sandbox, SandboxError, NotFoundError } from "e2b";

const env = process.env;
assert.ok(env.E2B_API_URL && env.E2B_SANDBOX_URL && env.E2B_API_KEY, "E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY are required");

const step = (what) => console.error(`e2b files as user: ${what}`);

// refused asserts that p fails as a call the user may not make: a
// SandboxError (403 on /files, permission_denied to an RPC, for which the
// SDK has no class of its own) saying permission denied, never a
// not-found.
async function refused(p, what) {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof SandboxError && !(e instanceof NotFoundError), `${what}: got ${e?.name}: ${e?.message}, want a SandboxError`);
    assert.match(e.message, /permission denied/, what);
    return;
  }
  assert.fail(`${what}: it worked; it should have been refused`);
}

const asUser = { user: "user" };
const asRoot = { user: "root" };
const sbx = await Sandbox.create({ timeoutMs: 300_000 });
try {
  step("root's files, as root made them");
  await sbx.commands.run(
    "printf 'root only' > /root/secret.txt && chmod 600 /root/secret.txt && printf 'top' > /tmp/top.txt && chmod 600 /tmp/top.txt",
    asRoot,
  );
  const owners = async () => (await sbx.commands.run("stat -c '%U:%G:%a:%s:%Y' /etc/passwd /etc/shadow /tmp/top.txt /root/secret.txt", asRoot)).stdout;
  const before = await owners();
  const passwd = await sbx.files.read("/etc/passwd", asRoot);
  assert.match(passwd, /^root:/);

  step("as user, reads of what root keeps to itself are refused");
  await refused(sbx.files.read("/etc/shadow", asUser), "reading /etc/shadow");
  await refused(sbx.files.read("/tmp/top.txt", asUser), "reading root's 0600 file");
  await refused(sbx.files.read("/tmp/top.txt"), "reading root's 0600 file as the default user");
  await refused(sbx.files.getInfo("/root/secret.txt", asUser), "stat in root's closed home");
  await refused(sbx.files.list("/root", asUser), "listing root's closed home");
  await refused(sbx.files.watchDir("/root", () => {}, asUser), "watching root's closed home");

  step("as user, writes to root's files are refused");
  const evil = "root::0:0:root:/root:/bin/sh\n";
  await refused(sbx.files.write("/etc/passwd", evil, asUser), "writing /etc/passwd");
  await refused(sbx.files.write("/etc/passwd", evil), "writing /etc/passwd as the default user");
  await refused(sbx.files.write("/etc/passwd", evil, { ...asUser, useOctetStream: true }), "writing /etc/passwd, octet-stream");
  await refused(sbx.files.write([{ path: "/etc/passwd", data: evil }], asUser), "writing /etc/passwd in a batch");
  await refused(sbx.files.write("/etc/newfile", "x", asUser), "writing a new file in /etc");
  await refused(sbx.files.write("/etc/newfile", "x", { ...asUser, useOctetStream: true }), "writing a new file in /etc, octet-stream");
  await refused(sbx.files.write("/root/den/new.txt", "x", asUser), "writing beneath root's closed home, with parents");
  await refused(sbx.files.makeDir("/root/den-dir", asUser), "mkdir in root's closed home");
  await sbx.commands.run("ln -s /root /home/user/to-root", asUser);
  await refused(sbx.files.write("/home/user/to-root/den/new.txt", "x", asUser), "writing through a symlink to root's closed home");
  await refused(sbx.files.rename("/etc/passwd", "/home/user/passwd", asUser), "moving /etc/passwd away");
  await refused(sbx.files.remove("/etc/passwd", asUser), "removing /etc/passwd");

  step("as user, a signed upload of /etc/passwd is refused, a signed download of /etc/shadow too");
  const up = await sbx.uploadUrl("/etc/passwd", { ...asUser, useSignatureExpiration: 60 });
  const form = new FormData();
  form.append("file", new Blob([evil]), "passwd");
  let res = await fetch(up, { method: "POST", body: form });
  let body = await res.json();
  assert.equal(res.status, 403, `signed upload of /etc/passwd: ${res.status} ${JSON.stringify(body)}`);
  assert.match(body.message, /permission denied/);
  res = await fetch(await sbx.downloadUrl("/etc/shadow", asUser));
  body = await res.json();
  assert.equal(res.status, 403, `signed download of /etc/shadow: ${res.status} ${JSON.stringify(body)}`);

  step("nothing of root's changed: contents, owners, modes");
  assert.equal(await sbx.files.read("/etc/passwd", asRoot), passwd);
  assert.equal(await owners(), before);
  for (const p of ["/etc/newfile", "/root/den", "/root/den-dir", "/home/user/passwd"]) {
    assert.equal(await sbx.files.exists(p, asRoot), false, `${p} was made by a refused call`);
  }

  step("as user, a path through a file fails, and changes nothing");
  try {
    await sbx.files.write("/etc/passwd/x.txt", "x", asUser);
    assert.fail("writing /etc/passwd/x.txt worked");
  } catch (e) {
    assert.ok(e instanceof SandboxError, `writing /etc/passwd/x.txt: got ${e?.name}: ${e?.message}`);
    assert.match(e.message, /not a directory/);
  }
  assert.equal(await sbx.files.read("/etc/passwd", asRoot), passwd);
  assert.equal(await owners(), before);

  step("as user, missing directories are made by root and given to the user, as envd does");
  const rootDirs = (await sbx.commands.run("stat -c '%n %U:%G:%a' / /etc", asRoot)).stdout;
  const w0 = await sbx.files.write("/0/x.txt", "zero", asUser);
  assert.equal(w0.path, "/0/x.txt");
  assert.equal(await sbx.files.read("/0/x.txt", asUser), "zero");
  await sbx.files.write("/0/deep/er/y.txt", "y", { ...asUser, useOctetStream: true });
  const up0 = await sbx.uploadUrl("/0/signed/z.txt", { ...asUser, useSignatureExpiration: 60 });
  const form0 = new FormData();
  form0.append("file", new Blob(["z"]), "z.txt");
  res = await fetch(up0, { method: "POST", body: form0 });
  assert.equal(res.status, 200, `signed upload to /0/signed/z.txt: ${res.status}`);
  await res.arrayBuffer();
  assert.equal(await sbx.files.makeDir("/etc/den-dir/sub", asUser), true);
  await sbx.files.write("/etc/den/new.txt", "x", asUser);
  let r = await sbx.commands.run(
    "stat -c '%n %U:%G:%a' /0 /0/x.txt /0/deep /0/deep/er /0/deep/er/y.txt /0/signed /0/signed/z.txt /etc/den-dir /etc/den-dir/sub /etc/den /etc/den/new.txt",
    asRoot,
  );
  assert.equal(
    r.stdout,
    [
      "/0 user:user:755", "/0/x.txt user:user:644", "/0/deep user:user:755", "/0/deep/er user:user:755",
      "/0/deep/er/y.txt user:user:644", "/0/signed user:user:755", "/0/signed/z.txt user:user:644",
      "/etc/den-dir user:user:755", "/etc/den-dir/sub user:user:755", "/etc/den user:user:755", "/etc/den/new.txt user:user:644",
    ].join("\n") + "\n",
  );
  assert.equal((await sbx.commands.run("stat -c '%n %U:%G:%a' / /etc", asRoot)).stdout, rootDirs, "/ and /etc keep their owners and modes");
  assert.equal(await owners(), before);
  await sbx.commands.run("rm -r /0 /etc/den /etc/den-dir", asRoot);

  step("as user, the user's own files work, and are the user's");
  const w = await sbx.files.write("mine/deep/a.txt", "mine", asUser);
  assert.equal(w.path, "/home/user/mine/deep/a.txt");
  assert.equal(await sbx.files.read("mine/deep/a.txt", asUser), "mine");
  const info = await sbx.files.getInfo("mine/deep/a.txt", asUser);
  assert.equal(info.owner, "user");
  assert.equal(info.group, "user");
  assert.equal(await sbx.files.makeDir("mine/d", asUser), true);
  assert.equal((await sbx.files.getInfo("mine/d", asUser)).owner, "user");
  const up2 = await sbx.uploadUrl("mine/signed.txt", { ...asUser, useSignatureExpiration: 60 });
  const form2 = new FormData();
  form2.append("file", new Blob(["by URL"]), "signed.txt");
  res = await fetch(up2, { method: "POST", body: form2 });
  assert.equal(res.status, 200, `signed upload in the user's home: ${res.status}`);
  await res.arrayBuffer();
  assert.equal((await sbx.files.getInfo("mine/signed.txt", asUser)).owner, "user");
  await sbx.files.rename("mine/deep/a.txt", "mine/b.txt", asUser);
  assert.equal((await sbx.files.list("mine", asUser)).map((e) => e.name).join(","), "b.txt,d,deep,signed.txt");
  r = await sbx.commands.run("stat -c '%U:%G' /home/user/mine /home/user/mine/deep /home/user/mine/b.txt", asRoot);
  assert.equal(r.stdout, "user:user\nuser:user\nuser:user\n");
  await sbx.files.remove("mine", asUser);
  assert.equal(await sbx.files.exists("mine", asUser), false);

  step("as root, all of it works");
  assert.match(await sbx.files.read("/etc/shadow", asRoot), /^root:/);
  assert.equal(await sbx.files.read("/root/secret.txt", asRoot), "root only");
  assert.equal(await sbx.files.read("/tmp/top.txt", asRoot), "top");
  assert.ok((await sbx.files.list("/root", asRoot)).some((e) => e.name === "secret.txt"));
  await sbx.files.write("/etc/den-root.txt", "root's", asRoot);
  assert.equal((await sbx.files.getInfo("/etc/den-root.txt", asRoot)).owner, "root");
  await sbx.files.write("/etc/passwd", passwd, asRoot);
  r = await sbx.commands.run("stat -c '%U:%G:%a' /etc/passwd", asRoot);
  assert.equal(r.stdout, before.split("\n")[0].split(":").slice(0, 3).join(":") + "\n", "rewriting /etc/passwd as root keeps its owner and mode");
  await sbx.files.remove("/etc/den-root.txt", asRoot);
} finally {
  await sbx.kill();
}
console.log("ok");
