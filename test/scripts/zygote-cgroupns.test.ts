import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { destroy, openChild } from "../../src/scripts/zygote-child.ts";
import { line, pollUntil, within } from "../helpers/wait.ts";

/**
 * docs/security.md, "Layers": a task's cgroup namespace is entered by its child when the task
 * arrives, after Node put the idle child in the task's cgroup, so its root is that cgroup and the
 * task reads `/` for it. Here the zygote alone (no bubblewrap, as SCRIPT_SANDBOX=none), its child
 * put by the test in a cgroup of the host's v1 memory hierarchy or of its cgroup2 hierarchy (which
 * needs no controller for a process to join it): the cgroup path the task reads is `/` in both.
 */
const ZYGOTE = fileURLToPath(new URL("../../src/scripts/python/zygote.py", import.meta.url));
const root = process.getuid?.() === 0;

const READ = Buffer.from(
  "import os\ndef main(p):\n    return {'cgroup': open('/proc/self/cgroup').read().splitlines(),\n" +
    "            'ns': os.readlink('/proc/self/ns/cgroup')}\n",
).toString("base64");

/** Where the host mounts the hierarchy of `type` (`cgroup` with `option` among its options). */
function mountOf(type: string, option?: string): string | undefined {
  for (const l of fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const f = l.split(" ");
    const rest = f.slice(f.indexOf("-") + 1);
    if (rest[0] === type && (!option || (rest[2] ?? "").split(",").includes(option))) return f[4];
  }
  return undefined;
}

const hierarchies = [
  { name: "v1 memory", mount: mountOf("cgroup", "memory"), line: /^\d+:memory:/ },
  { name: "v2", mount: mountOf("cgroup2"), line: /^0::/ },
];

describe("a task's cgroup namespace has its task's cgroup as root", {
  skip: !root && "namespaces need root",
}, () => {
  let zygote: ChildProcess | undefined;
  after(async () => {
    if (zygote && zygote.exitCode === null && zygote.signalCode === null) {
      zygote.kill("SIGKILL");
      await once(zygote, "exit");
    }
  });

  for (const h of hierarchies) {
    it(`${h.name}: the task reads \`/\`, not the cgroup its child was put in`, {
      skip: !h.mount && `no ${h.name} hierarchy mounted`,
    }, async () => {
      const z = spawn(
        "/usr/bin/python3",
        ["-I", ZYGOTE, "--ns=ipc,mnt,pid,uts,cgroup", "--disk=0", "--tasks=/tmp", "--strict"],
        { stdio: ["pipe", "pipe", "inherit"] },
      );
      zygote = z;
      const out = z.stdout as NonNullable<typeof z.stdout>;
      const ready = await line(out, /^ready \d+ pidns$/);
      assert.ok(ready);
      const forked = line(out, /^c \d+/);
      z.stdin?.write("f 1\n");
      const [, pid, task, result, out2, err] = (await forked).split(" ").map(Number);
      const dir = `${h.mount}/sluice-test-${process.pid}-ns`;
      fs.mkdirSync(dir);
      try {
        fs.writeFileSync(`${dir}/cgroup.procs`, String(pid)); // as Node joins an idle child
        const child = openChild(pid as number, [task, result, out2, err] as number[]);
        assert.ok(child, "the child's pipes");
        const answer = line(child.result, /./);
        const message = { id: "t", name: "read", kind: "module", src: READ, param: null };
        child.task.end(
          `${JSON.stringify({ ...message, env: {}, cwd: "/tmp", lim: { cpu: 10 } })}\n`,
        );
        const r = JSON.parse(await answer);
        destroy(child);
        assert.equal(r.ok, true, JSON.stringify(r));
        const lines = r.value.cgroup as string[];
        const mine = lines.find((l) => h.line.test(l));
        assert.equal(mine?.slice(mine.indexOf(":/") + 1), "/", lines.join("\n"));
        assert.notEqual(r.value.ns, fs.readlinkSync(`/proc/${z.pid}/ns/cgroup`));
        await within(line(out, new RegExp(`^x ${pid} 0$`)), 10_000, "the child reaped");
      } finally {
        z.kill("SIGKILL");
        await once(z, "exit");
        // The child goes with its zygote (its parent-death signal); a cgroup with a process
        // left in it cannot be removed.
        await pollUntil(
          () => fs.readFileSync(`${dir}/cgroup.procs`, "utf8"),
          (procs) => procs === "",
          `${dir} empty`,
        );
        fs.rmdirSync(dir);
      }
    });
  }
});
