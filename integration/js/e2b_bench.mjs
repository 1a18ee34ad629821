// Times the official e2b SDK against dend for den's benchmark (bench/e2b.go):
// Sandbox.create → commands.run('true') done, and the commands.run round
// trip. Prints one JSON line of milliseconds.
//
//   E2B_API_URL=... E2B_SANDBOX_URL=... E2B_API_KEY=... N=20 node e2b_bench.mjs
import { Sandbox } from "e2b";

const n = Number(process.env.N ?? 20);
const create = [];
const run = [];
const now = () => performance.now();

// Warm the SDK's connections and code paths once.
const warm = await Sandbox.create({ timeoutMs: 600_000 });
await warm.commands.run("true");
await warm.kill();

for (let i = 0; i < n; i++) {
  const t0 = now();
  const sbx = await Sandbox.create({ timeoutMs: 600_000 });
  await sbx.commands.run("true");
  create.push(now() - t0);
  await sbx.kill();
}
const sbx = await Sandbox.create({ timeoutMs: 600_000 });
await sbx.commands.run("true");
for (let i = 0; i < n * 5; i++) {
  const t0 = now();
  await sbx.commands.run("true");
  run.push(now() - t0);
}
await sbx.kill();
console.log(JSON.stringify({ create, run }));
