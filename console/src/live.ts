import { DF, loadScope } from "./api.ts";

/** A node's live state (GET {dataflow}/run/{runId}/events, docs/live-progress.md). */
export interface LiveNode {
  nodeId: string;
  nodeType: string;
  status: string;
  startTime?: number;
  endTime?: number;
}

export interface LiveHandlers {
  state(nodes: LiveNode[]): void;
  node(n: LiveNode): void;
  output(o: { nodeId?: string; stream: "stdout" | "stderr"; text: string }): void;
  gap(dropped: number): void;
  /** The run ended: its record now holds everything. */
  end(): void;
}

const headers = (): Record<string, string> => {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(loadScope())) if (v) out[k] = v;
  return out;
};

/**
 * Follows a run as it runs: the event stream read through fetch (EventSource cannot send the scope
 * headers), or, when the stream cannot be had, the polling endpoint every second. Stops when the
 * run ends or `signal` aborts (the user left the page).
 */
export async function followRun(runId: string, on: LiveHandlers, signal: AbortSignal): Promise<void> {
  const id = encodeURIComponent(runId);
  try {
    const res = await fetch(`${DF}/run/${id}/events`, { headers: headers(), credentials: "same-origin", signal });
    if (!res.ok || !res.body || !res.headers.get("content-type")?.startsWith("text/event-stream")) throw new Error("no event stream");
    if (await readStream(res.body, on)) return;
  } catch {
    if (signal.aborted) return;
  }
  await poll(id, on, signal);
}

/** True when the stream said the run ended. */
async function readStream(body: ReadableStream<Uint8Array>, on: LiveHandlers): Promise<boolean> {
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    for (let end = buf.indexOf("\n\n"); end >= 0; end = buf.indexOf("\n\n")) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let event = "";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (!data) continue;
      if (dispatch(event, JSON.parse(data), on)) return true;
    }
  }
  return false;
}

/** One event's data, as the stream and the polling answer both spell it. */
type EventData = { nodes?: LiveNode[]; node?: LiveNode; dropped?: number; nodeId?: string; stream?: "stdout" | "stderr"; text?: string };

function dispatch(event: string, d: EventData, on: LiveHandlers): boolean {
  if (event === "state") on.state(d.nodes ?? []);
  else if (event === "node" && d.node) on.node(d.node);
  else if (event === "output" && d.stream) on.output({ nodeId: d.nodeId, stream: d.stream, text: d.text ?? "" });
  else if (event === "gap") on.gap(d.dropped ?? 0);
  else if (event === "end") {
    on.end();
    return true;
  }
  return false;
}

async function poll(id: string, on: LiveHandlers, signal: AbortSignal): Promise<void> {
  let after = 0;
  while (!signal.aborted) {
    const res = await fetch(`${DF}/run/${id}/progress?after=${after}`, { headers: headers(), credentials: "same-origin", signal }).catch(() => undefined);
    const env = res ? ((await res.json()) as { status: boolean; data: { ended: boolean; seq: number; nodes: LiveNode[]; events: (EventData & { kind: string })[] } }) : undefined;
    if (env?.status) {
      const d = env.data;
      if (after === 0) on.state(d.nodes);
      for (const e of d.events) dispatch(e.kind, e, on);
      after = d.seq;
      if (d.ended) return on.end();
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}
