/**
 * The error catalog of docs/errors.md, in one place. Everything the service answers as a failure is a
 * SluiceError; the HTTP error handler turns it into the envelope.
 */
export const ErrorCode = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  TOO_LARGE: 413,
  TOO_MANY: 429,
  BUSINESS: 999999,
  ELEMENT_NOT_FOUND: 28010001,
  ELEMENT_NOT_UNIQUE: 28010002,
  FOLDER_NOT_FOUND: 28010003,
  REVISION_NOT_FOUND: 28010004,
  REVISION_LIMIT: 28010005,
  ELEMENT_LIMIT: 28010006,
  SCHEDULE_LIMIT: 28010007,
  STORAGE_LIMIT: 28010008,
  FLOW_NOT_RUNNABLE: 28020001,
  RUN_NOT_FOUND: 28020002,
  RUN_NOT_FINISHED: 28020003,
  RUN_FAILED: 28020004,
  RUN_CANCELED: 28020005,
  RUN_WAIT_ELAPSED: 28020006,
  RUN_NOT_RERUNNABLE: 28020007,
  RUN_NOT_RESUMABLE: 28020008,
  SCRIPT_FAILED: 28030001,
  SCRIPT_TIMEOUT: 28030002,
  TASK_NOT_FOUND: 28030003,
  TASK_NOT_FINISHED: 28030004,
  TASK_CANCELED: 28030005,
  SCRIPT_VERSION_NOT_FOUND: 28030006,
  IMPORT_CONFLICT: 28040001,
  SECRET_NOT_FOUND: 28060001,
  SECRET_IN_USE: 28060002,
  SECRETS_UNAVAILABLE: 28060003,
  ARTIFACT_NOT_FOUND: 28090001,
} as const;

export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

export type Language = "en" | "zh-cn";

/** Message templates; `{0}`, `{1}` are filled from the error's args. */
const messages: Record<ErrorCodeValue, { en: string; "zh-cn": string }> = {
  400: { en: "invalid request: {0}", "zh-cn": "请求参数错误：{0}" },
  401: { en: "UNAUTHORIZED", "zh-cn": "UNAUTHORIZED" },
  403: { en: "forbidden: {0}", "zh-cn": "无权执行：{0}" },
  404: { en: "no such endpoint: {0}", "zh-cn": "接口不存在：{0}" },
  413: { en: "payload too large: {0}", "zh-cn": "请求内容过大：{0}" },
  429: { en: "too many requests: {0}", "zh-cn": "请求过多：{0}" },
  999999: { en: "{0}", "zh-cn": "{0}" },
  28010001: { en: "element does not exist: {0}", "zh-cn": "元素不存在：{0}" },
  28010002: {
    en: "element name not unique: {0}; supply path or folderId",
    "zh-cn": "元素名称不唯一：{0}；请提供 path 或 folderId",
  },
  28010003: { en: "folder does not exist: {0}", "zh-cn": "目录不存在：{0}" },
  28010004: {
    en: "revision does not exist: {0} version {1}",
    "zh-cn": "版本不存在：{0} 版本 {1}",
  },
  28010005: {
    en: "revision limit reached: flow {0} holds {1} revisions, at least as many as LIMIT_REVISIONS_PER_FLOW keeps, and none of them may be removed (the release, staged revisions and those of unfinished runs are kept); activate a staged revision and deploy with release, or wait for runs to end",
    "zh-cn":
      "已达版本数上限：流程 {0} 已有 {1} 个版本（LIMIT_REVISIONS_PER_FLOW），且没有可删除的版本（发布版本、暂存版本和未结束运行所用的版本均保留）；请启用一个暂存版本并以发布方式部署，或等待运行结束",
  },
  28010006: {
    en: "element limit reached: app {0} holds {1} elements (flows and scripts of all its spaces), and LIMIT_ELEMENTS_PER_APP allows {2}; refused, nothing stored: {3} (new revisions and versions of existing elements are still accepted)",
    "zh-cn":
      "已达元素数上限：应用 {0} 已有 {1} 个元素（所有空间的流程和脚本），LIMIT_ELEMENTS_PER_APP 允许 {2} 个；已拒绝且未写入：{3}（已有元素仍可部署新版本）",
  },
  28010007: {
    en: "schedule limit reached: app {0} would have {1} active schedules (cron triggers of its APPROVED flows), more than LIMIT_SCHEDULES_PER_APP ({2}) allows; refused, nothing changed: {3}; deactivate other flows or remove cron triggers first",
    "zh-cn":
      "已达定时任务数上限：应用 {0} 将有 {1} 个生效的定时任务（已启用流程的 cron 触发器），超过 LIMIT_SCHEDULES_PER_APP（{2}）；已拒绝且未做更改：{3}；请先停用其他流程或删除 cron 触发器",
  },
  28010008: {
    en: "storage limit reached: app {0} stores {1} bytes (runs' parameters, results, output and node logs, flow revisions and script versions, all its spaces), and LIMIT_STORED_BYTES_PER_APP allows {2}; refused, nothing stored: {3}; delete runs (POST /run/delete) or wait for run retention to free space",
    "zh-cn":
      "已达存储上限：应用 {0} 已存储 {1} 字节（所有空间的运行参数、结果、输出和节点日志，流程版本和脚本版本），LIMIT_STORED_BYTES_PER_APP 允许 {2} 字节；已拒绝且未写入：{3}；请删除运行记录（POST /run/delete）或等待运行记录保留期满后释放空间",
  },
  28020001: {
    en: "flow not runnable: {0} has no approved release (status {1})",
    "zh-cn": "流程不可运行：{0} 没有已启用的发布（状态 {1}）",
  },
  28020002: { en: "run does not exist: {0}", "zh-cn": "运行记录不存在：{0}" },
  28020003: {
    en: "run {0} not finished yet (status {1})",
    "zh-cn": "运行 {0} 尚未结束（状态 {1}）",
  },
  28020004: { en: "{0}", "zh-cn": "{0}" },
  28020005: { en: "run {0} was canceled", "zh-cn": "运行 {0} 已取消" },
  28020006: {
    en: "wait elapsed; run {0} goes on (status {1})",
    "zh-cn": "等待超时；运行 {0} 仍在继续（状态 {1}）",
  },
  28020007: { en: "run {0} cannot be re-run: {1}", "zh-cn": "运行 {0} 无法重新运行：{1}" },
  28020008: { en: "run {0} cannot be resumed: {1}", "zh-cn": "运行 {0} 无法从失败节点继续：{1}" },
  28030001: { en: "{0}", "zh-cn": "{0}" },
  28030002: { en: "script timeout: task {0} {1}", "zh-cn": "脚本超时：任务 {0} {1}" },
  28030003: { en: "task does not exist: {0}", "zh-cn": "任务不存在：{0}" },
  28030004: {
    en: "task {0} not finished yet (status {1})",
    "zh-cn": "任务 {0} 尚未结束（状态 {1}）",
  },
  28030005: { en: "task {0} was canceled", "zh-cn": "任务 {0} 已取消" },
  28030006: {
    en: "script version does not exist: {0} version {1}",
    "zh-cn": "脚本版本不存在：{0} 版本 {1}",
  },
  28040001: {
    en: "import refused, nothing was written: {0}",
    "zh-cn": "导入被拒绝，未写入任何内容：{0}",
  },
  28060001: { en: "secret does not exist: {0}", "zh-cn": "密钥不存在：{0}" },
  28060002: {
    en: "secret {0} is used by live flows: {1}",
    "zh-cn": "密钥 {0} 正被已启用的流程使用：{1}",
  },
  28060003: {
    en: "secrets are not available: SECRETS_KEY is not set",
    "zh-cn": "密钥功能不可用：未设置 SECRETS_KEY",
  },
  28090001: { en: "the run kept no file named {0}", "zh-cn": "该运行没有保留名为 {0} 的文件" },
};

