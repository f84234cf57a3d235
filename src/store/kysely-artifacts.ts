import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";

/** Tables of migration 017 (docs/artifacts.md); a type, as `withTables` needs an index signature. */
export type ArtifactTables = {
  artifacts: {
    run_id: string;
    name: string;
    node_id: string | null;
    size: number;
    content_type: string;
    sha256: string;
    created_at: number;
    content: Uint8Array;
  };
  artifact_sets: {
    run_id: string;
    collected_at: number;
    files: number;
    bytes: number;
    skipped: string;
  };
};

/** One kept file, without its bytes. */
export interface ArtifactInfo {
  runId: string;
  nodeId: string | null;
  name: string;
  size: number;
  contentType: string;
  sha256: string;
  createdAt: number;
}

export interface ArtifactSkip {
  name: string;
  reason: string;
  size?: number | undefined;
}

/** What a run's collection found: written after its files, so it marks the collection done. */
export interface ArtifactSet {
  collectedAt: number;
  files: number;
  bytes: number;
  skipped: ArtifactSkip[];
  /** Skipped files beyond those listed. */
  skippedMore: number;
}

/**
 * The store of artifacts: a narrow interface beside the Store, over the shared database. Callers
 * check the run's scope first (a run of another scope is not found); these methods take run IDs.
 */
export interface ArtifactStore {
  /** Inserts one file (a second insert of the same name is ignored: a collection repeated). */
  putFile(file: ArtifactInfo, bytes: Uint8Array): Promise<void>;
  putSet(runId: string, set: ArtifactSet): Promise<void>;
  /** Whether the run's collection ended (its set is written). */
  collected(runId: string): Promise<boolean>;
  /** The run's files in name order, and its set (undefined: not collected, or nothing kept). */
  list(runId: string): Promise<{ files: ArtifactInfo[]; set: ArtifactSet | undefined }>;
  get(runId: string, name: string): Promise<{ info: ArtifactInfo; bytes: Buffer } | undefined>;
  /** One file's description, without reading its bytes. */
  info(runId: string, name: string): Promise<ArtifactInfo | undefined>;
  /** Deletes every artifact of the runs (a run deleted, or gone while its files were saved). */
  deleteOf(runIds: readonly string[]): Promise<void>;
}

export function createArtifactStore(base: Kysely<Database>): ArtifactStore {
  const db = base.withTables<ArtifactTables>();
  return {
    async putFile(f, bytes) {
      await db
        .insertInto("artifacts")
        .values({
          run_id: f.runId,
          name: f.name,
          node_id: f.nodeId,
          size: f.size,
          content_type: f.contentType,
          sha256: f.sha256,
          created_at: f.createdAt,
          content: bytes,
        })
        .onConflict((oc) => oc.columns(["run_id", "name"]).doNothing())
        .execute();
    },
    async putSet(runId, s) {
      const skipped = JSON.stringify({ skipped: s.skipped, skippedMore: s.skippedMore });
      const row = { collected_at: s.collectedAt, files: s.files, bytes: s.bytes, skipped };
      await db
        .insertInto("artifact_sets")
        .values({ run_id: runId, ...row })
        .onConflict((oc) => oc.column("run_id").doUpdateSet(row))
        .execute();
    },
    async collected(runId) {
      const row = await db
        .selectFrom("artifact_sets")
        .select("run_id")
        .where("run_id", "=", runId)
        .executeTakeFirst();
      return row !== undefined;
    },
    async list(runId) {
      const rows = await db
        .selectFrom("artifacts")
        .select(INFO)
        .where("run_id", "=", runId)
        .orderBy("name")
        .execute();
      const set = await db
        .selectFrom("artifact_sets")
        .selectAll()
        .where("run_id", "=", runId)
        .executeTakeFirst();
      return { files: rows.map(toInfo), set: set && toSet(set) };
    },
    async get(runId, name) {
      const row = await db
        .selectFrom("artifacts")
        .select([...INFO, "content"])
        .where("run_id", "=", runId)
        .where("name", "=", name)
        .executeTakeFirst();
      if (!row) return undefined;
      const c = row.content;
      return { info: toInfo(row), bytes: Buffer.from(c.buffer, c.byteOffset, c.byteLength) };
    },
    async info(runId, name) {
      const row = await db
        .selectFrom("artifacts")
        .select(INFO)
        .where("run_id", "=", runId)
        .where("name", "=", name)
        .executeTakeFirst();
      return row && toInfo(row);
    },
    deleteOf: (runIds) => deleteArtifactsOf(base, runIds),
  };
}

/** Deletes the artifacts of `runIds`; takes a transaction, so a run and its files go together. */
export async function deleteArtifactsOf(
  base: Kysely<Database>,
  runIds: readonly string[],
): Promise<void> {
  if (runIds.length === 0) return;
  const db = base.withTables<ArtifactTables>();
  await db.deleteFrom("artifacts").where("run_id", "in", runIds).execute();
  await db.deleteFrom("artifact_sets").where("run_id", "in", runIds).execute();
}

const INFO = ["run_id", "node_id", "name", "size", "content_type", "sha256", "created_at"] as const;

type InfoRow = Pick<ArtifactTables["artifacts"], (typeof INFO)[number]>;

function toInfo(r: InfoRow): ArtifactInfo {
  return {
    runId: r.run_id,
    nodeId: r.node_id,
    name: r.name,
    size: r.size,
    contentType: r.content_type,
    sha256: r.sha256,
    createdAt: r.created_at,
  };
}

function toSet(r: ArtifactTables["artifact_sets"]): ArtifactSet {
  const s = JSON.parse(r.skipped) as { skipped: ArtifactSkip[]; skippedMore: number };
  return {
    collectedAt: r.collected_at,
    files: r.files,
    bytes: r.bytes,
    skipped: s.skipped,
    skippedMore: s.skippedMore,
  };
}
