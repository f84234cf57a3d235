import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { systemClock } from "../../src/clock.ts";
import { createRunPreparer } from "../../src/runs/flow-run-prepare.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/types.ts";
import { NO_SCRIPT_FLOW } from "../helpers/flows.ts";
import { gate } from "../helpers/wait.ts";

/** A release is read from the store once, however many runs of it a worker starts at once. */
describe("run preparer: releases", () => {
  let store: OpenedStore;
  let dir: string;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-prepare-"));
    store = await openStore({ dataDir: dir });
  });
  after(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A preparer over the test's store with its own `flowRevision`. */
  const preparerOver = (flowRevision: Store["flowRevision"]) =>
    createRunPreparer({
      store: Object.create(store, { flowRevision: { value: flowRevision } }),
      config: { timeZone: "UTC" },
      clock: systemClock,
      nodeId: "n",
      cacheLocators: false,
    });
  const preparer = () => {
    let reads = 0;
    const p = preparerOver((elementId, version) => {
      reads++;
      return store.flowRevision(elementId, version);
    });
    return { p, reads: () => reads };
  };

  it("30 runs of one release starting together read it once", async () => {
    const scope = { app: "a", space: "s" };
    const folder = await store.ensureFolder(scope, "/p", 1);
    const { element, version } = await store.deployFlow({
      scope,
      folderId: folder.id,
      name: "f",
      revisionName: "r",
      flow: NO_SCRIPT_FLOW,
      configure: {},
      description: null,
      user: null,
      now: 1,
    });
    const { p, reads } = preparer();
    const rels = await Promise.all(
      Array.from({ length: 30 }, () => p.release(element.id, version)),
    );
    assert.equal(reads(), 1);
    assert.ok(rels.every((r) => r === rels[0] && r.version === version));
    await p.release(element.id, version);
    assert.equal(reads(), 1, "and kept");
  });

  it("a missing revision fails each run with its message, and is not cached", async () => {
    const { p, reads } = preparer();
    for (let i = 0; i < 2; i++)
      await assert.rejects(
        p.release("no-such-element", 3),
        /revision 3 of element no-such-element/,
      );
    assert.equal(reads(), 2);
  });

  it("a read under way still answers when a thousand other releases are read meanwhile", async () => {
    // The cache holds 1,000 releases: the read under way is its oldest entry when it fills.
    const slow = gate();
    const p = preparerOver((async (elementId: string) => {
      if (elementId === "slow") await slow.promise;
      return { flow: NO_SCRIPT_FLOW, configure: {} };
    }) as unknown as Store["flowRevision"]);
    const first = p.release("slow", 1);
    for (let i = 0; i < 1000; i++) await p.release(`other-${i}`, 1);
    slow.open();
    assert.equal((await first).version, 1);
  });
});
