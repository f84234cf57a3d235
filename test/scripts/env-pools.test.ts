import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { EnvManifest } from "../../src/scripts/env-build.ts";
import { EnvPools } from "../../src/scripts/python-runner-envs.ts";
import type { ZygotePool } from "../../src/scripts/python-runner-zygote.ts";
import { type UidSlice, UidSlices } from "../../src/scripts/uid-slices.ts";

const silent = { info() {}, warn() {}, error() {}, debug() {} };

const manifest = (hash: string): EnvManifest => ({
  hash,
  packages: [],
  declared: [],
  modules: ["m"],
});

/** Zygotes that only record their start and stop; `refuse`: the environment whose starts with a slice fail. */
function harness(o: { max: number; slices: number; refuse?: string }) {
  const events: string[] = [];
  const retired: UidSlice[] = [];
  const pools = new EnvPools({
    max: o.max,
    logger: silent,
    slices: new UidSlices(1000, o.slices, 5),
    retire: (s) => {
      retired.push(s);
      events.push(`retire ${s.outer}`);
    },
    start: async (_dir, m, slice) => {
      if (slice && m.hash === o.refuse) throw new Error("its package ended it");
      events.push(`start ${m.hash} ${slice ? slice.outer : "plain"}`);
      return {
        close: async () => {
          events.push(`stop ${m.hash}`);
        },
      } as unknown as ZygotePool;
    },
  });
  return { pools, events, retired };
}

describe("zygotes of environments and their uid slices", () => {
  it("gives each preloading zygote a slice, and its tasks that slice's uids", async () => {
    const { pools, events } = harness({ max: 2, slices: 2 });
    const a = await pools.acquire("/a", manifest("a"), true);
    const b = await pools.acquire("/b", manifest("b"), true);
    assert.deepEqual(a.uids, { base: 1001, count: 4 });
    assert.deepEqual(b.uids, { base: 1006, count: 4 });
    assert.deepEqual(events, ["start a 1000", "start b 1005"]);
  });

  it("stops an idle zygote and retires its slice before another zygote gets it", async () => {
    const { pools, events } = harness({ max: 1, slices: 1 });
    (await pools.acquire("/a", manifest("a"), true)).release();
    const b = await pools.acquire("/b", manifest("b"), true);
    assert.deepEqual(b.uids, { base: 1001, count: 4 });
    assert.deepEqual(events, ["start a 1000", "stop a", "retire 1000", "start b 1000"]);
  });

  it("starts a plain zygote when every slice serves a zygote a task holds", async () => {
    const { pools, events } = harness({ max: 1, slices: 1 });
    const a = await pools.acquire("/a", manifest("a"), true);
    const b = await pools.acquire("/b", manifest("b"), true);
    assert.equal(b.uids, undefined);
    assert.deepEqual(events, ["start a 1000", "start b plain"]);
    a.release();
    b.release();
  });

  it("runs a task of a shared directory on a plain zygote beside the preloading one", async () => {
    const { pools, events } = harness({ max: 2, slices: 2 });
    await pools.acquire("/a", manifest("a"), true);
    const shared = await pools.acquire("/a", manifest("a"), false);
    assert.equal(shared.uids, undefined);
    assert.deepEqual(events, ["start a 1000", "start a plain"]);
  });

  it("runs an environment whose preloading zygote fails on a plain one, and still preloads others", async () => {
    const { pools, events, retired } = harness({ max: 2, slices: 2, refuse: "a" });
    const a = await pools.acquire("/a", manifest("a"), true);
    assert.equal(a.uids, undefined);
    assert.equal(retired.length, 1); // the slice it would have had went back, emptied
    const b = await pools.acquire("/b", manifest("b"), true);
    assert.deepEqual(b.uids, { base: 1006, count: 4 });
    assert.deepEqual(events, ["retire 1000", "start a plain", "start b 1005"]);
  });

  it("retires every slice at close", async () => {
    const { pools, retired } = harness({ max: 2, slices: 2 });
    await pools.acquire("/a", manifest("a"), true);
    await pools.acquire("/b", manifest("b"), true);
    await pools.close();
    assert.deepEqual(retired.map((s) => s.outer).sort(), [1000, 1005]);
  });
});
