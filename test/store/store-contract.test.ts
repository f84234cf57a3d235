import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { CompiledQuery, sql } from "kysely";
import { newId } from "../../src/ids.ts";
import type { MonitorTables } from "../../src/store/monitor-tables.ts";
import { type OpenedStore, openStore } from "../../src/store/open-store.ts";
import { applyWrites, createRunWrites, retryAlone } from "../../src/store/run-writes.ts";
import { startedOnQuery } from "../../src/store/started-here.ts";
import type { RunStatus, Scope } from "../../src/store/types.ts";
import { isUniqueViolation } from "../../src/store/unique-violation.ts";
import { startPostgres } from "../helpers/pg.ts";
import { newRun } from "../helpers/runs.ts";

/** The same behaviour is required of the Store in both dialects (docs/operations.md: both modes pass one suite). */

const SCOPE: Scope = { app: "app1", space: "space1" };
const OTHER: Scope = { app: "app1", space: "space2" };
const OTHER_APP: Scope = { app: "app2", space: "space1" };
const T0 = 1_700_000_000_000;

let seq = 0;
/** Unique names so that tests sharing one store never collide. */
const unique = (prefix: string) => `${prefix}_${++seq}`;

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`Store contract (${dialect})`, () => {
    let store: OpenedStore;
    let dataDir: string;

    before(async () => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-store-"));
      const databaseUrl =
        dialect === "postgres" ? await (await startPostgres()).createDatabase() : undefined;
      store = await openStore({ databaseUrl, dataDir });
      assert.equal(store.dialect, dialect);
    });

    after(async () => {
      await store?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    describe("folders", () => {
      it("ensureFolder creates every missing ancestor", async () => {
        const leaf = await store.ensureFolder(SCOPE, "/a/b/c", T0);
        assert.equal(leaf.path, "/a/b/c");
        assert.equal(typeof leaf.id, "string");
        for (const p of ["/", "/a", "/a/b", "/a/b/c"]) {
          const f = await store.folderByPath(SCOPE, p);
          assert.equal(f?.path, p, `ancestor ${p}`);
        }
        assert.deepEqual(await store.folderById(SCOPE, leaf.id), leaf);
      });

      it("ensureFolder is idempotent and shares existing ancestors", async () => {
        const first = await store.ensureFolder(SCOPE, "/x/y", T0);
        const again = await store.ensureFolder(SCOPE, "/x/y", T0 + 1);
        assert.deepEqual(again, first);
        const x = await store.folderByPath(SCOPE, "/x");
        const sibling = await store.ensureFolder(SCOPE, "/x/z", T0 + 2);
        assert.notEqual(sibling.id, first.id);
        assert.deepEqual(await store.folderByPath(SCOPE, "/x"), x);
        assert.deepEqual(
          await store.ensureFolder(SCOPE, "/", T0),
          await store.folderByPath(SCOPE, "/"),
        );
      });

      it("folders are per scope", async () => {
        const mine = await store.ensureFolder(SCOPE, "/only-mine", T0);
        assert.equal(await store.folderByPath(OTHER, "/only-mine"), undefined);
        assert.equal(await store.folderById(OTHER, mine.id), undefined);
        const theirs = await store.ensureFolder(OTHER, "/only-mine", T0);
        assert.notEqual(theirs.id, mine.id);
      });

      it("unknown folders are undefined", async () => {
        assert.equal(await store.folderByPath(SCOPE, "/nope/never"), undefined);
        assert.equal(await store.folderById(SCOPE, "no-such-id"), undefined);
      });
    });

    describe("scripts and elements", () => {
      it("putScript: created, exists, overwritten; content round-trips byte for byte", async () => {
        const folder = await store.ensureFolder(SCOPE, "/scripts", T0);
        const name = unique("score");
        // Every byte value, so an encoding step anywhere would show.
        const bytes = Uint8Array.from({ length: 512 }, (_, i) => i % 256);
        const base = {
          scope: SCOPE,
          folderId: folder.id,
          name,
          kind: "module" as const,
          content: bytes,
          now: T0,
        };
        assert.equal(await store.putScript(base, false), "created");
        assert.equal(
          await store.putScript({ ...base, content: new Uint8Array([1]), now: T0 + 5 }, false),
          "exists",
        );

        const [el] = await store.findElements(SCOPE, { type: "PY", name });
        assert.ok(el);
        const script = await store.scriptById(SCOPE, el.id);
        assert.ok(script);
        assert.deepEqual(
          new Uint8Array(script.content),
          bytes,
          "exists must not change the content",
        );
        assert.equal(script.kind, "module");
        assert.equal(script.path, "/scripts");
        assert.equal(script.folderId, folder.id);
        assert.equal(script.type, "PY");
        assert.equal(script.createdAt, T0);
        assert.equal(script.updatedAt, T0);

        const zip = new Uint8Array([0x50, 0x4b, 0x03, 0x04, 0, 0xff]);
        assert.equal(
          await store.putScript({ ...base, kind: "package", content: zip, now: T0 + 10 }, true),
          "overwritten",
        );
        const after = await store.scriptById(SCOPE, el.id);
        assert.ok(after);
        assert.deepEqual(new Uint8Array(after.content), zip);
        assert.equal(after.kind, "package");
        assert.equal(after.id, el.id, "overwrite keeps the element id");
        assert.equal(after.createdAt, T0);
        assert.equal(after.updatedAt, T0 + 10);
      });

      it("an empty script round-trips", async () => {
        const folder = await store.ensureFolder(SCOPE, "/scripts", T0);
        const name = unique("empty");
        await store.putScript(
          {
            scope: SCOPE,
            folderId: folder.id,
            name,
            kind: "module",
            content: new Uint8Array(),
            now: T0,
          },
          false,
        );
        const [el] = await store.findElements(SCOPE, { type: "PY", name });
        assert.ok(el);
        assert.equal((await store.scriptById(SCOPE, el.id))?.content.length, 0);
      });

      it("findElements by name, with and without folder", async () => {
        const f1 = await store.ensureFolder(SCOPE, "/find/one", T0);
        const f2 = await store.ensureFolder(SCOPE, "/find/two", T0);
        const name = unique("dup");
        const put = (folderId: string) =>
          store.putScript(
            { scope: SCOPE, folderId, name, kind: "module", content: new Uint8Array([1]), now: T0 },
            false,
          );
        assert.equal(await put(f1.id), "created");
        assert.equal(await put(f2.id), "created");

        const both = await store.findElements(SCOPE, { type: "PY", name });
        assert.equal(both.length, 2);
        assert.deepEqual(new Set(both.map((e) => e.path)), new Set(["/find/one", "/find/two"]));

        const inOne = await store.findElements(SCOPE, { type: "PY", name, folderId: f1.id });
        assert.equal(inOne.length, 1);
        assert.equal(inOne[0]?.folderId, f1.id);
        assert.equal(inOne[0]?.path, "/find/one");

        assert.deepEqual(
          await store.findElements(SCOPE, { type: "DPL", name }),
          [],
          "type is part of the query",
        );
        assert.deepEqual(
          await store.findElements(SCOPE, { type: "PY", name: unique("absent") }),
          [],
        );
      });

      it("another app or space sees none of it", async () => {
        const folder = await store.ensureFolder(SCOPE, "/iso", T0);
        const name = unique("secret");
        await store.putScript(
          {
            scope: SCOPE,
            folderId: folder.id,
            name,
            kind: "module",
            content: new Uint8Array([7]),
            now: T0,
          },
          false,
        );
        const [el] = await store.findElements(SCOPE, { type: "PY", name });
        assert.ok(el);
        for (const other of [OTHER, OTHER_APP]) {
          assert.deepEqual(await store.findElements(other, { type: "PY", name }), []);
          assert.deepEqual(
            await store.findElements(other, { type: "PY", name, folderId: folder.id }),
            [],
          );
          assert.equal(await store.elementById(other, el.id), undefined);
          assert.equal(await store.scriptById(other, el.id), undefined);
        }
        assert.equal((await store.elementById(SCOPE, el.id))?.name, name);
      });

      it("newestScriptVersion: the newest number, several asked together", async () => {
        const folder = await store.ensureFolder(SCOPE, "/newest", T0);
        const put = (name: string, overwrite: boolean) =>
          store.putScript(
            {
              scope: SCOPE,
              folderId: folder.id,
              name,
              kind: "module",
              content: new Uint8Array([1]),
              now: T0,
            },
            overwrite,
          );
        const a = unique("newest-a");
        const b = unique("newest-b");
        await put(a, false);
        await put(b, false);
        await put(b, true);
        await put(b, true);
        const [ea] = await store.findElements(SCOPE, { type: "PY", name: a });
        const [eb] = await store.findElements(SCOPE, { type: "PY", name: b });
        assert.ok(ea && eb);
        assert.deepEqual(
          await Promise.all([
            store.newestScriptVersion(ea.id),
            store.newestScriptVersion(eb.id),
            store.newestScriptVersion(eb.id),
            store.newestScriptVersion("999999999"),
            store.newestScriptVersion("not-a-number"),
          ]),
          [1, 3, 3, undefined, undefined],
        );
        assert.equal(
          (await store.scriptVersion(eb.id, null))?.version,
          3,
          "agrees with scriptVersion",
        );
      });

      it("lookups made together (one statement) each get their own scope's answer", async () => {
        const name = unique("shared-name");
        const mine = await store.ensureFolder(SCOPE, "/together/a", T0);
        const mine2 = await store.ensureFolder(SCOPE, "/together/b", T0);
        const theirs = await store.ensureFolder(OTHER, "/together/a", T0);
        const put = (scope: Scope, folderId: string, byte: number) =>
          store.putScript(
            { scope, folderId, name, kind: "module", content: new Uint8Array([byte]), now: T0 },
            false,
          );
        await put(SCOPE, mine.id, 1);
        await put(SCOPE, mine2.id, 2);
        await put(OTHER, theirs.id, 3);
        const [all, inA, other, otherApp, otherInMine, absent] = await Promise.all([
          store.findElements(SCOPE, { type: "PY", name }),
          store.findElements(SCOPE, { type: "PY", name, folderId: mine.id }),
          store.findElements(OTHER, { type: "PY", name }),
          store.findElements(OTHER_APP, { type: "PY", name }),
          store.findElements(OTHER, { type: "PY", name, folderId: mine.id }),
          store.findElements(SCOPE, { type: "DPL", name }),
        ]);
        assert.deepEqual(new Set(all?.map((e) => e.path)), new Set(["/together/a", "/together/b"]));
        assert.ok(all?.every((e) => e.scope.space === SCOPE.space));
        assert.deepEqual(
          inA?.map((e) => e.folderId),
          [mine.id],
        );
        assert.deepEqual(
          other?.map((e) => [e.scope.space, e.folderId]),
          [[OTHER.space, theirs.id]],
        );
        assert.deepEqual(otherApp, []);
        assert.deepEqual(otherInMine, [], "a folder of another scope finds nothing");
        assert.deepEqual(absent, [], "type is part of each lookup");
      });

      it("element IDs that are not numeric are simply unknown", async () => {
        for (const id of ["abc", "", "1e3", "-1", "1.5", " 1", "0x10"]) {
          assert.equal(
            await store.elementById(SCOPE, id),
            undefined,
            `elementById(${JSON.stringify(id)})`,
          );
          assert.equal(
            await store.scriptById(SCOPE, id),
            undefined,
            `scriptById(${JSON.stringify(id)})`,
          );
        }
      });

      // PostgreSQL would reject a bigint literal it cannot parse: the store turns such IDs away first.
      it("element IDs out of range are simply unknown", async () => {
        for (const id of ["99999999999999999999999", "9223372036854775808"]) {
          assert.equal(
            await store.elementById(SCOPE, id),
            undefined,
            `elementById(${JSON.stringify(id)})`,
          );
          assert.equal(
            await store.scriptById(SCOPE, id),
            undefined,
            `scriptById(${JSON.stringify(id)})`,
          );
        }
      });

      it("element timestamps and ids have the same types in both dialects", async () => {
        const folder = await store.ensureFolder(SCOPE, "/types", T0);
        const name = unique("typed");
        await store.putScript(
          {
            scope: SCOPE,
            folderId: folder.id,
            name,
            kind: "module",
            content: new Uint8Array([1]),
            now: T0 + 123,
          },
          false,
        );
        const [el] = await store.findElements(SCOPE, { type: "PY", name });
        assert.ok(el);
        assert.equal(typeof el.id, "string");
        assert.match(el.id, /^\d+$/);
        assert.equal(el.createdAt, T0 + 123);
        assert.equal(typeof el.updatedAt, "number");
        assert.equal(el.releaseTime, null);
        assert.equal(el.releaseVersion, null);
        assert.deepEqual(el.scope, SCOPE);
      });
    });

    describe("import (docs/export-import.md)", () => {
      const rev = (version: number) => ({
        version,
        name: `r${version}`,
        flow: { vertexes: [{ id: "in", type: "input" }] },
        configure: {},
        createdAt: T0,
        userId: null,
      });
      const flow = (name: string, versions: number[]) => ({
        path: "/imp/flows",
        name,
        elementId: null,
        status: "APPROVED" as const,
        description: null,
        revisions: versions.map(rev),
        releaseVersion: versions.at(-1) ?? null,
        user: null,
      });

      it("applyImport writes scripts, folders, flows and revisions; elementsUnder finds them", async () => {
        const ids = await store.applyImport(
          SCOPE,
          {
            scripts: [
              { path: "/imp/py", name: "s", kind: "module", content: new Uint8Array([1, 2]) },
            ],
            flows: [flow("f", [1, 2])],
          },
          T0,
        );
        assert.equal(ids.length, 1);
        const els = await store.elementsUnder(SCOPE, "/imp");
        assert.deepEqual(
          els.map((e) => [e.path, e.type, e.name, e.status, e.releaseVersion]),
          [
            ["/imp/flows", "DPL", "f", "APPROVED", 2],
            ["/imp/py", "PY", "s", null, null],
          ],
        );
        assert.deepEqual(
          (await store.allFlowRevisions(ids[0] ?? "")).map((r) => r.version),
          [1, 2],
        );
        assert.deepEqual(await store.elementsUnder(OTHER, "/imp"), []);
        assert.deepEqual(await store.elementsUnder(SCOPE, "/im"), []);
      });

      it("applyImport is all or nothing: a failing write leaves no trace of the others", async () => {
        await assert.rejects(
          store.applyImport(
            SCOPE,
            {
              scripts: [{ path: "/atomic", name: "s", kind: "module", content: new Uint8Array() }],
              // The same version twice violates the revisions' primary key.
              flows: [
                { ...flow("ok", [1]), path: "/atomic" },
                { ...flow("bad", [1, 1]), path: "/atomic" },
              ],
            },
            T0,
          ),
        );
        assert.deepEqual(await store.elementsUnder(SCOPE, "/atomic"), []);
        assert.deepEqual(
          await store.elementsUnder(SCOPE, "/imp/flows").then((e) => e.map((x) => x.name)),
          ["f"],
        );
        assert.equal(await store.folderByPath(SCOPE, "/atomic"), undefined);
      });
    });

    describe("runs", () => {
      it("insertRun then getRun returns every field, timestamps as numbers", async () => {
        const run = newRun({
          runName: "nightly",
          runParam: '{"a":1}',
          initiator: { userId: "alice", name: "Alice" },
          version: "3",
          triggerType: "SYNC",
          inProcess: true,
          nodeId: "node-a",
          elementId: "42",
          elementType: "DPL",
        });
        await store.insertRun(run);
        const got = await store.getRun(SCOPE, run.id);
        assert.ok(got);
        assert.deepEqual(got, {
          ...run,
          startTime: null,
          endTime: null,
          duration: null,
          summary: null,
          result: null,
          error: null,
          stdout: null,
          stderr: null,
          detail: null,
          rerunOf: null,
          webhooks: null,
        });
        assert.equal(typeof got.createTime, "number");
      });

      it("a re-run's link to its run is stored with it (migration 009)", async () => {
        const run = newRun({ rerunOf: { runId: "r-old", kind: "resume" } });
        await store.insertRun(run);
        assert.deepEqual((await store.getRun(SCOPE, run.id))?.rerunOf, {
          runId: "r-old",
          kind: "resume",
        });
      });

      it("a run's webhooks are stored with it (migration 012)", async () => {
        const webhooks = [{ url: "https://example.com/h", on: ["FAILURE" as const] }];
        const run = newRun({ webhooks });
        await store.insertRun(run);
        assert.deepEqual((await store.getRun(SCOPE, run.id))?.webhooks, webhooks);
      });

      it("startRun moves only QUEUED runs to STARTED", async () => {
        const run = newRun();
        await store.insertRun(run);
        const claimed = await store.startRun(run.id, T0 + 100, "node-b");
        assert.equal(claimed?.status, "STARTED", "answers the run as started");
        assert.equal(claimed?.startTime, T0 + 100);
        assert.equal(claimed?.runParam, run.runParam);
        const started = await store.getRun(SCOPE, run.id);
        assert.equal(started?.status, "STARTED");
        assert.equal(started?.startTime, T0 + 100);
        assert.equal(started?.nodeId, "node-b");
        assert.equal(
          await store.startRun(run.id, T0 + 200, "node-c"),
          undefined,
          "already STARTED",
        );
        assert.equal((await store.getRun(SCOPE, run.id))?.nodeId, "node-b");
        assert.equal(await store.startRun("no-such-run", T0, null), undefined);
      });

      it("two starts of one run in one turn (two jobs of it, one fetch): only one starts it", async () => {
        // A run may have two jobs (a sweep sends one again; docs/cluster.md): fetched together,
        // their starts share a batch, and each answered as started would execute the run twice.
        const run = newRun();
        await store.insertRun(run);
        const answers = await Promise.all([
          store.startRun(run.id, T0 + 100, "node-b"),
          store.startRun(run.id, T0 + 100, "node-b"),
        ]);
        assert.equal(answers.filter((a) => a !== undefined).length, 1);
      });

      it("endRun: unfinished → terminal once; terminal states never change", async () => {
        const run = newRun({ createTime: T0 });
        await store.insertRun(run);
        await store.startRun(run.id, T0 + 10, "n1");
        const detail = { nodes: [{ id: "a", ms: 3 }] };
        const ok = await store.endRun(run.id, {
          status: "SUCCESS",
          endTime: T0 + 60,
          summary: "2 nodes, 5 bytes",
          result: '{"x":1}',
          stdout: "out",
          stderr: "err",
          detail,
        });
        assert.equal(ok, true);
        const ended = await store.getRun(SCOPE, run.id);
        assert.ok(ended);
        assert.equal(ended.status, "SUCCESS");
        assert.equal(ended.endTime, T0 + 60);
        assert.equal(ended.duration, 50, "duration counts from start");
        assert.equal(typeof ended.duration, "number");
        assert.equal(ended.result, '{"x":1}');
        assert.equal(ended.error, null);
        assert.equal(ended.stdout, "out");
        assert.equal(ended.stderr, "err");
        assert.deepEqual(ended.detail, detail);

        assert.equal(
          await store.endRun(run.id, {
            status: "FAILURE",
            endTime: T0 + 99,
            summary: "late",
            error: "boom",
          }),
          false,
        );
        assert.equal(
          await store.endRun(run.id, { status: "CANCELED", endTime: T0 + 99, summary: null }),
          false,
        );
        assert.equal(await store.startRun(run.id, T0 + 99, "n2"), undefined);
        assert.deepEqual(await store.getRun(SCOPE, run.id), ended);
      });

      it("ends issued in one turn (one batch) each keep their own fields; a repeated end loses", async () => {
        const runs = [0, 1, 2, 3].map((k) => newRun({ createTime: T0 + k }));
        for (const r of runs) await store.insertRun(r);
        await store.startRun(runs[0]?.id ?? "", T0 + 10, "n1");
        await store.startRun(runs[1]?.id ?? "", T0 + 20, "n1");
        const ends = [
          {
            status: "SUCCESS",
            endTime: T0 + 110,
            summary: "a",
            result: '{"k":0}',
            detail: { k: 0 },
          },
          { status: "FAILURE", endTime: T0 + 220, summary: "b", error: "boom", stderr: "tb" },
          { status: "CANCELED", endTime: T0 + 330, summary: null },
          { status: "SUCCESS", endTime: T0 + 440, summary: "d", stdout: "out" },
        ] as const;
        const answers = await Promise.all([
          ...runs.map((r, k) => store.endRun(r.id, ends[k] ?? ends[0])),
          store.endRun(runs[2]?.id ?? "", {
            status: "SUCCESS",
            endTime: T0 + 999,
            summary: "late",
          }),
        ]);
        assert.deepEqual(answers, [true, true, true, true, false]);
        const got = await Promise.all(runs.map((r) => store.getRun(SCOPE, r.id)));
        const seen = got.map((g) => [g?.status, g?.endTime, g?.duration, g?.summary, g?.result]);
        assert.deepEqual(seen, [
          ["SUCCESS", T0 + 110, 100, "a", '{"k":0}'],
          ["FAILURE", T0 + 220, 200, "b", null],
          ["CANCELED", T0 + 330, 328, null, null],
          ["SUCCESS", T0 + 440, 437, "d", null],
        ]);
        assert.deepEqual(got[0]?.detail, { k: 0 });
        assert.equal(got[1]?.error, "boom");
        assert.equal(got[1]?.stderr, "tb");
        assert.equal(got[3]?.stdout, "out");
        assert.equal(typeof got[3]?.duration, "number");
      });

      it("large ends of one turn are split over statements and each is recorded whole", async () => {
        // 3 × 12 MiB: over the 32 MiB of text one statement carries (src/store/run-ends.ts).
        const runs = [0, 1, 2].map(() => newRun());
        for (const r of runs) await store.insertRun(r);
        const big = (k: number) => JSON.stringify("x".repeat(12 * 1024 * 1024 + k));
        const answers = await Promise.all(
          runs.map((r, k) =>
            store.endRun(r.id, {
              status: "SUCCESS",
              endTime: T0 + 5,
              summary: null,
              result: big(k),
            }),
          ),
        );
        assert.deepEqual(answers, [true, true, true]);
        for (const [k, r] of runs.entries())
          assert.equal((await store.getRun(SCOPE, r.id))?.result?.length, big(k).length);
      });

      it("writes tried again alone after their batch committed unseen are answered as made, counted once", async () => {
        // A connection lost after COMMIT fails the batch although it is written; the batcher
        // then tries each write alone (src/store/run-writes.ts, retryAlone).
        const r = newRun({ elementType: "DPL", elementId: "7001" });
        const ended = newRun({ elementType: "DPL", elementId: "7001" });
        const end = { status: "FAILURE" as const, endTime: T0 + 9, summary: "s", error: "e" };
        const alone = (w: Parameters<typeof retryAlone>[1]) =>
          store.db.transaction().execute((tx) => retryAlone(tx, w));
        const counts = async () => {
          const mdb = store.db.withTables<MonitorTables>();
          const runs = await mdb
            .selectFrom("element_run_stats")
            .select("total_runs")
            .where("element_id", "=", 7001)
            .executeTakeFirst();
          const finished = await mdb
            .selectFrom("run_status_counts")
            .select(["status", "n"])
            .where("element_id", "=", 7001)
            .execute();
          return [Number(runs?.total_runs ?? 0), finished.map((f) => [f.status, Number(f.n)])];
        };
        await store.insertRun(r);
        await store.insertRun(ended);
        assert.equal(await store.endRun(ended.id, end), true);
        const before = await counts();
        assert.deepEqual(before, [2, [["FAILURE", 1]]]);
        assert.equal(await alone({ kind: "insert", run: r, end: undefined }), true, "its insert");
        assert.equal((await store.startRun(r.id, T0 + 7, "n1"))?.status, "STARTED");
        const retried = await alone({ kind: "start", id: r.id, startTime: T0 + 7, nodeId: "n1" });
        assert.equal(typeof retried === "object" && retried?.id, r.id, "the same start");
        const delivered = await store.db
          .transaction()
          .execute((tx) =>
            applyWrites(tx, [{ kind: "start", id: r.id, startTime: T0 + 7, nodeId: "n1" }]),
          );
        assert.deepEqual(delivered, [undefined], "a second delivery in a batch is no start");
        for (const [t, node] of [
          [T0 + 8, "n1"],
          [T0 + 7, "n2"],
        ] as const)
          assert.equal(
            await alone({ kind: "start", id: r.id, startTime: t, nodeId: node }),
            undefined,
          );
        assert.equal(await alone({ kind: "end", id: ended.id, end }), true, "the same end");
        assert.equal(
          await alone({ kind: "end", id: ended.id, end: { ...end, status: "SUCCESS" } }),
          false,
          "another end",
        );
        assert.deepEqual(await counts(), before, "nothing counted twice");
        const clash = { ...newRun(), id: r.id };
        await assert.rejects(alone({ kind: "insert", run: clash, end: undefined }), /taken/);
        // An ID derived from its purpose (a custom error handler's run, docs/error-handlers.md)
        // is made alike by two nodes, in one millisecond too: another node's row is not its own.
        const derived = newRun({ nodeId: "n1" });
        await store.insertRun(derived);
        const twin = { ...derived, nodeId: "n2" };
        const refused = await alone({ kind: "insert", run: twin, end: undefined }).then(
          () => undefined,
          (err: unknown) => err,
        );
        assert.ok(isUniqueViolation(refused), `refused as a taken key: ${String(refused)}`);
        assert.equal(await alone({ kind: "insert", run: derived, end: undefined }), true);
      });

      it("two starts of one run in a batch that failed after committing: only the first is answered as started", async () => {
        // Two jobs of one run fetched together, and the batch's answer lost after it was written
        // (a connection reset after COMMIT): the batcher tries each write alone.
        const r = newRun();
        await store.insertRun(r);
        const writes = createRunWrites(store.db, async (db, batch) => {
          await db.transaction().execute((tx) => applyWrites(tx, batch));
          throw new Error("connection lost after commit");
        });
        const answers = await Promise.all([
          writes.startRun(r.id, T0 + 3, "n1"),
          writes.startRun(r.id, T0 + 3, "n1"),
        ]);
        assert.deepEqual(
          answers.map((a) => a?.id),
          [r.id, undefined],
        );
      });

      it("a QUEUED run can be canceled and then never starts; duration counts from creation", async () => {
        const run = newRun({ createTime: T0 + 1000 });
        await store.insertRun(run);
        assert.equal(
          await store.endRun(run.id, { status: "CANCELED", endTime: T0 + 1250, summary: null }),
          true,
        );
        const got = await store.getRun(SCOPE, run.id);
        assert.equal(got?.status, "CANCELED");
        assert.equal(got?.duration, 250);
        assert.equal(got?.startTime, null);
        assert.equal(await store.startRun(run.id, T0 + 1300, null), undefined);
        assert.equal(
          await store.endRun("no-such-run", { status: "FAILURE", endTime: T0, summary: null }),
          false,
        );
      });

      it("getRun with a null scope sees every scope; a scope sees only its own", async () => {
        const run = newRun({ scope: OTHER });
        await store.insertRun(run);
        assert.equal((await store.getRun(null, run.id))?.id, run.id);
        assert.deepEqual((await store.getRun(OTHER, run.id))?.scope, OTHER);
        assert.equal(await store.getRun(SCOPE, run.id), undefined);
        assert.equal(await store.getRun(OTHER_APP, run.id), undefined);
        assert.equal(await store.getRun(null, "no-such-run"), undefined);
      });

      it("deleteRuns deletes only finished, visible runs and returns their IDs", async () => {
        const queued = newRun();
        const started = newRun();
        const done = newRun();
        const failed = newRun();
        const foreign = newRun({ scope: OTHER });
        for (const r of [queued, started, done, failed, foreign]) await store.insertRun(r);
        await store.startRun(started.id, T0, null);
        await store.endRun(done.id, { status: "SUCCESS", endTime: T0 + 1, summary: null });
        await store.endRun(failed.id, {
          status: "FAILURE",
          endTime: T0 + 1,
          summary: null,
          error: "x",
        });
        await store.endRun(foreign.id, { status: "SUCCESS", endTime: T0 + 1, summary: null });

        const ids = [queued.id, started.id, done.id, failed.id, foreign.id, "no-such-run"];
        const deleted = await store.deleteRuns(SCOPE, ids);
        assert.deepEqual(deleted, new Set([done.id, failed.id]));
        assert.equal(await store.getRun(null, done.id), undefined);
        assert.ok(await store.getRun(null, queued.id), "unfinished runs stay");
        assert.ok(await store.getRun(null, started.id), "unfinished runs stay");
        assert.ok(await store.getRun(null, foreign.id), "another space's runs stay");

        assert.deepEqual(
          await store.deleteRuns(SCOPE, ids),
          new Set(),
          "second delete finds nothing",
        );
        assert.deepEqual(
          await store.deleteRuns(null, [foreign.id]),
          new Set([foreign.id]),
          "null scope deletes any",
        );
        assert.deepEqual(await store.deleteRuns(SCOPE, []), new Set());
      });

      it("unfinishedRuns: by status, optionally by node, oldest first", async () => {
        const node = unique("node");
        const a = newRun({ createTime: T0 + 30, nodeId: node });
        const b = newRun({ createTime: T0 + 10, nodeId: node });
        const c = newRun({ createTime: T0 + 20 });
        const d = newRun({ createTime: T0 + 5, nodeId: node });
        for (const r of [a, b, c, d]) await store.insertRun(r);
        await store.startRun(a.id, T0 + 31, node);
        await store.endRun(d.id, { status: "SUCCESS", endTime: T0 + 40, summary: null });
        const mine = new Set([a.id, b.id, c.id, d.id]);
        const pick = (runs: { id: string }[]) => runs.map((r) => r.id).filter((id) => mine.has(id));

        const statuses: RunStatus[] = ["QUEUED", "STARTED"];
        assert.deepEqual(pick(await store.unfinishedRuns(statuses)), [b.id, c.id, a.id]);
        assert.deepEqual(pick(await store.unfinishedRuns(["QUEUED"])), [b.id, c.id]);
        assert.deepEqual(pick(await store.unfinishedRuns(["STARTED"])), [a.id]);
        assert.deepEqual(pick(await store.unfinishedRuns(statuses, node)), [b.id, a.id]);
        const nullNode = pick(await store.unfinishedRuns(statuses, null));
        assert.deepEqual(nullNode, [c.id]);
        const [first] = await store.unfinishedRuns(statuses, node);
        assert.equal(typeof first?.createTime, "number");
      });

      // Judged by the database's clock on PostgreSQL, the caller's on SQLite (docs/cluster.md,
      // "Clocks"): a node is made old here by moving its beat back, which holds for both.
      it("orphanedRuns: STARTED runs of nodes not beating or never registered; endedAmong: the ended of some ids", async () => {
        const live = unique("live");
        const dead = unique("dead");
        const now = Date.now();
        await store.heartbeat(live, now);
        await store.heartbeat(dead, now);
        await store.db
          .updateTable("nodes")
          .set((eb) => ({ heartbeat_at: eb("heartbeat_at", "-", 120_000) }))
          .where("id", "=", dead)
          .execute();
        const onLive = newRun({ nodeId: live });
        const onDead = newRun({ nodeId: dead });
        const onNone = newRun({ nodeId: unique("never") });
        const queuedOnDead = newRun({ nodeId: dead });
        const ended = newRun({ nodeId: dead });
        for (const r of [onLive, onDead, onNone, queuedOnDead, ended]) await store.insertRun(r);
        for (const r of [onLive, onDead, onNone, ended])
          await store.startRun(r.id, now, r.nodeId ?? null);
        await store.endRun(ended.id, { status: "SUCCESS", endTime: now, summary: null });
        const mine = new Set([onLive, onDead, onNone, queuedOnDead, ended].map((r) => r.id));
        const orphaned = (await store.orphanedRuns({ now, timeoutMs: 60_000 }))
          .map((r) => r.id)
          .filter((id) => mine.has(id));
        assert.deepEqual(new Set(orphaned), new Set([onDead.id, onNone.id]));
        assert.deepEqual(
          await store.endedAmong([onLive.id, ended.id, queuedOnDead.id, "no-such-run"]),
          [ended.id],
        );
        assert.deepEqual(await store.endedAmong([]), []);
      });

      it("forgetNodes deletes the rows of nodes silent past the time kept, and only those", async () => {
        const gone = unique("gone");
        const recent = unique("recent");
        const now = Date.now();
        await store.heartbeat(gone, now);
        await store.heartbeat(recent, now);
        // Beats are written by the database's clock on PostgreSQL: moved back there, not here.
        await store.db
          .updateTable("nodes")
          .set((eb) => ({ heartbeat_at: eb("heartbeat_at", "-", 90_000) }))
          .where("id", "=", gone)
          .execute();
        await store.db
          .updateTable("nodes")
          .set((eb) => ({ heartbeat_at: eb("heartbeat_at", "-", 30_000) }))
          .where("id", "=", recent)
          .execute();
        const forgotten = await store.forgetNodes({ now, timeoutMs: 60_000 });
        assert.ok(forgotten >= 1, `forgot ${forgotten}`);
        const left = await store.db
          .selectFrom("nodes")
          .select("id")
          .where("id", "in", [gone, recent])
          .execute();
        assert.deepEqual(
          left.map((r) => r.id),
          [recent],
        );
        const onGone = newRun({ nodeId: gone });
        await store.insertRun(onGone);
        await store.startRun(onGone.id, now, gone);
        const orphaned = (await store.orphanedRuns({ now, timeoutMs: 60_000 })).map((r) => r.id);
        assert.ok(orphaned.includes(onGone.id), "a forgotten node's STARTED run is an orphan");
      });

      it("childRuns lists the runs started by a parent", async () => {
        const parent = newRun();
        const kids = [
          newRun({ parentRunId: parent.id, triggerType: "API" }),
          newRun({ parentRunId: parent.id, triggerType: "API" }),
        ];
        await store.insertRun(parent);
        for (const k of kids) await store.insertRun(k);
        await store.insertRun(newRun({ parentRunId: newId() }));
        const got = await store.childRuns(parent.id);
        assert.deepEqual(new Set(got.map((r) => r.id)), new Set(kids.map((k) => k.id)));
        assert.ok(got.every((r) => r.parentRunId === parent.id && r.triggerType === "API"));
        assert.deepEqual(await store.childRuns(kids[0]?.id ?? ""), []);
        // Through the partial index of runs that have a parent (migration 019).
        const plan =
          dialect === "sqlite"
            ? (
                await sql<{ detail: string }>`explain query plan
                  select id from runs where parent_run_id = ${parent.id}`.execute(store.db)
              ).rows.map((r) => r.detail)
            : await store.db.transaction().execute(async (tx) => {
                await sql`set local enable_seqscan = off`.execute(tx);
                const { rows } = await sql<{ "QUERY PLAN": string }>`explain
                  select id from runs where parent_run_id = ${parent.id}`.execute(tx);
                return rows.map((r) => r["QUERY PLAN"]);
              });
        assert.match(plan.join("\n"), /runs_parent/);
      });

      it("startedOn and endStartedOn: a node's STARTED runs up to a cutoff, ended only while STARTED by it", async () => {
        const node = unique("node");
        const t = T0 + 1_000_000;
        const a = newRun({
          status: "STARTED",
          nodeId: node,
          createTime: t + 10,
          startTime: t + 10,
        });
        const late = newRun({
          status: "STARTED",
          nodeId: node,
          createTime: t + 9,
          startTime: t + 50,
        });
        const other = newRun({
          status: "STARTED",
          nodeId: unique("node"),
          createTime: t,
          startTime: t,
        });
        const queued = newRun({ createTime: t + 1 });
        const won = newRun({
          status: "STARTED",
          nodeId: node,
          createTime: t + 2,
          startTime: t + 2,
        });
        for (const r of [a, late, other, queued, won]) await store.insertRun(r);
        assert.equal((await store.startRun(queued.id, t + 15, node))?.status, "STARTED");
        const ids = async (limit: number) =>
          (await store.startedOn(node, t + 20, limit)).map((r) => [r.id, r.elementType]);
        // Oldest first; a start after the cutoff is not listed, nor another node's.
        assert.deepEqual(await ids(10), [
          [queued.id, "PY"],
          [won.id, "PY"],
          [a.id, "PY"],
        ]);
        assert.deepEqual(await ids(1), [[queued.id, "PY"]]);
        // The next page: after the last run read, in (creation, ID) order; ties on the creation
        // time are broken by the ID.
        const tie = newRun({
          status: "STARTED",
          nodeId: node,
          createTime: t + 2,
          startTime: t + 2,
        });
        await store.insertRun(tie);
        const [first, second] = [won, tie].sort((x, y) => (x.id < y.id ? -1 : 1));
        const page = async (after: { createTime: number; id: string }) =>
          (await store.startedOn(node, t + 20, 1, after)).map((r) => [r.id, r.createTime]);
        assert.deepEqual(await page({ createTime: t + 1, id: queued.id }), [[first?.id, t + 2]]);
        assert.deepEqual(await page({ createTime: t + 2, id: first?.id ?? "" }), [
          [second?.id, t + 2],
        ]);
        assert.deepEqual(await page({ createTime: t + 2, id: second?.id ?? "" }), [[a.id, t + 10]]);
        assert.deepEqual(await page({ createTime: t + 10, id: a.id }), []);
        await store.endRun(tie.id, { status: "SUCCESS", endTime: t + 3, summary: null });

        const end = { status: "FAILURE", endTime: t + 30, summary: "lost", error: "lost" } as const;
        assert.equal(await store.endStartedOn(other.id, node, end), false, "another node's");
        assert.equal((await store.getRun(null, other.id))?.status, "STARTED");
        assert.equal(
          await store.endRun(won.id, { status: "SUCCESS", endTime: t + 25, summary: null }),
          true,
        );
        assert.equal(await store.endStartedOn(won.id, node, end), false, "its own end won");
        assert.equal((await store.getRun(null, won.id))?.status, "SUCCESS");
        assert.equal(await store.endStartedOn(a.id, node, end), true);
        const ended = await store.getRun(null, a.id);
        assert.deepEqual(
          [ended?.status, ended?.endTime, ended?.error, ended?.summary, ended?.duration],
          ["FAILURE", t + 30, "lost", "lost", 20],
        );
        assert.equal(await store.endStartedOn(a.id, node, end), false, "ended once");
        assert.deepEqual(await ids(10), [[queued.id, "PY"]]);

        // Through a partial index of unfinished runs (migration 001's or 013's), none of its own.
        const q = startedOnQuery(store.db, node, t, 500, { createTime: t, id: a.id }).compile();
        const explain = (prefix: string) =>
          CompiledQuery.raw(`${prefix} ${q.sql}`, [...q.parameters]);
        const plan =
          dialect === "sqlite"
            ? (
                await store.db.executeQuery<{ detail: string }>(explain("explain query plan"))
              ).rows.map((r) => r.detail)
            : await store.db.transaction().execute(async (tx) => {
                await sql`set local enable_seqscan = off`.execute(tx);
                const { rows } = await tx.executeQuery<{ "QUERY PLAN": string }>(
                  explain("explain"),
                );
                return rows.map((r) => r["QUERY PLAN"]);
              });
        assert.match(plan.join("\n"), /runs_(element_)?unfinished/);
      });

      it("a run inserted with a startTime keeps it (in-process runs start at once)", async () => {
        const run = newRun({ status: "STARTED", startTime: T0 + 7, inProcess: true });
        await store.insertRun(run);
        const got = await store.getRun(SCOPE, run.id);
        assert.equal(got?.startTime, T0 + 7);
        assert.equal(got?.inProcess, true);
      });
    });
  });
}
