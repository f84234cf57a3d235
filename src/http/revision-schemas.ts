import { Type } from "typebox";
import { FlowStatus } from "./flow-schemas.ts";

/** TypeBox schemas of flow revisions, releases and script versions (docs/dataflow-service.md). */

const Str = Type.String();
const Int = Type.Integer();
const Opt = Type.Optional;
const ElementId = Type.Union([Type.String(), Type.Integer()]);
/** A version column is a 32-bit integer (PostgreSQL `integer`): a larger one is a 400, not a 999999. */
export const MAX_VERSION = 2_147_483_647;
const Version = Type.Integer({
  minimum: 1,
  maximum: MAX_VERSION,
  description: "revision version (1, 2, …)",
});

/** How the new endpoints name an element: as every other endpoint does (docs/dataflow-service.md). */
const LocatorFields = {
  elementName: Opt(Type.String({ minLength: 1 })),
  elementType: Opt(Str),
  folderId: Opt(Str),
  path: Opt(Str),
  elementId: Opt(ElementId),
};
const PageFields = {
  pageNo: Type.Integer({ minimum: 0, description: "from 0" }),
  pageSize: Type.Integer({ minimum: 1, maximum: 100 }),
};

export const RevisionsBody = Type.Object({ ...LocatorFields, ...PageFields });
export const RevisionBody = Type.Object({ ...LocatorFields, version: Version });
export const RevisionDiffBody = Type.Object({
  ...LocatorFields,
  fromVersion: Version,
  toVersion: Version,
});

export const ScriptPin = Type.Object({
  nodeId: Str,
  elementId: Str,
  elementName: Str,
  path: Str,
  version: Int,
  sha256: Str,
});

const ElementSummary = Type.Object({
  elementId: Str,
  elementName: Str,
  elementType: Type.Literal("DPL"),
  folderId: Str,
  path: Str,
  status: FlowStatus,
  releaseVersion: Type.Union([Int, Type.Null()]),
});

export const RevisionSummary = Type.Object({
  version: Int,
  revisionName: Str,
  deployedBy: Type.Union([Str, Type.Null()]),
  deployedAt: Type.Integer({ description: "epoch ms" }),
  releasedAt: Type.Union([Int, Type.Null()], {
    description: "when it last became the release; null: never (staged)",
  }),
  status: FlowStatus,
  stage: Type.Union([Type.Literal("release"), Type.Literal("staged"), Type.Literal("past")]),
  live: Type.Boolean({ description: "the release of an APPROVED flow: what /run executes" }),
  scriptPins: Type.Union([Type.Array(ScriptPin), Type.Null()]),
});

const PageMeta = {
  element: ElementSummary,
  pageNo: Int,
  pageSize: Int,
  totalCount: Int,
  totalPage: Int,
};

export const RevisionsPage = Type.Object({ ...PageMeta, items: Type.Array(RevisionSummary) });

export const RevisionDetail = Type.Object({
  element: ElementSummary,
  ...RevisionSummary.properties,
  flow: Type.Unknown({ description: "the graph exactly as deployed" }),
  configure: Type.Unknown({ description: "the configure exactly as deployed" }),
});

const PathList = Type.Array(Str, { description: "JSON Pointers (RFC 6901) that changed" });
const VertexRef = Type.Object({ id: Str, type: Str });
const EdgeRef = Type.Object({
  key: Type.String({ description: "edge id, else source->target (#n for repeats)" }),
  source: Str,
  target: Str,
});

export const RevisionDiff = Type.Object({
  element: ElementSummary,
  from: RevisionSummary,
  to: RevisionSummary,
  vertexes: Type.Object({
    added: Type.Array(VertexRef),
    removed: Type.Array(VertexRef),
    changed: Type.Array(Type.Object({ ...VertexRef.properties, paths: PathList })),
  }),
  edges: Type.Object({
    added: Type.Array(EdgeRef),
    removed: Type.Array(EdgeRef),
    changed: Type.Array(Type.Object({ ...EdgeRef.properties, paths: PathList })),
  }),
  configure: Type.Object({ changed: PathList }),
});

export const ReleaseEvent = Type.Object({
  version: Type.Union([Int, Type.Null()], { description: "the release after the change" }),
  action: Type.Union([
    Type.Literal("DEPLOY"),
    Type.Literal("ACTIVATE"),
    Type.Literal("ROLLBACK"),
    Type.Literal("DEACTIVATE"),
    Type.Literal("IMPORT"),
  ]),
  status: FlowStatus,
  userId: Type.Union([Str, Type.Null()]),
  at: Type.Integer({ description: "epoch ms" }),
  scriptPins: Type.Union([Type.Array(ScriptPin), Type.Null()]),
});

export const ReleasesPage = Type.Object({ ...PageMeta, items: Type.Array(ReleaseEvent) });

// --- script versions (docs/script-service.md, "Script versions") ---

const ScriptLocatorFields = {
  elementName: Type.String({ minLength: 1 }),
  elementType: Opt(Str),
  folderId: Opt(Str),
  path: Opt(Str),
};

export const ScriptVersionsBody = Type.Object({ ...ScriptLocatorFields, ...PageFields });
export const ScriptVersionBody = Type.Object({
  ...ScriptLocatorFields,
  version: Opt(
    Type.Integer({ minimum: 1, maximum: MAX_VERSION, description: "absent: the newest" }),
  ),
});

export const ScriptVersionInfo = Type.Object({
  version: Int,
  kind: Type.Union([Type.Literal("module"), Type.Literal("package")]),
  sha256: Str,
  size: Type.Integer({ description: "bytes of the .py file or the .zip" }),
  uploadedBy: Type.Union([Str, Type.Null()]),
  uploadedAt: Type.Integer({ description: "epoch ms" }),
  env: Type.Union(
    [
      Type.Object({
        hash: Type.String({ description: "its directory DATA_DIR/envs/<hash>" }),
        packages: Type.Array(Type.String(), { description: "name==version, sorted" }),
        declared: Type.Array(Type.String(), { description: "the projects the element declared" }),
      }),
      Type.Null(),
    ],
    {
      description:
        "the environment of its dependencies; null: none declared (docs/script-dependencies.md)",
    },
  ),
});

export const ScriptVersionsPage = Type.Object({
  element: Type.Object({ elementId: Str, elementName: Str, path: Str, folderId: Str }),
  pageNo: Int,
  pageSize: Int,
  totalCount: Int,
  totalPage: Int,
  items: Type.Array(ScriptVersionInfo),
});

export const ScriptVersionDetail = Type.Object({
  element: Type.Object({ elementId: Str, elementName: Str, path: Str, folderId: Str }),
  ...ScriptVersionInfo.properties,
  source: Opt(Type.String({ description: "module: the .py source" })),
  files: Opt(
    Type.Array(Type.Object({ name: Str, size: Int }), { description: "package: the zip's files" }),
  ),
  entry: Opt(
    Type.Object({ name: Str, source: Str }, { description: "package: its main.py and source" }),
  ),
});
