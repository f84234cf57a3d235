import type { FinishedStatus } from "../store/model.ts";
import { WEBHOOK_ON, type WebhookOn, type WebhookTarget } from "./types.ts";

/** Why `url` cannot be a webhook URL, or null: an absolute http or https URL. */
export function webhookUrlProblem(url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "must be an absolute http or https URL";
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    return `must be an http or https URL, got ${parsed.protocol.replace(/:$/, "")}`;
  return null;
}

/** `SUCCESS,FAILURE` (a query string's form) → the statuses, or the first unknown name. */
export function parseOnList(text: string): WebhookOn[] | { unknown: string } {
  const out: WebhookOn[] = [];
  for (const part of text.split(",")) {
    const name = part.trim().toUpperCase();
    if (!(WEBHOOK_ON as readonly string[]).includes(name)) return { unknown: part.trim() };
    out.push(name as WebhookOn);
  }
  return out;
}

/** Whether a target wants a run that ended in `status`; no `on` at all means ANY. */
export function wants(target: WebhookTarget, status: FinishedStatus): boolean {
  return target.on.length === 0 || target.on.includes("ANY") || target.on.includes(status);
}

/** The targets a run records: its flow's configured ones first, then the call's own. */
export function runTargets(
  configured: readonly WebhookTarget[] | undefined,
  call: WebhookTarget | undefined,
): WebhookTarget[] | null {
  const all = [...(configured ?? []), ...(call ? [call] : [])];
  return all.length > 0 ? all : null;
}

/** Delivery IDs are the run's ID and the target's index: a second insert of one is a no-op. */
export const deliveryId = (runId: string, index: number): string => `${runId}.${index}`;
