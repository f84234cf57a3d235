import type { Configure } from "../../flows/graph.ts";
import type { RunEnd } from "../../store/types.ts";

/** Whether a flow's configuration names any error handler. */
export const hasHandlers = (c: Configure): boolean =>
  Boolean(c.errorHandlers.email || c.errorHandlers.bot || c.errorHandlers.custom);

/**
 * The end as it is written: a flow run's FAILURE whose release names handlers carries the node
 * that owes its notifications, recorded by the end's own statement (docs/error-handlers.md,
 * "Durable"). Every other end is returned as it is: it writes and costs nothing more.
 */
export function owedEnd(
  end: RunEnd,
  elementType: string,
  configure: Configure | undefined,
  nodeId: string,
): RunEnd {
  if (end.status !== "FAILURE" || elementType !== "DPL" || !configure || !hasHandlers(configure))
    return end;
  return { ...end, notifyBy: nodeId };
}
