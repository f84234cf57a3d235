import { Type } from "typebox";

/** A failed script's traceback in a run's detail (docs/live-progress.md, "Tracebacks"). */
export const TracebackSchema = Type.Object(
  {
    type: Type.String({ description: "the exception's type" }),
    message: Type.String(),
    frames: Type.Array(
      Type.Object({
        file: Type.String({
          description: "the user's file: `<script>.py`, or a path in a package",
        }),
        line: Type.Integer(),
        function: Type.String(),
        code: Type.String({ description: "the source line" }),
      }),
      { description: "the user's own frames, innermost last; the harness's are hidden" },
    ),
    text: Type.String({ description: "Python's rendering of the traceback" }),
    nodeId: Type.Optional(Type.String({ description: "a flow run: the failed script node" })),
  },
  { description: "a script that raised: where, in the user's own files" },
);