export class SluiceError extends Error {
  readonly code: ErrorCodeValue;
  readonly args: readonly string[];
  /** Extra response headers (x-run-id, x-task-id, x-task-status). */
  readonly headers: Record<string, string>;

  constructor(
    code: ErrorCodeValue,
    args: readonly string[] = [],
    headers: Record<string, string> = {},
  ) {
    super(formatMessage(code, args, "en"));
    this.name = "SluiceError";
    this.code = code;
    this.args = args;
    this.headers = headers;
  }

  messageIn(language: Language): string {
    return formatMessage(this.code, this.args, language);
  }
}

export function formatMessage(
  code: ErrorCodeValue,
  args: readonly string[],
  language: Language,
): string {
  const template = messages[code][language];
  return template.replace(/\{(\d)\}/g, (_, i: string) => args[Number(i)] ?? "");
}

/** The `language` request header as given (its first value): descriptions are picked by it. */
export function languageHeader(header: string | string[] | undefined): string | undefined {
  return Array.isArray(header) ? header[0] : header;
}

/** The language of messages (docs/errors.md): Chinese for any `zh…` header, else English. */
export function languageOf(header: string | string[] | undefined): Language {
  return languageHeader(header)?.toLowerCase().startsWith("zh") ? "zh-cn" : "en";
}

export const badRequest = (what: string) => new SluiceError(ErrorCode.BAD_REQUEST, [what]);

/**
 * The text of anything thrown. JSONata throws plain objects with a `message` (not Error
 * instances), which String() would turn into "[object Object]" in run errors and handler payloads.
 */
export function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (
    typeof err === "object" &&
    err !== null &&
    "message" in err &&
    typeof err.message === "string"
  )
    return err.message;
  return String(err);
}

/**
 * What stops the service at start: a setting with a value it cannot take, a data directory it
 * cannot write, a database it cannot reach, an address it cannot listen on. The message names the
 * setting and what was given (never a secret's value), and `sluice serve` prints it as one line,
 * without a stack trace (docs/operations.md, "Start-up").
 */
export class StartupError extends Error {
  override readonly name = "StartupError";
}
