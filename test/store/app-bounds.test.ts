import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { ErrorCode, SluiceError } from "../../src/errors.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { Scope, Store } from "../../src/store/types.ts";
import { startPostgres } from "../helpers/pg.ts";

/**
 * The store's side of what an app may hold (docs/security.md, "What an app may hold"): the count
 * of an app's elements and of its active schedules is exact when writes race, on PostgreSQL
 * through two stores (two pools, as two nodes of a cluster) and on SQLite through one.
 */

const T0 = 1_700_000_000_000;
const BOUNDS = { elements: 5, schedules: 4 };
const crons = (n: number) => ({
  triggers: Array.from({ length: n }, (_, i) => ({
    type: "cron",
    name: `t${i}`,
    crontab: "0 0 1 1 *",
  })),
});

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`app bounds under racing writes (${dialect})`, () => {
    let stores: OpenedStore[];
    let dataDir: string;

    before(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-app-bounds-"));
      if (dialect === "postgres") {
        const url = await (await startPostgres()).createDatabase();
        stores = [
          await openStore({ databaseUrl: url, dataDir }),
          await openStore({ databaseUrl: url, dataDir }),
        ];
      } else stores = [await openStore({ dataDir })];
    });
    after(async () => {
      for (const s of stores ?? []) await s.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    const on = (i: number): Store => stores[i % stores.length] as Store;
    const folders = new Map<string, string>();
    const deploy = async (s: Store, scope: Scope, name: string, configure: unknown = {}) =>
      s.deployFlow({
        scope,
        folderId: await folderOf(scope),
        name,
        revisionName: "r",
        flow: { vertexes: [], edges: [] },
        configure,
        description: null,
        user: null,
        now: T0,
        release: true,
        pins: null,
        bounds: BOUNDS,
      });
    const folderOf = async (scope: Scope) => {
      let id = folders.get(scope.app);
      if (id === undefined) {
        id = (await on(0).ensureFolder(scope, "/b", T0)).id;
        folders.set(scope.app, id);
      }
      return id;
    };
    const codeOf = (p: Promise<unknown>) =>
      p.then(
        () => 0,
        (err: unknown) => {
          if (err instanceof SluiceError) return err.code;
          throw err;
        },
      );

    it("twelve creates racing for the last element place: exactly one is stored", async () => {
      const scope = { app: "race", space: "s" };
      for (let i = 0; i < BOUNDS.elements - 1; i++) await deploy(on(0), scope, `e${i}`);
      const folderId = await folderOf(scope);
      const codes = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          codeOf(
            i % 2 === 0
              ? deploy(on(i), scope, `new${i}`)
              : on(i)
                  .putScript(
                    {
                      scope,
                      folderId,
                      name: `py${i}`,
                      kind: "module",
                      content: new Uint8Array([35]),
                      now: T0,
                      bounds: BOUNDS,
                    },
                    false,
                  )
                  .then((o) => {
                    if (o !== "created") throw new SluiceError(ErrorCode.ELEMENT_LIMIT, [o]);
                  }),
          ),
        ),
      );
      assert.equal(codes.filter((c) => c === 0).length, 1, String(codes));
      assert.ok(
        codes.every((c) => c === 0 || c === ErrorCode.ELEMENT_LIMIT),
        String(codes),
      );
      const held = await on(0).elementsUnder(scope, "/");
      assert.equal(held.length, BOUNDS.elements);
    });

    it("activates racing for the last schedules: the app's active schedules stay within the bound", async () => {
      const scope = { app: "cron-race", space: "s" };
      const ids: string[] = [];
      for (let i = 0; i < 5; i++)
        ids.push((await deploy(on(0), scope, `c${i}`, crons(2))).element.id);
      const codes = await Promise.all(
        ids.map((id, i) =>
          codeOf(
            on(i)
              .changeRelease({
                elementId: id,
                action: "ACTIVATE",
                status: "APPROVED",
                version: 1,
                pins: null,
                user: null,
                now: T0,
                bounds: BOUNDS,
              })
              .then((ok) => assert.ok(ok)),
          ),
        ),
      );
      assert.equal(codes.filter((c) => c === 0).length, 2, String(codes));
      assert.ok(
        codes.every((c) => c === 0 || c === ErrorCode.SCHEDULE_LIMIT),
        String(codes),
      );
      const approved = (await on(0).elementsUnder(scope, "/")).filter(
        (e) => e.status === "APPROVED",
      );
      assert.equal(approved.length, 2);
    });
  });
}
