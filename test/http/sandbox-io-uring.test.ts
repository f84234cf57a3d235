import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * io_uring reaches a large part of the kernel through a path of its own (rings shared with the
 * kernel, its own workers), where a long line of privilege escalations was found; Docker's default
 * profile and Android deny it, and no Python task needs it. A task asks for a ring, and for the
 * other two calls on a descriptor it does not have: all ENOSYS, as on a kernel built without it
 * (docs/security.md, "Layers"). Before, the ring was created.
 */
const PROBE = `import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
NR_SETUP, NR_ENTER, NR_REGISTER = 425, 426, 427
def call(nr, *args):
    r = libc.syscall(nr, *args)
    return r if r >= 0 else errno.errorcode[ctypes.get_errno()]
def main(p=None):
    params = ctypes.create_string_buffer(120)
    return {"setup": call(NR_SETUP, 8, params), "enter": call(NR_ENTER, -1, 0, 0, 0, None, 0),
            "register": call(NR_REGISTER, -1, 0, None, 0)}
`;

const tenant = scopeHeaders({ app: "app1", space: "s1", user: "mallory" });

for (const sandbox of ["auto", "none"] as const) {
  describe(`no task gets an io_uring (SCRIPT_SANDBOX=${sandbox})`, {
    skip: process.getuid?.() !== 0 && "the filter is loaded by the zygote as root",
  }, () => {
    let server: TestServer;
    before(async () => {
      server = await startServer({ SCRIPT_SANDBOX: sandbox });
      const r = await upload(server, [{ name: "ring.py", content: PROBE }], { path: "/s" }, tenant);
      assert.equal(r.body.data[0].status, 0, r.text);
    });
    after(() => server.close());

    it("io_uring_setup, io_uring_enter and io_uring_register answer ENOSYS", async () => {
      const r = await server.call("POST", "/script/external/ring/run-sync?path=/s", {
        headers: tenant,
        body: {},
      });
      assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
      assert.deepEqual(r.body, { setup: "ENOSYS", enter: "ENOSYS", register: "ENOSYS" });
    });
  });
}
