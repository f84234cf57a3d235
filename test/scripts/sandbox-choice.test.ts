import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { loadConfig } from "../../src/config.ts";
import { createPythonRunner } from "../../src/scripts/python-runner.ts";
import { pythonDescendants } from "../helpers/process-tree.ts";

const FIX = /apt-get install bubblewrap.*SCRIPT_SANDBOX=none/s;

function recorder() {
  const lines: { level: string; obj: unknown; msg: string | undefined }[] = [];
  const at =
    (level: string) =>
    (obj: unknown, msg?: string): void => {
      lines.push({ level, obj, msg });
    };
  return {
    lines,
    logger: { info: at("info"), warn: at("warn"), error: at("error"), debug: at("debug") },
  };
}

let dataDir: string;
before(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), "sluice-sandbox-choice-"));
});
after(() => rm(dataDir, { recursive: true, force: true }));

function runnerWith(env: Record<string, string>, logger = recorder().logger) {
  const cfg = loadConfig({ SCRIPT_PREFORK: "1", ...env });
  return createPythonRunner({
    config: {
      python: cfg.python,
      limits: { outputBytes: 1000, resultBytes: 65536, maxRunS: 30 },
      dataDir,
    },
    logger,
  });
}

const task = {
  taskId: "t1",
  source: {
    name: "echo",
    kind: "module" as const,
    content: Buffer.from("def main(p):\n    return p\n"),
  },
  parameter: 7,
};

describe("sandbox choice (SCRIPT_SANDBOX)", () => {
  for (const [what, bwrap, problem] of [
    ["missing", "/nonexistent/bwrap", /\/nonexistent\/bwrap not found/],
    ["not working", "/bin/false", /\/bin\/false exited 1/],
  ] as const) {
    test(`auto, bubblewrap ${what}: every task is refused, no Python is started`, async () => {
      const rec = recorder();
      const runner = await runnerWith({ SCRIPT_BWRAP: bwrap }, rec.logger);
      try {
        assert.equal(runner.sandbox, "refused");
        assert.match(runner.refusal ?? "", problem);
        assert.match(runner.refusal ?? "", FIX);
        const error = rec.lines.find((l) => l.level === "error");
        assert.ok(error, "the refusal is logged as an error");
        assert.match(error.msg ?? "", /script tasks are refused/);
        assert.match(error.msg ?? "", FIX);

        const o = await runner.run(task);
        assert.equal(o.status, "FAILURE");
        assert.equal(o.error?.type, "SandboxUnavailable");
        assert.equal(o.error?.message, runner.refusal);
        assert.equal(runner.zygotePid(), undefined);
        assert.deepEqual(pythonDescendants(), []);
      } finally {
        await runner.close();
      }
    });
  }

  test("bwrap, bubblewrap missing: the service does not start", async () => {
    await assert.rejects(
      runnerWith({ SCRIPT_BWRAP: "/nonexistent/bwrap", SCRIPT_SANDBOX: "bwrap" }),
      /SCRIPT_SANDBOX=bwrap but bubblewrap does not work: \/nonexistent\/bwrap not found/,
    );
  });

  test("none, bubblewrap missing: accepted explicitly, tasks run with uid + rlimits", async () => {
    const rec = recorder();
    const runner = await runnerWith(
      { SCRIPT_BWRAP: "/nonexistent/bwrap", SCRIPT_SANDBOX: "none" },
      rec.logger,
    );
    try {
      assert.equal(runner.sandbox, process.getuid?.() === 0 ? "uid" : "none");
      assert.equal(runner.refusal, undefined);
      assert.ok(
        rec.lines.some((l) => l.level === "warn" && /SCRIPT_SANDBOX=none/.test(l.msg ?? "")),
      );
      const o = await runner.run(task);
      assert.equal(o.status, "SUCCESS", JSON.stringify(o.error));
      assert.equal(o.value, 7);
    } finally {
      await runner.close();
    }
  });

  test("SCRIPT_DISK_BYTES must be a whole number of bytes", () => {
    for (const bad of ["1.5", "-1", "lots"])
      assert.throws(() => loadConfig({ SCRIPT_DISK_BYTES: bad }), /SCRIPT_DISK_BYTES must be/);
    assert.equal(loadConfig({ SCRIPT_DISK_BYTES: "0" }).python.diskBytes, 0);
  });

  test("SCRIPT_BWRAP must be absolute", () => {
    assert.throws(
      () => loadConfig({ SCRIPT_BWRAP: "bwrap" }),
      /SCRIPT_BWRAP must be an absolute path/,
    );
  });
});
