import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { OTHER_SCOPE, scopeHeaders, type TestServer, upload } from "../helpers/server.ts";
import { within } from "../helpers/wait.ts";
import { startWithWheels } from "../helpers/wheels.ts";

/**
 * A preloaded package that lets its zygote say ready and then never hear Node again (it puts a
 * pipe nobody writes to over the zygote's stdin): no child is ever forked. A task waiting for its
 * child still ends with its own time limit, and its slot goes to the next task, another tenant's
 * (docs/script-dependencies.md, "Warm start"). It waited for good before, holding its slot.
 */

const deafScript = `# /// script
# dependencies = ["sluice-deaf"]
# ///
import sluice_deaf

def main():
    return {}
`;

async function runSync(server: TestServer, name: string, scope = scopeHeaders()) {
  const r = await server.call("POST", `/script/external/${name}/run-sync`, {
    headers: scope,
    body: {},
  });
  return { status: r.headers.get("x-task-status"), body: r.body };
}

describe("a preloaded package that leaves its zygote deaf once ready", () => {
  let server: TestServer;
  let close: () => Promise<void>;
  before(async () => {
    ({ server, close } = await startWithWheels(
      [
        {
          name: "sluice-deaf",
          version: "1.0",
          topLevel: ["sluice_deaf"],
          files: {
            "sluice_deaf/__init__.py": "import os\n_R, _W = os.pipe()\nos.dup2(_R, 0)\n",
          },
        },
      ],
      // One slot: a task that keeps it keeps every tenant's tasks waiting.
      {
        MAX_RUN_S: "2",
        SCRIPT_CONCURRENCY: "1",
      },
    ));
  });
  after(() => close());

  it("ends its task with its timeout, and the slot serves another tenant", async () => {
    const r = await upload(server, [{ name: "deaf.py", content: deafScript }], {
      path: "/h",
      overwrite: "true",
    });
    assert.deepEqual(
      r.body.data.map((d: { status: number }) => d.status),
      [0],
      r.text,
    );
    const run = await within(runSync(server, "deaf"), 30_000, "the task ended");
    assert.equal(run.status, "FAILURE", JSON.stringify(run.body));
    assert.match(JSON.stringify(run.body), /timed out/);
    const other = await upload(
      server,
      [{ name: "plain.py", content: "def main():\n    return {'ok': True}\n" }],
      { path: "/h", overwrite: "true" },
      scopeHeaders(OTHER_SCOPE),
    );
    assert.equal(other.body.data[0].status, 0, other.text);
    const plain = await within(
      runSync(server, "plain", scopeHeaders(OTHER_SCOPE)),
      20_000,
      "plain",
    );
    assert.deepEqual(plain, { status: "SUCCESS", body: { ok: true } });
  });
});
