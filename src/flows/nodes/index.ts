/** The node type registry. */
import type { NodeType } from "../graph.ts";
import { httpNode } from "./http.ts";
import { inputNode } from "./input.ts";
import { mergeNode } from "./merge.ts";
import { outputNode } from "./output.ts";
import { scriptNode } from "./script.ts";
import { subflowNode } from "./subflow.ts";
import { transformNode } from "./transform.ts";
import type { NodeDef } from "./types.ts";

export type { FlowDeps, NodeContext, NodeDef, ScriptResult } from "./types.ts";

export const NODES: Readonly<Record<NodeType, NodeDef>> = {
  input: inputNode,
  transform: transformNode,
  script: scriptNode,
  http: httpNode,
  subflow: subflowNode,
  merge: mergeNode,
  output: outputNode,
};
