import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { processesOf } from "../helpers/process-tree.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * Attack of issue 12, item 1, as a tenant would upload it: double-fork a daemon, disable the
 * task's own end-of-task sweep (replace os.kill), and let the daemon plant a file in the working
 * directory for the next tenant that gets the same uid, and read what that tenant writes.
 * Defence (docs/security.md): the uid is swept from outside the task whatever the task
 * reports, and handed out again only once nothing of it is left running.
 */
const ATTACK = `import os, time
def main(p=None):
    cwd = os.getcwd()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for _ in range(400):  # 20 s at most, so a failing test leaves nothing for long
                try:
                    with open(os.path.join(cwd, "planted.txt"), "w") as f:
                        f.write("from the attacker")
                    for name in os.listdir(cwd):
                        if name != "planted.txt":
                            with open(os.path.join(cwd, name)) as src:
                                stolen = src.read()
                            with open(os.path.join(cwd, "stolen.txt"), "w") as dst:
                                dst.write(stolen)
                except Exception:
                    pass
                time.sleep(0.05)
            os._exit(0)
        os._exit(0)
    os.kill = lambda *a, **k: None
    return os.getuid()
`;
const VICTIM = `import os
def main(p=None):
    with open("secret.txt", "w") as f:
        f.write("tenant two's secret")
    return {"uid": os.getuid(), "files": sorted(os.listdir("."))}
`;

/** Waits for a condition that the service makes true by itself: a record, not a fixed sleep. */
async function until(what: string, test: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`still not true after ${ms} ms: ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

describe("a task's leftovers do not outlive it", {
  skip: process.getuid?.() !== 0 && "uids need root",
}, () => {
  let server: TestServer;
  const attacker = scopeHeaders({ app: "app1", space: "tenant-one", user: "mallory" });
  const victim = scopeHeaders({ app: "app2", space: "tenant-two", user: "alice" });
  before(async () => {
    server = await startServer();
    for (const [h, name, content] of [
      [attacker, "attack.py", ATTACK],
      [victim, "victim.py", VICTIM],
    ] as const) {
      const r = await upload(server, [{ name, content }], { path: "/s" }, h);
      assert.equal(r.body.data[0].status, 0, r.text);
    }
  });
  after(() => server.close());

  it("a daemon that disabled the in-task sweep is killed, and the uid's next tenant sees nothing of it", async () => {
    const a = await server.call("POST", "/script/script/run-sync", {
      headers: attacker,
      body: { elementName: "attack", path: "/s" },
    });
    assert.equal(a.body.status, true, a.text);
    const uid = a.body.data as number;
    await until(`no process of uid ${uid} left`, () => processesOf(uid).length === 0);

    // Round-robin allocation: run the victim until it gets the attacker's uid.
    let seen: { uid: number; files: string[] } | undefined;
    for (let i = 0; i < 600 && seen?.uid !== uid; i++) {
      const v = await server.call("POST", "/script/script/run-sync", {
        headers: victim,
        body: { elementName: "victim", path: "/s" },
      });
      assert.equal(v.body.status, true, v.text);
      seen = v.body.data;
    }
    assert.equal(seen?.uid, uid, "the victim got the attacker's uid");
    assert.deepEqual(seen?.files, ["secret.txt"], "nothing planted, nothing stolen");
    // The victim's own child runs as the uid until it has exited; then nothing may be left.
    await until(
      `no process of uid ${uid} left after the victim`,
      () => processesOf(uid).length === 0,
    );
  });
});
