/**
 * Texts of handler notifications and of the handler errors recorded on runs, in the two message
 * languages of docs/errors.md. Kept apart from src/errors.ts: these are not response error codes.
 */
import type { Language } from "../../errors.ts";
import type { FailureEvent } from "./types.ts";

const TEXT = {
  en: {
    failureTitle: "Sluice: run {runId} of {elementName} failed",
    timeoutTitle: "Sluice: run {runId} of {elementName} passed its time limit",
    run: "Run",
    flow: "Flow",
    version: "Version",
    status: "Status",
    trigger: "Trigger",
    failedNode: "Failed node",
    error: "Error",
    created: "Created",
    started: "Started",
    ended: "Ended",
    sentinel: "run {runId} is still running after its time limit of {seconds}s",
    noSmtp: "e-mail is not configured on this server (SMTP_URL)",
    httpStatus: "webhook answered HTTP {status}: {body}",
    refused: "webhook refused the message: {body}",
    unreachable: "webhook could not be reached: {reason}",
    privateAddress:
      "webhook address {host} is private or loopback, which this server does not allow",
    smtpFailed: "e-mail could not be sent: {reason}",
    customEnded: "handler run {handlerRunId} ended {status}: {reason}",
    customUnfinished: "handler run {handlerRunId} did not end within {seconds}s",
    customStart: "handler element could not be run: {reason}",
  },
  "zh-cn": {
    failureTitle: "Sluice：{elementName} 的运行 {runId} 失败",
    timeoutTitle: "Sluice：{elementName} 的运行 {runId} 已超过运行时限",
    run: "运行",
    flow: "流程",
    version: "版本",
    status: "状态",
    trigger: "触发方式",
    failedNode: "失败节点",
    error: "错误",
    created: "创建时间",
    started: "开始时间",
    ended: "结束时间",
    sentinel: "运行 {runId} 已超过 {seconds} 秒的时限，仍在继续",
    noSmtp: "本服务未配置邮件（SMTP_URL）",
    httpStatus: "Webhook 返回 HTTP {status}：{body}",
    refused: "Webhook 拒绝了消息：{body}",
    unreachable: "无法连接 Webhook：{reason}",
    privateAddress: "Webhook 地址 {host} 是内网或本机地址，本服务不允许",
    smtpFailed: "邮件发送失败：{reason}",
    customEnded: "处理运行 {handlerRunId} 结束状态 {status}：{reason}",
    customUnfinished: "处理运行 {handlerRunId} 未在 {seconds} 秒内结束",
    customStart: "无法运行处理元素：{reason}",
  },
} as const;

export type MessageKey = keyof (typeof TEXT)["en"];

export function t(
  language: Language,
  key: MessageKey,
  args: Record<string, string | number> = {},
): string {
  return TEXT[language][key].replace(/\{(\w+)\}/g, (m, k: string) =>
    k in args ? String(args[k]) : m,
  );
}

const iso = (ms: number | null) => (ms === null ? "-" : new Date(ms).toISOString());

export function title(e: FailureEvent, language: Language): string {
  return t(language, e.event === "run.timeout" ? "timeoutTitle" : "failureTitle", {
    runId: e.runId,
    elementName: e.elementName,
  });
}

/** The facts of the event, one per line, for mail bodies and chat bots. */
export function describe(e: FailureEvent, language: Language): string {
  const lines: [MessageKey, string][] = [
    ["run", e.runId],
    ["flow", `${e.elementName} (${e.elementType})`],
    ["version", e.version ?? "-"],
    ["status", e.runStatus],
    ["trigger", e.triggerType],
    ["failedNode", e.failedNodeId ?? "-"],
    ["error", e.error ?? "-"],
    ["created", iso(e.createTime)],
    ["started", iso(e.startTime)],
    ["ended", iso(e.endTime)],
  ];
  return lines.map(([k, v]) => `${t(language, k)}: ${v}`).join("\n");
}
