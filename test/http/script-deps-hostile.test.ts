import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";
import { writeWheel } from "../helpers/wheels.ts";

/**
 * Wheels a hostile index could serve (docs/security.md, "Script dependencies"): installing them
 * runs none of their code, and neither may starting the zygote of their environment, which is root
 * inside the sandbox (or on the host with SCRIPT_SANDBOX=none) whether or not it preloads.
 */
function hostileWheels(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "sluice-hostile-"));
  writeWheel(dir, {
    name: "sluice-startup",
    version: "1.0",
    topLevel: ["sluice_startup"],
    files: {
      "sluice_startup/__init__.py": "VALUE = 1\n",
      // site executes an `import` line of a .pth file when the interpreter starts.
      "sluice_startup.pth": "import sys; sys.sluice_pth_ran = True\n",
      "sitecustomize.py": "import sys\nsys.sluice_sitecustomize_ran = True\n",
      "usercustomize.py": "import sys\nsys.sluice_usercustomize_ran = True\n",
      // The zygote imports seccomp to deny user namespaces to every task: a fake one denies none.
      "seccomp.py": [
        "import sys",
        "sys.sluice_fake_seccomp = True",
        "ALLOW = MASKED_EQ = NE = 0",
        "def ERRNO(e): return 0",
        "def Arg(*a): return 0",
        "class SyscallFilter:",
        "    def __init__(self, *a): pass",
        "    def add_rule(self, *a): pass",
        "    def load(self): pass",
        "",
      ].join("\n"),
    },
  });
  // A wheel's scripts land in the environment's bin/: this one replaces its `python`.
  writeWheel(dir, {
    name: "sluice-interp",
    version: "1.0",
    topLevel: ["sluice_interp"],
    files: {
      "sluice_interp/__init__.py": "VALUE = 2\n",
      "sluice_interp-1.0.data/scripts/python":
        '#!/bin/sh\nexec /usr/bin/python3 -X sluice_owned "$@"\n',
    },
    executable: ["sluice_interp-1.0.data/scripts/python"],
  });
  return dir;
}

const probe = (project: string, module: string) => `# /// script
# dependencies = ["${project}"]
# ///
import ctypes, sys
import ${module}

def main():
    libc = ctypes.CDLL(None, use_errno=True)
    userns = "allowed" if libc.unshare(0x10000000) == 0 else "denied"
    return {
        "value": ${module}.VALUE,
        "pth": getattr(sys, "sluice_pth_ran", False),
        "sitecustomize": getattr(sys, "sluice_sitecustomize_ran", False),
        "usercustomize": getattr(sys, "sluice_usercustomize_ran", False),
        "fakeSeccomp": getattr(sys, "sluice_fake_seccomp", False),
        "xoptions": sorted(sys._xoptions),
        "userns": userns,
    }
`;

const clean = {
  pth: false,
  sitecustomize: false,
  usercustomize: false,
  fakeSeccomp: false,
  xoptions: [],
  userns: "denied",
};

async function runSync(server: TestServer, name: string) {
  const r = await server.call("POST", `/script/external/${name}/run-sync`, {
    headers: scopeHeaders(),
    body: {},
  });
  return { status: r.headers.get("x-task-status"), body: r.body };
}

for (const preload of ["false", "true"]) {
  describe(`a hostile wheel's environment (SCRIPT_ENV_PRELOAD=${preload})`, () => {
    let server: TestServer;
    let wheels: string;
    before(async () => {
      wheels = hostileWheels();
      server = await startServer({
        PIP_NO_INDEX: "1",
        PIP_FIND_LINKS: wheels,
        SCRIPT_ENV_PRELOAD: preload,
      });
    });
    after(async () => {
      await server.close();
      rmSync(wheels, { recursive: true, force: true });
    });

    it("runs no .pth, sitecustomize or fake seccomp of it in the zygote", async () => {
      const src = probe("sluice-startup", "sluice_startup");
      const r = await upload(server, [{ name: "startup.py", content: src }], { path: "/h" });
      assert.equal(r.body.data[0].status, 0, r.text);
      const run = await runSync(server, "startup");
      assert.equal(run.status, "SUCCESS", JSON.stringify(run.body));
      assert.deepEqual(run.body, { value: 1, ...clean });
    });

    it("starts the zygote with the service's interpreter, not one a wheel put in bin/", async () => {
      const src = probe("sluice-interp", "sluice_interp");
      const r = await upload(server, [{ name: "interp.py", content: src }], { path: "/h" });
      assert.equal(r.body.data[0].status, 0, r.text);
      const run = await runSync(server, "interp");
      assert.equal(run.status, "SUCCESS", JSON.stringify(run.body));
      assert.deepEqual(run.body, { value: 2, ...clean });
    });
  });
}
