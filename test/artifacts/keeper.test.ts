import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { createArtifactKeeper } from "../../src/artifacts/keeper.ts";
import { systemClock } from "../../src/clock.ts";
import type { ArtifactInfo, ArtifactSet, ArtifactStore } from "../../src/store/kysely-artifacts.ts";
import type { Run } from "../../src/store/types.ts";

/** The artifact store's contract in memory; `failAfter` files, putFile throws (a full disk). */
function memoryStore(failAfter = Number.POSITIVE_INFINITY) {
  const files = new Map<string, ArtifactInfo>();
  const sets = new Map<string, ArtifactSet>();
  const store: ArtifactStore = {
    async putFile(f) {
      if (files.size >= failAfter) throw new Error("disk full");
      files.set(`${f.runId}/${f.name}`, f);
    },
    async putSet(runId, set) {
      sets.set(runId, set);
    },
    async collected(runId) {
      return sets.has(runId);
    },
    async list(runId) {
      const mine = [...files.values()].filter((f) => f.runId === runId);
      return { files: mine, set: sets.get(runId) };
    },
    async info(runId, name) {
      return files.get(`${runId}/${name}`);
    },
    async get() {
      return undefined;
    },
    async deleteOf(runIds) {
      for (const [k, f] of files) if (runIds.includes(f.runId)) files.delete(k);
      for (const id of runIds) sets.delete(id);
    },
  };
  return { store, files, sets };
}

const silent = { error() {} };
const LIMITS = { maxFileBytes: 1000, maxRunBytes: 5000, maxFiles: 50 };

describe("the artifact keeper", () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-keeper-"));
  after(() => fs.rmSync(root, { recursive: true, force: true }));
  const dirWith = (name: string, n: number) => {
    const d = path.join(root, name);
    fs.mkdirSync(d);
    for (let i = 0; i < n; i++) fs.writeFileSync(path.join(d, `f${i}.txt`), `file ${i}`);
    return d;
  };

  it("a collection that fails half-way keeps no partial files: the list agrees with its set", async () => {
    const m = memoryStore(2);
    const run = { id: "r1" } as Run;
    const keeper = createArtifactKeeper({
      store: m.store,
      runs: { getRun: async () => run },
      clock: systemClock,
      logger: silent,
      limits: LIMITS,
    });
    await keeper.collect("r1", dirWith("half", 5));
    const { files, set } = await m.store.list("r1");
    assert.equal(set?.files, 0);
    assert.match(set?.skipped[0]?.reason ?? "", /the collection failed: disk full/);
    assert.deepEqual(files, [], "no file of a failed collection is listed");
  });

  it("a run deleted while its collection failed leaves no artifact rows behind", async () => {
    const m = memoryStore(2);
    const keeper = createArtifactKeeper({
      store: m.store,
      runs: { getRun: async () => undefined },
      clock: systemClock,
      logger: silent,
      limits: LIMITS,
    });
    await keeper.collect("r2", dirWith("gone", 5));
    assert.equal(m.files.size, 0, "no orphan files");
    assert.equal(m.sets.size, 0, "no orphan set");
  });
});
