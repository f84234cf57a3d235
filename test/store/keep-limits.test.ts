import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { SluiceError } from "../../src/errors.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { ScriptPin } from "../../src/store/revision-types.ts";
import type { Scope } from "../../src/store/types.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";

/**
 * What a flow and a script keep (docs/dataflow-service.md, "How many revisions are kept";
 * docs/script-service.md, "How many versions are kept"), in both dialects: the oldest revisions
 * and versions nothing needs are removed in the transaction that adds one past the bound.
 */

const SCOPE: Scope = { app: "app1", space: "space1" };
const OTHER: Scope = { app: "app1", space: "space2" };
const T0 = 1_700_000_000_000;

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`kept revisions and script versions (${dialect})`, () => {
    let store: OpenedStore;
    let dataDir: string;
    let folder: string;
    let otherFolder: string;

    before(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-keep-"));
      const databaseUrl =
        dialect === "postgres" ? await (await startPostgres()).createDatabase() : undefined;
      store = await openStore({ databaseUrl, dataDir });
      folder = (await store.ensureFolder(SCOPE, "/k", T0)).id;
      otherFolder = (await store.ensureFolder(OTHER, "/k", T0)).id;
    });
    after(async () => {
      await store?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    const deploy = (
      name: string,
      opts: { release?: boolean; keep?: number; pins?: ScriptPin[]; scope?: Scope } = {},
    ) =>
      store.deployFlow({
        scope: opts.scope ?? SCOPE,
        folderId: opts.scope === OTHER ? otherFolder : folder,
        name,
        revisionName: "r",
        flow: { vertexes: [], edges: [] },
        configure: {},
        description: null,
        user: null,
        now: T0,
        release: opts.release ?? true,
        pins: opts.pins ?? null,
        ...(opts.keep === undefined ? {} : { keepRevisions: opts.keep }),
      });
    const revisions = async (elementId: string) =>
      (await store.flowRevisions(elementId, 1000, 0)).items.map((r) => r.version);
    const upload = (name: string, n: number, keep?: number) =>
      store.putScript(
        {
          scope: SCOPE,
          folderId: folder,
          name,
          kind: "module",
          content: new TextEncoder().encode(`def main():\n    return ${n}\n`),
          now: T0 + n,
          ...(keep === undefined ? {} : { keepVersions: keep }),
        },
        true,
      );
    const scriptVersions = async (elementId: string) =>
      (await store.scriptVersions(elementId, 1000, 0)).items.map((v) => v.version);
    const scriptId = async (name: string) => {
      const [el] = await store.findElements(SCOPE, { type: "PY", name, folderId: folder });
      assert.ok(el, name);
      return el.id;
    };
    const pin = (elementId: string, version: number): ScriptPin => ({
      nodeId: `n${version}`,
      elementId,
      elementName: "s",
      path: "/k",
      version,
      sha256: "x",
    });

    it("a deploy past the bound removes the oldest past revisions, never the release, a staged one or one an unfinished run uses", async () => {
      const { element } = await deploy("a", { keep: 3 });
      await deploy("a", { release: false, keep: 3 }); // 2: staged
      await deploy("a", { keep: 3 });
      await deploy("a", { keep: 3 }); // 4: version 1 goes
      assert.deepEqual(await revisions(element.id), [4, 3, 2]);

      const run = newRun({ elementId: element.id, elementType: "DPL", version: "3" });
      await store.insertRun(run);
      await deploy("a", { keep: 3 }); // 5: 3 is in use, so 4 goes
      assert.deepEqual(await revisions(element.id), [5, 3, 2]);
      await store.endRun(run.id, { status: "SUCCESS", endTime: T0, summary: null });
      const sixth = await deploy("a", { keep: 3 });
      assert.equal(sixth.version, 6);
      assert.deepEqual(await revisions(element.id), [6, 5, 2]);
      assert.equal(sixth.element.releaseVersion, 6);

      // Nothing of another flow or another scope is touched, and no bound is no removal.
      const b = await deploy("b");
      const elsewhere = await deploy("a", { scope: OTHER });
      for (let i = 0; i < 4; i++) {
        await deploy("b", { keep: 0 });
        await deploy("a", { scope: OTHER });
      }
      assert.deepEqual(await revisions(b.element.id), [5, 4, 3, 2, 1]);
      assert.deepEqual(await revisions(elsewhere.element.id), [5, 4, 3, 2, 1]);
      assert.deepEqual(
        await store.keptVersions("DPL", element.id, [1, 2, 3, 4, 5, 6, 7]),
        new Set([2, 5, 6]),
      );
    });

    it("a deploy past the bound with nothing to remove throws 28010005 and stores nothing", async () => {
      const { element } = await deploy("staged", { release: false, keep: 2 });
      await deploy("staged", { release: false, keep: 2 });
      for (const release of [false, true]) {
        await assert.rejects(
          deploy("staged", { release, keep: 2 }),
          (err: unknown) => err instanceof SluiceError && err.code === 28010005,
        );
      }
      assert.deepEqual(await revisions(element.id), [2, 1]);
      const el = await store.elementById(SCOPE, element.id);
      assert.equal(el?.releaseVersion, null);
      // Without a bound the same deploy is stored, numbered on from the last one kept.
      assert.equal((await deploy("staged", { release: false })).version, 3);
    });

    it("an upload past the bound removes the oldest versions that are not newest, pinned or run by an unfinished task", async () => {
      assert.equal(await upload("s", 1, 3), "created");
      const s = await scriptId("s");
      const flow = await deploy("pins-s", { pins: [pin(s, 1)] });
      await upload("s", 2, 3);
      await upload("s", 3, 3);
      const task = newRun({ elementId: s, elementType: "PY", version: "2" });
      await store.insertRun(task);
      assert.equal(await upload("s", 4, 3), "overwritten");
      assert.deepEqual(await scriptVersions(s), [4, 2, 1]);
      await upload("s", 5, 3);
      assert.deepEqual(await scriptVersions(s), [5, 2, 1]);

      await store.endRun(task.id, { status: "SUCCESS", endTime: T0, summary: null });
      await store.changeRelease({
        elementId: flow.element.id,
        action: "ACTIVATE",
        status: "APPROVED",
        version: flow.version,
        pins: [pin(s, 5)],
        user: null,
        now: T0,
      });
      await upload("s", 6, 3); // version 1 is no longer pinned
      assert.deepEqual(await scriptVersions(s), [6, 5, 2]);
      assert.equal((await store.scriptVersion(s, null))?.version, 6);
      assert.deepEqual(await store.keptVersions("PY", s, [1, 2, 5, 6, 7]), new Set([2, 5, 6]));
    });

    it("an upload with every older version needed is refused (full) and stores nothing", async () => {
      await upload("t", 1, 2);
      const t = await scriptId("t");
      await deploy("pins-t1", { pins: [pin(t, 1)] });
      await upload("t", 2, 2);
      await deploy("pins-t2", { pins: [pin(t, 2)] });
      assert.equal(await upload("t", 3, 2), "full");
      assert.deepEqual(await scriptVersions(t), [2, 1]);
      const el = await store.scriptById(SCOPE, t);
      assert.equal(new TextDecoder().decode(el?.content), "def main():\n    return 2\n");
    });

    it("the pins of a removed revision protect nothing", async () => {
      await upload("u", 1, 2);
      const u = await scriptId("u");
      await deploy("pins-u", { pins: [pin(u, 1)], keep: 1 });
      await upload("u", 2, 2);
      const second = await deploy("pins-u", { pins: [pin(u, 2)], keep: 1 });
      assert.deepEqual(await revisions(second.element.id), [2]);
      await upload("u", 3, 2);
      assert.deepEqual(await scriptVersions(u), [3, 2]);
    });
  });
}
