import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { ErrorCode, SluiceError } from "../../src/errors.ts";
import { activateRelease } from "../../src/flows/releases.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import type { Scope, Store } from "../../src/store/types.ts";
import { startPostgres } from "../helpers/pg.ts";
import { pollUntil } from "../helpers/wait.ts";

/**
 * A deploy that removes revisions past LIMIT_REVISIONS_PER_FLOW (docs/dataflow-service.md, "How
 * many revisions are kept") racing an activate of the revision it removes: the activate answers
 * 28010004 and changes nothing, and on PostgreSQL neither request fails on a deadlock.
 */

const SCOPE: Scope = { app: "app1", space: "space1" };
const T0 = 1_700_000_000_000;
const KEEP = 3;

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`a deploy's removal racing an activate (${dialect})`, () => {
    let store: OpenedStore;
    let url: string | undefined;
    let dataDir: string;
    let folder: string;

    before(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-keep-race-"));
      url = dialect === "postgres" ? await (await startPostgres()).createDatabase() : undefined;
      store = await openStore({ databaseUrl: url, dataDir });
      folder = (await store.ensureFolder(SCOPE, "/r", T0)).id;
    });
    after(async () => {
      await store?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    const deploy = (s: Store, name: string) =>
      s.deployFlow({
        scope: SCOPE,
        folderId: folder,
        name,
        revisionName: "r",
        flow: { vertexes: [], edges: [] },
        configure: {},
        description: null,
        user: null,
        now: T0,
        release: true,
        pins: null,
        keepRevisions: KEEP,
      });
    const revisions = async (elementId: string) =>
      (await store.flowRevisions(elementId, 100, 0)).items.map((r) => r.version);

    it("a rollback whose revision a deploy removed after it was read answers 28010004 and changes nothing", async () => {
      for (let i = 0; i < KEEP; i++) await deploy(store, "rolled");
      const [el] = await store.findElements(SCOPE, {
        type: "DPL",
        name: "rolled",
        folderId: folder,
      });
      assert.ok(el);
      assert.equal(el.releaseVersion, 3);
      // The deploy commits between the activate's read of version 1 and its release change.
      const racing: Store = {
        ...store,
        async changeRelease(change) {
          await deploy(store, "rolled"); // version 4: version 1, the oldest past one, goes
          return store.changeRelease(change);
        },
      };
      const err = await activateRelease(
        { store: racing, clock: { now: () => T0 } } as never,
        SCOPE,
        null,
        el,
        1,
      ).then(
        () => assert.fail("the rollback answered APPROVED"),
        (e: unknown) => e,
      );
      assert.ok(err instanceof SluiceError, String(err));
      assert.equal(err.code, ErrorCode.REVISION_NOT_FOUND);
      assert.deepEqual(await revisions(el.id), [4, 3, 2]);
      const after = await store.elementById(SCOPE, el.id);
      assert.equal(after?.releaseVersion, 4, "the deploy's release stays");
    });

    // PostgreSQL's row locks: SQLite has one writer, so its transactions cannot wait crosswise.
    const pgOnly = dialect === "postgres" ? it : () => {};
    pgOnly(
      "a deploy removing the revision an activate is releasing: no deadlock, the activate finds it gone",
      async () => {
        if (!url) throw new Error("no PostgreSQL URL");
        for (let i = 0; i < KEEP; i++) await deploy(store, "locked");
        const [el] = await store.findElements(SCOPE, {
          type: "DPL",
          name: "locked",
          folderId: folder,
        });
        assert.ok(el);
        const lock = new pg.Client({ connectionString: url });
        await lock.connect();
        const waiting = async () =>
          (
            await lock.query<{ n: number }>(
              "select count(*)::int as n from pg_locks where not granted",
            )
          ).rows[0]?.n ?? 0;
        try {
          // The deploy stops at its removal (which reads runs) holding the element's row.
          await lock.query("begin; lock table runs in access exclusive mode");
          const deployed = deploy(store, "locked").then(
            (d) => d.version,
            (e: unknown) => e,
          );
          await pollUntil(waiting, (n) => n >= 1, "the deploy waits at its removal");
          // The rollback to version 1, the revision that removal takes, comes meanwhile.
          const changed = store
            .changeRelease({
              elementId: el.id,
              action: "ROLLBACK",
              status: "APPROVED",
              version: 1,
              pins: null,
              user: null,
              now: T0,
            })
            .catch((e: unknown) => e);
          await pollUntil(waiting, (n) => n >= 2, "the rollback waits for the deploy");
          await lock.query("rollback");
          const [d, c] = await Promise.all([deployed, changed]);
          assert.equal(d, 4, `the deploy: ${String(d)}`);
          assert.equal(c, false, `the rollback finds version 1 gone: ${String(c)}`);
          assert.deepEqual(await revisions(el.id), [4, 3, 2]);
          assert.equal((await store.elementById(SCOPE, el.id))?.releaseVersion, 4);
        } finally {
          await lock.end();
        }
      },
    );
  });
}
