import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { loadConfig } from "../src/config.ts";
import { withoutPassword } from "../src/config-limits.ts";
import { StartupError } from "../src/errors.ts";

/**
 * Every setting of the README's configuration table with a number or a yes/no for its default
 * refuses a value it cannot take, naming itself and what was given (docs/operations.md,
 * "Start-up"); none quietly falls back to its default or takes a negative.
 */
const README = fs.readFileSync(path.join(import.meta.dirname, "../README.md"), "utf8");
const section = README.slice(README.indexOf("## Configuration"), README.indexOf("## Architecture"));

function settings(): { key: string; fallback: string }[] {
  const out: { key: string; fallback: string }[] = [];
  for (const row of section.split("\n").filter((l) => l.startsWith("| `"))) {
    const [keys = "", defaults = ""] = row.split(" | ");
    const names = [...keys.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1] ?? "");
    const values = defaults.split(" / ").map((v) => v.replaceAll("`", "").trim());
    names.forEach((key, i) => {
      out.push({ key, fallback: values.length === names.length ? (values[i] ?? "") : "" });
    });
  }
  return out;
}

const numeric = (fallback: string) =>
  /^(\d+( |$)|half of|a quarter of|a tenth of|4 ×|LIMIT_)/.test(fallback);
const yesNo = (fallback: string) => /^(true|false)$/.test(fallback);

describe("the configuration refuses what it cannot take", () => {
  const all = settings();
  const numbers = all.filter((s) => numeric(s.fallback)).map((s) => s.key);
  const switches = all.filter((s) => yesNo(s.fallback)).map((s) => s.key);

  it("reads the README's table (numbers and switches found)", () => {
    assert.ok(numbers.length > 60, numbers.join(" "));
    assert.ok(numbers.includes("PORT") && numbers.includes("LIMIT_QUEUED_RUNS_PER_APP"));
    assert.deepEqual(switches.sort(), [
      "FLOW_HTTP_ALLOW_PRIVATE",
      "SCRIPT_ENV_PRELOAD",
      "SCRIPT_NETWORK",
      "WEBHOOK_ALLOW_PRIVATE",
    ]);
  });

  for (const bad of ["abc", "-5", "1.5", "1e400"])
    it(`every number setting refuses "${bad}", naming itself`, () => {
      for (const key of numbers)
        assert.throws(
          () => loadConfig({ [key]: bad }),
          (err: Error) =>
            err instanceof StartupError &&
            err.message.includes(`config: ${key} `) &&
            err.message.includes(`"${bad}"`),
          `${key}=${bad}`,
        );
    });

  it("every yes/no setting refuses a typo, and takes true/false, 1/0, yes/no, on/off", () => {
    for (const key of switches) {
      assert.throws(() => loadConfig({ [key]: "ture" }), new RegExp(`${key} .*"ture"`));
      for (const yes of ["true", "1", "yes", "on", "TRUE"]) loadConfig({ [key]: yes });
      for (const no of ["false", "0", "no", "off"]) loadConfig({ [key]: no });
    }
    assert.equal(loadConfig({ SCRIPT_NETWORK: "on" }).python.network, true);
    assert.equal(
      loadConfig({ WEBHOOK_ALLOW_PRIVATE: "off" }).flowConfig.allowPrivateWebhooks,
      false,
    );
  });

  it("PORT is a port, SHUTDOWN_GRACE_S at most a day", () => {
    assert.throws(() => loadConfig({ PORT: "65536" }), /PORT .*"65536"/);
    assert.equal(loadConfig({ PORT: "0" }).port, 0);
    assert.equal(loadConfig({}).shutdownGraceS, 30);
    assert.throws(() => loadConfig({ SHUTDOWN_GRACE_S: "86401" }), /SHUTDOWN_GRACE_S/);
  });

  it("LOG_LEVEL is one of pino's levels", () => {
    assert.throws(() => loadConfig({ LOG_LEVEL: "verbose" }), /LOG_LEVEL .*"verbose"/);
    assert.equal(loadConfig({ LOG_LEVEL: "debug" }).logLevel, "debug");
  });

  it("DATABASE_URL is PostgreSQL's or unset, and a refusal hides its password", () => {
    assert.throws(
      () => loadConfig({ DATABASE_URL: "mysql://u:hunter2@db/x" }),
      (err: Error) =>
        err.message.includes("mysql://u:***@db/x") && !err.message.includes("hunter2"),
    );
    assert.throws(
      () => loadConfig({ DATABASE_URL: "sluice:hunter2@db" }),
      (err: Error) => err.message.includes('"***@db"') && !err.message.includes("hunter2"),
    );
    // pg takes a password from the query string too (`?password=`).
    assert.equal(
      withoutPassword("postgres://u@db/x?sslmode=require&password=hunter2"),
      "postgres://u@db/x?sslmode=require&password=***",
    );
    assert.equal(withoutPassword("postgres://u:a%40b@db/x"), "postgres://u:***@db/x");
    assert.equal(loadConfig({ DATABASE_URL: "postgresql://db/x" }).mode, "cluster");
    assert.equal(loadConfig({ DATABASE_URL: "" }).mode, "embedded");
  });
});
