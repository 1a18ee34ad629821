// The README's table names den's verbs as the CLI does: every `den ...`
// it lists is a command `den --help` shows, and every SDK method it
// lists exists.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Client } from "../dist/index.js";

const den = process.env.DEN_CLI ?? "../../bin/den";

function commands(group) {
  const out = execFileSync(den, [...(group ? [group] : []), "--help"], { encoding: "utf8" });
  const block = out.split("Available Commands:")[1]?.split("\n\n")[0] ?? "";
  return new Set(block.trim().split("\n").map((l) => l.trim().split(/\s+/)[0]));
}

test("the README's verb table matches the CLI and the SDK", () => {
  const top = commands("");
  const rows = readFileSync("README.md", "utf8").split("\n").filter((l) => l.startsWith("| `den"));
  assert.ok(rows.length >= 8, "no verb table in README.md");
  let checked = 0;
  for (const row of rows) {
    const [cli, sdk] = row.split("|").slice(1, 3);
    // "`den port expose`, `rm`, `url`": the words after a group's first
    // command are its subcommands; "`den exec`, `exec -d`": top level.
    let group = "";
    for (const m of cli.matchAll(/`([^`]+)`/g)) {
      const words = m[1].replace(/^den /, "").split(" ").filter((w) => /^[a-z][a-z-]*$/.test(w));
      if (words.length > 1) {
        group = words[0];
        assert.ok(commands(group).has(words[1]), `den ${words[0]} ${words[1]} in README.md is not a den command`);
      } else {
        assert.ok((group ? commands(group) : top).has(words[0]), `${m[1]} in README.md is not a den command`);
      }
      checked++;
    }
    for (const m of sdk.matchAll(/`([a-zA-Z]+)`/g)) {
      assert.equal(typeof Client.prototype[m[1]], "function", `${m[1]} in README.md is not a method of Client`);
    }
  }
  assert.ok(checked >= 20, `only ${checked} commands checked`);
});
