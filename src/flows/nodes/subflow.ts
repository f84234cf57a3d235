/** `subflow`: a child run of a DPL element with the node input as parameter; output = child result. */
import { Type } from "typebox";
import type { Locator } from "../../elements/locator.ts";
import { LocatorSchema } from "../graph.ts";
import type { NodeDef } from "./types.ts";

export const subflowNode: NodeDef = {
  type: "subflow",
  configSchema: Type.Object({ element: LocatorSchema }),
  check(config) {
    const el = config.element as Locator;
    return el.folderId !== undefined && el.path !== undefined
      ? [{ path: ["element"], message: "folderId and path are mutually exclusive" }]
      : [];
  },
  async run(ctx) {
    const result = await ctx.deps.runSubflow({
      nodeId: ctx.vertex.id,
      element: ctx.config.element as Locator,
      parameter: ctx.input,
      // The child is tied to this signal: terminating the parent terminates the child (docs/flow-graph.md).
      signal: ctx.signal,
    });
    if (!result.ok) throw new Error(result.error);
    return result.value;
  },
};
