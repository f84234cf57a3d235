/**
 * The CLI's HTTP client: where the server is and who the caller is, from flags or the
 * environment (flags win), and one request function that turns every outcome into an exit code.
 */

export interface Connection {
  url: string;
  dataflowPrefix: string;
  scriptPrefix: string;
  headers: Record<string, string>;
}

/** Exit codes scripts can rely on (docs/cli.md). */
export const Exit = {
  OK: 0,
  FAILED: 1,
  USAGE: 2,
  UNREACHABLE: 3,
  UNAUTHORIZED: 4,
  NOT_FOUND: 5,
  NOT_FINISHED: 6,
  CANCELED: 7,
  INVALID: 8,
} as const;
export type ExitCode = (typeof Exit)[keyof typeof Exit];

export class CliError extends Error {
  readonly exit: ExitCode;
  readonly code: number | undefined;
  /** The run or task the failure is about (its answer's x-task-id or x-run-id), for `logs`. */
  readonly runId: string | undefined;
  constructor(exit: ExitCode, message: string, code?: number, runId?: string) {
    super(message);
    this.exit = exit;
    this.code = code;
    this.runId = runId;
  }
}

/** Maps an envelope's failure code to an exit code. */
export function exitFor(code: number): ExitCode {
  if (code === 401 || code === 403) return Exit.UNAUTHORIZED;
  if (code === 400) return Exit.USAGE;
  if ([404, 28010001, 28010002, 28010003, 28020002, 28030003, 28090001].includes(code))
    return Exit.NOT_FOUND;
  if ([28020003, 28020006, 28030002, 28030004].includes(code)) return Exit.NOT_FINISHED;
  if (code === 28020005 || code === 28030005) return Exit.CANCELED;
  return Exit.FAILED;
}

export const CONNECTION_OPTIONS = {
  url: { type: "string" },
  app: { type: "string" },
  space: { type: "string" },
  user: { type: "string" },
  token: { type: "string" },
  cookie: { type: "string" },
  json: { type: "boolean", default: false },
  help: { type: "boolean", short: "h", default: false },
} as const;

export function connect(
  values: Record<string, string | boolean | string[] | undefined>,
  env: Record<string, string | undefined>,
): Connection {
  const pick = (flag: string, name: string): string | undefined => {
    const v = values[flag];
    return typeof v === "string" ? v : env[name] || undefined;
  };
  const headers: Record<string, string> = {};
  const set = (h: string, v: string | undefined) => {
    if (v !== undefined) headers[h] = v;
  };
  set("app", pick("app", "SLUICE_APP"));
  set("space", pick("space", "SLUICE_SPACE"));
  set("user", pick("user", "SLUICE_USER"));
  set("token", pick("token", "SLUICE_TOKEN"));
  const cookie = pick("cookie", "SLUICE_COOKIE");
  if (cookie) headers.cookie = cookie.startsWith("session=") ? cookie : `session=${cookie}`;
  return {
    url: (pick("url", "SLUICE_URL") ?? "http://127.0.0.1:8080").replace(/\/+$/, ""),
    dataflowPrefix: env.DATAFLOW_PREFIX ?? "/dataflow-3-0",
    scriptPrefix: env.SCRIPT_PREFIX ?? "/script",
    headers,
  };
}

export interface Answer<T> {
  data: T;
  headers: Headers;
}

/**
 * One request. An envelope with status false becomes a CliError carrying its code; a transport
 * failure is UNREACHABLE. `raw` answers the parsed body as is (the external run-sync success).
 */
export async function request<T>(
  conn: Connection,
  method: string,
  path: string,
  opts: { body?: unknown; form?: FormData; raw?: boolean } = {},
): Promise<Answer<T>> {
  const headers: Record<string, string> = { ...conn.headers };
  let body: string | FormData | undefined;
  if (opts.form) body = opts.form;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers["content-type"] = "application/json";
  }
  let res: Response;
  try {
    res = await fetch(conn.url + path, { method, headers, body });
  } catch (err) {
    const cause =
      err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : "";
    throw new CliError(Exit.UNREACHABLE, `cannot reach ${conn.url}${cause}`);
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new CliError(
      Exit.UNREACHABLE,
      `${method} ${path}: HTTP ${res.status}, not JSON: ${text.slice(0, 200)}`,
    );
  }
  const env = parsed as { status?: unknown; code?: unknown; message?: unknown; data?: unknown };
  const isEnvelope =
    typeof env === "object" && env !== null && typeof env.status === "boolean" && "data" in env;
  if (isEnvelope && env.status === false) {
    const code = typeof env.code === "number" ? env.code : 999999;
    const runId = res.headers.get("x-task-id") ?? res.headers.get("x-run-id") ?? undefined;
    throw new CliError(
      exitFor(code),
      `${String(env.message ?? "failed")} (code ${code})`,
      code,
      runId,
    );
  }
  if (opts.raw) return { data: parsed as T, headers: res.headers };
  if (!isEnvelope)
    throw new CliError(Exit.FAILED, `${method} ${path}: unexpected answer: ${text.slice(0, 200)}`);
  return { data: env.data as T, headers: res.headers };
}
