import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * The kernel's keyrings are not namespaced: a uid's user keyring (`@u`) lives as long as the
 * kernel, whatever pid, IPC or mount namespace its processes were in, and every later process
 * of that uid possesses it. Task uids are handed to other tasks, other tenants' included, once
 * swept (docs/security.md, "The end of a task"). So a key one tenant's task adds there is read
 * by whichever task gets the uid next. Defence: the zygote's seccomp filter answers ENOSYS to
 * `add_key`, `request_key` and `keyctl` (docs/security.md, "Layers").
 */

/** Tenant one adds a key holding a secret to its uid's user keyring, and one to its session's. */
const PLANT = `import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
NR_ADD_KEY = 248
def add(ring, name, secret):
    kid = libc.syscall(NR_ADD_KEY, b"user", name.encode(), secret.encode(), len(secret), ctypes.c_int(ring))
    return kid if kid >= 0 else errno.errorcode[ctypes.get_errno()]
def main(p):
    return {"uid": os.getuid(), "user": add(-4, "loot", p["secret"]),
            "session": add(-3, "loot-ses", p["secret"])}
`;

/** Any later task looks the key up in its uid's user keyring and reads it. */
const READ = `import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
NR_KEYCTL, KEYCTL_SEARCH, KEYCTL_READ = 250, 10, 11
def main(p=None):
    kid = libc.syscall(NR_KEYCTL, KEYCTL_SEARCH, ctypes.c_int(-4), b"user", b"loot", 0)
    if kid < 0:
        return {"uid": os.getuid(), "read": None, "error": errno.errorcode[ctypes.get_errno()]}
    buf = ctypes.create_string_buffer(256)
    n = libc.syscall(NR_KEYCTL, KEYCTL_READ, kid, buf, 256)
    return {"uid": os.getuid(), "read": buf.raw[:max(n, 0)].decode()}
`;

const one = scopeHeaders({ app: "app1", space: "tenant-one", user: "mallory" });
const two = scopeHeaders({ app: "app2", space: "tenant-two", user: "alice" });

async function run(
  server: TestServer,
  headers: Record<string, string>,
  name: string,
  body: unknown,
  // biome-ignore lint/suspicious/noExplicitAny: a script's JSON value.
): Promise<any> {
  const r = await server.call("POST", `/script/external/${name}/run-sync?path=/s`, {
    headers,
    body,
  });
  assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
  return r.body;
}

for (const sandbox of ["auto", "none"] as const) {
  describe(`no task reads a key an earlier task of its uid left (SCRIPT_SANDBOX=${sandbox})`, {
    skip: process.getuid?.() !== 0 && "per-task uids need root",
  }, () => {
    let server: TestServer;
    before(async () => {
      server = await startServer({ SCRIPT_SANDBOX: sandbox });
      for (const [h, name, content] of [
        [one, "plant.py", PLANT],
        [two, "read.py", READ],
      ] as const) {
        const r = await upload(server, [{ name, content }], { path: "/s" }, h);
        assert.equal(r.body.data[0].status, 0, r.text);
      }
    });
    after(() => server.close());

    it("a key added by one tenant is not found by the other tenant's task that gets its uid", async () => {
      const secret = `secret-${randomBytes(8).toString("hex")}`;
      const planted = await run(server, one, "plant", { secret });
      // Uids are handed out in turn: the reader gets the planter's uid within one round of the
      // block (at most its size, 256 with these settings, plus the tasks under way).
      let got: { uid: number; read: string | null; error?: string } | undefined;
      for (let i = 0; i < 600 && got?.uid !== planted.uid; i++)
        got = await run(server, two, "read", {});
      assert.equal(got?.uid, planted.uid, "the reader got the planter's uid");
      assert.equal(got?.read, null, "the other tenant reads nothing");
      assert.deepEqual(
        { user: planted.user, session: planted.session },
        { user: "ENOSYS", session: "ENOSYS" },
        "no task adds a key",
      );
      assert.equal(got?.error, "ENOSYS");
    });
  });
}
