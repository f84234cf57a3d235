/**
 * Completion webhooks (docs/webhooks.md): the shapes shared by the store, the run record, the
 * configure validation and the delivery worker. Nothing here depends on another module.
 */

/** The run ends a webhook is called for; ANY is every one of them. */
export const WEBHOOK_ON = ["SUCCESS", "FAILURE", "CANCELED", "ANY"] as const;
export type WebhookOn = (typeof WEBHOOK_ON)[number];

/** One URL to call when a run ends, as a flow's configure or a run call names it. */
export interface WebhookTarget {
  url: string;
  on: WebhookOn[];
}

export type DeliveryStatus = "PENDING" | "DELIVERED" | "FAILED";

/** One POST to a receiver: when, how long, and its HTTP status or the error that stopped it. */
export interface DeliveryAttempt {
  /** Epoch ms the attempt started. */
  at: number;
  ms: number;
  httpStatus?: number;
  error?: string;
}

/** One delivery of one run end to one URL, as the run's detail shows it. */
export interface WebhookDelivery {
  id: string;
  url: string;
  /** The run's end status the delivery reports. */
  event: string;
  status: DeliveryStatus;
  attempts: DeliveryAttempt[];
  /** Epoch ms of the next attempt while PENDING. */
  nextAttemptAt?: number;
}
