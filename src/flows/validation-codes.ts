/**
 * errorCode values of deploy ValidationResult items (docs/flow-graph.md). Documented in docs/flow-graph.md; the
 * numbers are part of the API, so never renumber, only add.
 */
export const ValidationCode = {
  /** `flow` is not `{vertexes: [...], edges?: [...]}`, or a vertex/edge is malformed. */
  INVALID_GRAPH: 28050001,
  UNKNOWN_NODE_TYPE: 28050002,
  DUPLICATE_NODE_ID: 28050003,
  EDGE_UNKNOWN_VERTEX: 28050004,
  CYCLE: 28050005,
  INVALID_NODE_CONFIG: 28050006,
  INVALID_EXPRESSION: 28050007,
  ELEMENT_NOT_FOUND: 28050008,
  PYTHON_SYNTAX_ERROR: 28050009,
  MULTIPLE_OUTPUTS: 28050010,
  INVALID_CRON: 28050011,
  INVALID_TIMEZONE: 28050012,
  TRIGGER_PARAMETER_MISMATCH: 28050013,
  UNKNOWN_PLACEHOLDER: 28050014,
  INVALID_CONFIGURE: 28050015,
  DUPLICATE_TRIGGER_NAME: 28050016,
  UNREACHABLE_VERTEX: 28050017,
  /** A `${secret.NAME}` reference that is malformed or names no secret of the scope. */
  UNKNOWN_SECRET: 28050018,
} as const;

export type ValidationCodeValue = (typeof ValidationCode)[keyof typeof ValidationCode];

export const Severity = { NOTE: 0, WARNING: 1, ERROR: 2 } as const;
export type SeverityValue = (typeof Severity)[keyof typeof Severity];

export interface ValidationResult {
  errorCode: ValidationCodeValue;
  nodeId: string;
  nodeType: string;
  errorMessage: string;
  severity: SeverityValue;
  operatorId?: string;
  operatorType?: string;
  /** JSON path into the deploy request body, e.g. ["flow","vertexes",1,"config","operators",0,"expr"]. */
  path: (string | number)[];
}

/** What validation needs from the rest of the service (element store, Python parser). */
export interface ValidationContext {
  /**
   * true when the locator names one element of the type; false when it names none; a text when
   * it names no single element for another reason, said so (several of that name in the scope,
   * an unknown folder): the finding repeats it instead of calling the element missing.
   */
  elementExists(
    locator: import("../elements/locator.ts").Locator,
    type: "PY" | "DPL",
  ): boolean | string | Promise<boolean | string>;
  /**
   * null when the code parses; else the first error, `line` 1-based in `code`. Without `line`,
   * `message` is the whole finding (the code does not compile for another reason, or could not
   * be checked at all).
   */
  checkPythonSyntax(code: string): Promise<{ line?: number; message: string } | null>;
  /** Whether the scope has this secret; absent: references are only checked for their form. */
  secretExists?(name: string): Promise<boolean>;
}

/** A vertex that passed the shape checks, with its place in the request's `vertexes`. */
export interface FoundVertex {
  index: number;
  vertex: import("./graph.ts").Vertex;
}

/** How the deploy checks report a finding; the severity is ERROR unless given. */
export type AddFinding = (
  errorCode: ValidationCodeValue,
  nodeId: string,
  nodeType: string,
  path: (string | number)[],
  errorMessage: string,
  extra?: { operatorId?: string | undefined; operatorType?: string | undefined },
  severity?: SeverityValue,
) => void;
