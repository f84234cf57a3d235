import { type Static, Type } from "typebox";

/**
 * The export file (docs/export-import.md): one JSON document holding flows with their revisions
 * and configure, and the Python elements they use. `formatVersion` changes only when an older
 * Sluice could not read a newer file.
 */

export const BUNDLE_FORMAT = "sluice-export";

/**
 * The largest revision an import writes: a version column is a 32-bit integer, and the deploys
 * after an import number on from its highest revision, so an import leaves them room.
 */
export const MAX_IMPORT_VERSION = 1_000_000_000;
const ImportVersion = Type.Integer({ minimum: 1, maximum: MAX_IMPORT_VERSION });

export const BundleRevision = Type.Object({
  version: ImportVersion,
  name: Type.String(),
  flow: Type.Object({}, { additionalProperties: true, description: "Graph: {vertexes, edges}" }),
  configure: Type.Object({}, { additionalProperties: true, description: "Configure" }),
  createdAt: Type.Integer({
    minimum: 0,
    maximum: Number.MAX_SAFE_INTEGER,
    description: "epoch ms of the deploy on the source",
  }),
  userId: Type.Optional(Type.String()),
});

export const BundleFlow = Type.Object({
  path: Type.String({ description: "folder path" }),
  name: Type.String({ minLength: 1 }),
  status: Type.Union([Type.Literal("DRAFT"), Type.Literal("APPROVED"), Type.Literal("OBSOLETE")]),
  releaseVersion: ImportVersion,
  description: Type.Optional(Type.Record(Type.String(), Type.String())),
  revisions: Type.Array(BundleRevision, {
    minItems: 1,
    description: "every revision, or only the release (`allRevisions: false`), oldest first",
  }),
});

export const BundleScript = Type.Object({
  path: Type.String({ description: "folder path" }),
  name: Type.String({ minLength: 1 }),
  kind: Type.Union([Type.Literal("module"), Type.Literal("package")]),
  // Strict base64: Buffer.from would skip stray characters and import an empty or cut module.
  content: Type.String({
    pattern: "^[A-Za-z0-9+/]*={0,2}$",
    description: "base64 of the .py file or the package zip",
  }),
  sha256: Type.String({ description: "hex SHA-256 of the content, for people and diffs" }),
  version: Type.Optional(
    Type.Integer({
      minimum: 1,
      description:
        "the source's number of the version whose content this is: the one the exported releases pin, else the newest; informational, the target numbers its own versions (docs/export-import.md)",
    }),
  ),
});

export const Bundle = Type.Object({
  format: Type.Literal(BUNDLE_FORMAT),
  formatVersion: Type.Literal(1),
  exportedAt: Type.String({ description: "ISO time" }),
  source: Type.Object({ app: Type.String(), space: Type.String() }),
  allRevisions: Type.Boolean(),
  flows: Type.Array(BundleFlow),
  scripts: Type.Array(BundleScript),
});
export type Bundle = Static<typeof Bundle>;
export type BundleFlow = Static<typeof BundleFlow>;
export type BundleRevision = Static<typeof BundleRevision>;
export type BundleScript = Static<typeof BundleScript>;

const Locator = Type.Object({
  elementName: Type.Optional(Type.String({ minLength: 1 })),
  elementType: Type.Optional(Type.String()),
  folderId: Type.Optional(Type.String()),
  path: Type.Optional(Type.String()),
  elementId: Type.Optional(Type.Union([Type.String(), Type.Integer()])),
});

export const ExportBody = Type.Object({
  path: Type.Optional(Type.String({ description: "a folder: it and every folder below it" })),
  folderId: Type.Optional(Type.String()),
  elements: Type.Optional(
    Type.Array(Locator, { maxItems: 1000, description: "flows (DPL) and scripts (PY)" }),
  ),
  allRevisions: Type.Optional(
    Type.Boolean({ description: "every revision (default) or only the release" }),
  ),
});
export type ExportRequest = Static<typeof ExportBody>;

export const ImportBody = Type.Object({
  bundle: Bundle,
  dryRun: Type.Optional(
    Type.Boolean({
      description: "answer the plan, or the refusal the import would get, and write nothing",
    }),
  ),
});

const ImportItem = Type.Object({
  elementType: Type.Union([Type.Literal("DPL"), Type.Literal("PY")]),
  path: Type.String(),
  elementName: Type.String(),
  versions: Type.Optional(Type.Array(Type.Integer(), { description: "revisions written" })),
  reason: Type.Optional(Type.String()),
});
export type ImportItem = Static<typeof ImportItem>;

export const ImportReport = Type.Object({
  dryRun: Type.Boolean(),
  created: Type.Array(ImportItem),
  updated: Type.Array(ImportItem),
  skipped: Type.Array(ImportItem),
  conflicts: Type.Array(ImportItem),
});
export type ImportReport = Static<typeof ImportReport>;
