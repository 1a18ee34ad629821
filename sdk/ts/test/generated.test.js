// src/openapi.d.ts must be what openapi-typescript makes of
// api/openapi.yaml now: regenerate with `npm run gen` when this fails.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

test("the generated API types are current", () => {
  const out = join(mkdtempSync(join(tmpdir(), "den-ts-")), "openapi.d.ts");
  execFileSync("node_modules/.bin/openapi-typescript", ["../../api/openapi.yaml", "-o", out], { stdio: "ignore" });
  assert.ok(readFileSync(out, "utf8") === readFileSync("src/openapi.d.ts", "utf8"),
    "src/openapi.d.ts is stale: run `npm run gen` in sdk/ts and commit it");
});
