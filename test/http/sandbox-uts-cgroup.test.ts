import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import { after, before, describe, it } from "node:test";
import type { PythonRunner } from "../../src/scripts/python-runner.ts";
import { scopeHeaders, startServer, type TestServer, upload } from "../helpers/server.ts";

/**
 * What a task learns of the service from its cgroups and its hostname, and whether one task can
 * leave a hostname for another, as tenants would upload them (docs/security.md, "Attacks the
 * suite performs"). Defence: a cgroup namespace each task enters once it is in its own cgroup and
 * before its code runs, and a UTS namespace per task, whose hostname is the zygote's `sluice`.
 */

/**
 * Reads what a task can of its cgroups (its `/proc/self/cgroup`, the cgroup mounts it sees) and
 * of its UTS namespace, then tries to set the hostname and the domain name (as the uid it runs as
 * it holds no capability, so the kernel should refuse; the test checks it does).
 */
const PROBE = `import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def attempt(call, value):
    raw = value.encode()
    if call(raw, len(raw)) == 0:
        return "set"
    return errno.errorcode[ctypes.get_errno()]
def main(p):
    out = {"cgroup": open("/proc/self/cgroup").read().splitlines(),
           "cgroupMounts": [line for line in open("/proc/self/mountinfo").read().splitlines()
                            if " - cgroup" in line],
           "hostname": socket.gethostname(), "domainname": open("/proc/sys/kernel/domainname").read().strip(),
           "uts": os.readlink("/proc/self/ns/uts"), "cgroupns": os.readlink("/proc/self/ns/cgroup")}
    out["sethostname"] = attempt(libc.sethostname, p["name"])
    out["setdomainname"] = attempt(libc.setdomainname, p["name"])
    out["after"] = socket.gethostname()
    return out
`;

const one = scopeHeaders({ app: "app1", space: "tenant-one", user: "mallory" });
const two = scopeHeaders({ app: "app2", space: "tenant-two", user: "alice" });

async function run(
  server: TestServer,
  headers: Record<string, string>,
  body: unknown,
  // biome-ignore lint/suspicious/noExplicitAny: a script's JSON value.
): Promise<any> {
  const r = await server.call("POST", "/script/external/probe/run-sync?path=/s", { headers, body });
  assert.equal(r.headers.get("x-task-status"), "SUCCESS", r.text);
  return r.body;
}

/** The path of each line of a `/proc/PID/cgroup` (`ID:CONTROLLERS:PATH`). */
const paths = (lines: string[]): string[] => lines.map((l) => l.split(":").slice(2).join(":"));

for (const sandbox of ["auto", "none"] as const) {
  describe(`a task learns nothing of the service's cgroups or host name (SCRIPT_SANDBOX=${sandbox})`, {
    skip: process.getuid?.() !== 0 && "per-task uids and namespaces need root",
  }, () => {
    let server: TestServer;
    let zygote: number;
    const hostName = os.hostname();
    before(async () => {
      server = await startServer({ SCRIPT_SANDBOX: sandbox });
      assert.equal(server.services.runner.sandbox, sandbox === "auto" ? "bwrap" : "uid");
      for (const h of [one, two]) {
        const r = await upload(server, [{ name: "probe.py", content: PROBE }], { path: "/s" }, h);
        assert.ok(
          r.body.data.every((i: { status: number }) => i.status === 0),
          r.text,
        );
      }
      const pid = (server.services.runner as PythonRunner).zygotePid();
      assert.ok(pid);
      zygote = pid;
    });
    after(() => server.close());

    it("its /proc/self/cgroup names no cgroup: neither its own slot nor the service's", async () => {
      const r = await run(server, one, { name: "probe" });
      // Before: `memory:/sluice/<uid block>/t<n>` (its slot, and the runner's block), and in the
      // hierarchies Sluice does not use the service's own cgroup (a unit's or a container's name).
      assert.deepEqual(
        paths(r.cgroup),
        r.cgroup.map(() => "/"),
        r.cgroup.join("\n"),
      );
      assert.notEqual(r.cgroupns, fs.readlinkSync(`/proc/${zygote}/ns/cgroup`), "its own");
      // Where the host's cgroup mounts are visible at all (SCRIPT_SANDBOX=none), none of their
      // roots is shown by name: the namespace shows them relative to its root.
      for (const line of r.cgroupMounts) assert.doesNotMatch(line.split(" ")[3], /sluice/, line);
      if (sandbox === "auto") assert.deepEqual(r.cgroupMounts, [], "no cgroup mount in bubblewrap");
    });

    it("it cannot set the hostname for a later task, and reads `sluice`, not the host's name", async () => {
      const name = `owned-${process.pid}`;
      const a = await run(server, one, { name });
      assert.equal(a.sethostname, "EPERM", "no capability over any UTS namespace");
      assert.equal(a.setdomainname, "EPERM");
      assert.equal(a.hostname, "sluice", "before: the host's own name with SCRIPT_SANDBOX=none");
      assert.equal(a.after, "sluice");
      const b = await run(server, two, { name: "second" });
      assert.equal(b.hostname, "sluice");
      assert.notEqual(b.domainname, name);
      // A UTS namespace of its own (no task shares one with another or with the zygote), and
      // the host's name was left alone by the zygote that made `sluice` its own.
      const z = fs.readlinkSync(`/proc/${zygote}/ns/uts`);
      assert.notEqual(a.uts, z);
      assert.notEqual(b.uts, z);
      assert.equal(os.hostname(), hostName);
    });
  });
}
