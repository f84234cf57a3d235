import { Type } from "typebox";

/** TypeBox schemas of the artifact endpoints (docs/artifacts.md). */

export const ArtifactListParams = Type.Object({ runId: Type.String({ minLength: 1 }) });

export const ArtifactListQuery = Type.Object({
  nodeId: Type.Optional(
    Type.String({ minLength: 1, description: "Only the files this script node wrote." }),
  ),
});

export const ArtifactParams = Type.Object({
  runId: Type.String({ minLength: 1 }),
  name: Type.String({
    minLength: 1,
    description:
      "The file's name as listed, URL-encoded as one path segment (`out%2Freport.csv`); `..`, absolute paths, empty segments, `\\` and control characters are refused (400).",
  }),
});

const Artifact = Type.Object({
  name: Type.String({
    description: "Path relative to the run's working directory, `/`-separated.",
  }),
  nodeId: Type.Union([Type.String(), Type.Null()], {
    description: "The script node that last wrote it; null when unknown.",
  }),
  size: Type.Integer(),
  contentType: Type.String({ description: "Guessed from the name's extension." }),
  sha256: Type.String(),
  createTime: Type.Integer({ description: "When it was kept (epoch ms)." }),
});

const Skipped = Type.Object({
  name: Type.String(),
  reason: Type.String(),
  size: Type.Optional(Type.Integer()),
});

export const ArtifactList = Type.Object({
  runId: Type.String(),
  collected: Type.Boolean({
    description:
      "false while the run's files are being kept (or when the run keeps none): the list may grow.",
  }),
  files: Type.Array(Artifact),
  skipped: Type.Array(Skipped, { description: "Files not kept, and why (at most 100)." }),
  skippedMore: Type.Integer({ description: "Skipped files beyond those listed." }),
});
