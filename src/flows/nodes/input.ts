/** `input`: emits the run parameter. Its schema is checked when the run is requested (see checkRunParameter). */
import { Type } from "typebox";
import type { NodeDef } from "./types.ts";

export const inputNode: NodeDef = {
  type: "input",
  configSchema: Type.Object({
    schema: Type.Optional(Type.Union([Type.Object({}), Type.Boolean()])),
  }),
  async run(ctx) {
    return ctx.params;
  },
};
