import type { Run } from "../store/types.ts";

export interface PayloadConfig {
  /** A result larger than this (bytes of JSON) is sent as its size and a link. */
  inlineResultBytes: number;
  dataflowPrefix: string;
  scriptPrefix: string;
  /** Prefix of the result link (the service's public address); empty: the link is a path. */
  publicUrl: string;
}

/**
 * The JSON body of every attempt of one delivery (docs/webhooks.md, "The POST"), from the ended
 * run as recorded. It is built once when the delivery is created and stored, so every attempt
 * sends the same bytes, and a run deleted meanwhile is still reported.
 */
export function deliveryBody(deliveryId: string, run: Run, cfg: PayloadConfig): string {
  const { startTime, endTime } = run;
  const body: Record<string, unknown> = {
    deliveryId,
    event: "run.ended",
    runId: run.id,
    elementId: run.elementId,
    elementType: run.elementType,
    elementName: run.elementName,
    revision: run.version,
    triggerType: run.triggerType,
    status: run.status,
    error: run.error,
    summary: run.summary,
    createTime: run.createTime,
    startTime,
    endTime,
    duration: run.duration,
  };
  const { result } = run;
  if (result !== null) {
    const size = Buffer.byteLength(result);
    if (size <= cfg.inlineResultBytes) body.result = JSON.parse(result);
    else {
      body.resultSize = size;
      body.resultUrl = cfg.publicUrl + resultPath(run, cfg);
    }
  } else body.result = null;
  return JSON.stringify(body);
}

/** Where a caller reads the whole result (docs/dataflow-service.md, docs/script-service.md). */
function resultPath(run: Run, cfg: PayloadConfig): string {
  const id = encodeURIComponent(run.id);
  return run.elementType === "PY"
    ? `${cfg.scriptPrefix}/script/result/${id}`
    : `${cfg.dataflowPrefix}/run/${id}/result`;
}
