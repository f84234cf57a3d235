/** `output`: passes its input through; the executor takes that as the run result. */
import { Type } from "typebox";
import type { NodeDef } from "./types.ts";

export const outputNode: NodeDef = {
  type: "output",
  configSchema: Type.Object({}),
  async run(ctx) {
    return ctx.input;
  },
};
