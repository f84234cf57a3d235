import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import {
  type ArtifactLimits,
  collectFiles,
  type FoundFile,
  readBounded,
} from "../../src/artifacts/collect.ts";
import { nameProblem } from "../../src/artifacts/names.ts";
import { within } from "../helpers/wait.ts";

const LIMITS: ArtifactLimits = { maxFileBytes: 1000, maxRunBytes: 5000, maxFiles: 50 };

async function collect(dir: string, limits = LIMITS) {
  const files: FoundFile[] = [];
  const out = await within(
    collectFiles(dir, limits, async (f) => {
      files.push(f);
    }),
    10_000,
    "the collection ends",
  );
  const byName = Object.fromEntries(files.map((f) => [f.name, f]));
  const skipped = Object.fromEntries(out.skipped.map((s) => [s.name, s.reason]));
  return { out, files, byName, skipped };
}

describe("collecting a run's files", () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-artifacts-"));
  after(() => fs.rmSync(root, { recursive: true, force: true }));
  const dirOf = (name: string) => {
    const d = path.join(root, name);
    fs.mkdirSync(d);
    return d;
  };

  it("a hostile directory: links, a FIFO, a socket and hard links are skipped, nothing blocks", async () => {
    const secret = path.join(root, "secret.txt");
    fs.writeFileSync(secret, "the host's secret");
    const outside = dirOf("outside");
    fs.writeFileSync(path.join(outside, "also-secret.txt"), "secret too");
    const d = dirOf("hostile");
    fs.writeFileSync(path.join(d, "ok.txt"), "hello");
    fs.symlinkSync("/etc/shadow", path.join(d, "shadow"));
    fs.symlinkSync(secret, path.join(d, "secret-link.txt"));
    fs.symlinkSync(outside, path.join(d, "linked-dir"));
    execFileSync("mkfifo", [path.join(d, "pipe")]);
    fs.linkSync(secret, path.join(d, "hard.txt"));
    const sock = path.join(d, "sock");
    const net = await import("node:net");
    const srv = net.createServer().listen(sock);
    await new Promise((r) => srv.once("listening", r));
    try {
      const { files, byName, skipped } = await collect(d);
      assert.deepEqual(
        files.map((f) => f.name),
        ["ok.txt"],
      );
      assert.equal(byName["ok.txt"]?.bytes.toString(), "hello");
      assert.equal(byName["ok.txt"]?.contentType, "text/plain; charset=utf-8");
      assert.equal(
        byName["ok.txt"]?.sha256,
        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
      );
      assert.deepEqual(skipped, {
        shadow: "symbolic link",
        "secret-link.txt": "symbolic link",
        "linked-dir": "symbolic link",
        pipe: "not a regular file",
        sock: "not a regular file",
        "hard.txt": "hard link",
      });
    } finally {
      srv.close();
    }
  });

  it("what was a file when listed is checked again when opened: a link or FIFO swapped in is refused", async () => {
    const d = dirOf("swapped");
    const lim = { maxFileBytes: 1000, runBytesLeft: 1000 };
    fs.symlinkSync("/etc/shadow", path.join(d, "link"));
    execFileSync("mkfifo", [path.join(d, "fifo")]);
    fs.writeFileSync(path.join(d, "real"), "abc");
    const real = fs.realpathSync(d);
    assert.deepEqual(await readBounded(path.join(real, "link"), lim), { reason: "symbolic link" });
    assert.deepEqual(await within(readBounded(path.join(real, "fifo"), lim), 5000, "no block"), {
      reason: "not a regular file",
    });
    assert.equal(String(await readBounded(path.join(real, "real"), lim)), "abc");
    // Reached through a linked directory: the descriptor's real path is elsewhere.
    fs.symlinkSync(real, path.join(root, "via-link"));
    assert.deepEqual(await readBounded(path.join(root, "via-link", "real"), lim), {
      reason: "outside the working directory",
    });
  });

  it("nested files get relative names; the limits skip what is over them, with the reason", async () => {
    const d = dirOf("limits");
    fs.mkdirSync(path.join(d, "sub", "deeper"), { recursive: true });
    fs.writeFileSync(path.join(d, "sub", "deeper", "a.csv"), "a,b\n1,2\n");
    fs.writeFileSync(path.join(d, "big.bin"), Buffer.alloc(1001));
    for (let i = 0; i < 6; i++) fs.writeFileSync(path.join(d, `f${i}.json`), "x".repeat(900));
    const { out, byName, skipped } = await collect(d);
    assert.equal(byName["sub/deeper/a.csv"]?.contentType, "text/csv; charset=utf-8");
    assert.equal(skipped["big.bin"], "over ARTIFACT_MAX_FILE_BYTES (1000)");
    // 8 + 5 × 900 fit in 5000 bytes; the sixth is over the run's limit.
    const overRun = Object.entries(skipped).filter(([, r]) => r === "over ARTIFACT_MAX_RUN_BYTES");
    assert.equal(overRun.length, 1);
    assert.equal(out.files, 6);
    assert.ok(out.bytes <= 5000);

    const few = await collect(d, { ...LIMITS, maxFiles: 2, maxRunBytes: 1e6 });
    assert.equal(few.out.files, 2);
    assert.equal(
      Object.values(few.skipped).filter((r) => r === "over ARTIFACT_MAX_FILES (2)").length,
      6, // 8 regular files, 2 kept
    );
  });

  it("a directory with far more entries than the limits allow is walked only so far", async () => {
    const d = dirOf("many");
    for (let i = 0; i < 300; i++) fs.writeFileSync(path.join(d, `e${i}`), "");
    const { out } = await collect(d, { ...LIMITS, maxFiles: 10 });
    assert.equal(out.files, 10);
    assert.equal(out.skipped.length, 100);
    assert.ok(out.skippedMore >= 1, "what was not listed is counted");
  });

  it("names: traversal, absolute paths, empty segments and control characters are refused", () => {
    for (const bad of [
      "",
      "../etc/passwd",
      "a/../../b",
      "/etc/passwd",
      "a//b",
      "./a",
      "a\\b",
      "a\nb",
      "a\u0000b",
      "a\u009b31mb",
      "a\u0085b",
    ])
      assert.ok(nameProblem(bad), `${JSON.stringify(bad)} is refused`);
    for (const good of ["a.txt", "sub/dir/b.csv", "..a", "a..b", "名字.txt"])
      assert.equal(nameProblem(good), undefined, good);
  });

  it("a refused name is listed without its control characters: a terminal showing it is not driven by it", async () => {
    const d = dirOf("escapes");
    const names = ["red\u001b[31mtext", "bell\u0007", "csi\u009b2J", "line\nfeed"];
    for (const n of names) fs.writeFileSync(path.join(d, n), "x");
    const { out, files } = await collect(d);
    assert.deepEqual(files, []);
    const shown = out.skipped.map((s) => s.name).sort();
    assert.deepEqual(shown, ["bell\\x07", "csi\\x9b2J", "line\\x0afeed", "red\\x1b[31mtext"]);
  });
});
