import { ApiError, DF, type NodeLog, type RunDetail, type Traceback, type WebhookDelivery, api } from "./api.ts";
import { TERMINAL, badge, dur, h, json, time } from "./dom.ts";
import { artifactsSection } from "./artifacts.ts";
import { drawGraph } from "./graph.ts";
import { type LiveNode, followRun } from "./live.ts";
import { packagesCell } from "./versions.ts";

/** What a run page does while its run runs: follow it until `signal` aborts, redraw at its end. */
export interface Live {
  signal: AbortSignal;
  rerender: () => void;
}

/** One run: header, graph with per-node status, the selected node's times, input, output and logs. */
export async function runView(root: HTMLElement, runId: string, selected: string | undefined, notify: (msg: string, bad?: boolean) => void, live: Live): Promise<boolean> {
  const d = await api<RunDetail>("GET", `${DF}/monitor/run-detail?runId=${encodeURIComponent(runId)}`);
  const hooks = (await api<{ webhookDeliveries?: WebhookDelivery[] }>("GET", `${DF}/monitor/run?runId=${encodeURIComponent(runId)}`)).webhookDeliveries ?? [];
  const r = d.run;
  const kept = d.elementType === "DPL" && TERMINAL.has(r.runStatus) ? await artifactsSection(runId) : "";
  const act = (label: string, path: string) =>
    h("button", { onclick: async () => {
      try {
        const out = await api<Record<string, boolean>>("POST", `${DF}/run/${path}`, { runIds: [runId] });
        notify(`${label}: ${out[runId] ? "done" : "not possible"}`, !out[runId]);
        if (path === "delete" && out[runId]) history.back();
      } catch (err) {
        notify(err instanceof ApiError ? err.message : String(err), true);
      }
    } }, label);
  // Re-run and resume start a new run (docs/dataflow-service.md, "Re-run and resume"): go to it.
  const again = (label: string, kind: "rerun" | "resume") =>
    h("button", { id: kind, onclick: async () => {
      try {
        const id = await api<string>("POST", `${DF}/run/${encodeURIComponent(runId)}/${kind}`, {});
        notify(`${label}: started ${id}`);
        location.hash = `#/run/${id}`;
      } catch (err) {
        notify(err instanceof ApiError ? err.message : String(err), true);
      }
    } }, label);
  const ended = TERMINAL.has(r.runStatus);
  const origin = r.rerunOf;
  const select = (id: string) => {
    location.hash = `#/run/${runId}?node=${encodeURIComponent(id)}`;
  };
  const node = d.nodes.find((n) => n.nodeId === selected) ?? d.nodes.find((n) => n.nodeId === d.failedNodeId);
  const runsHref = `#/runs/${d.elementType}/${encodeURIComponent(r.elementName ?? "")}`;
  root.replaceChildren(
    h("h1", {}, h("a", { href: runsHref }, r.elementName ?? ""), " · ", r.runName ?? r.runId, " ", badge(r.runStatus)),
    h("dl", { class: "facts", id: "run-facts" },
      h("dt", {}, "Run"), h("dd", {}, r.runId),
      h("dt", {}, "Trigger"), h("dd", {}, r.triggerType),
      h("dt", {}, "Version"), h("dd", {}, r.version ?? "—"),
      h("dt", {}, "Created"), h("dd", {}, time(r.createTime)),
      h("dt", {}, "Started"), h("dd", {}, time(r.startTime)),
      h("dt", {}, "Duration"), h("dd", {}, dur(r.duration)),
      h("dt", {}, "Initiator"), h("dd", {}, r.initiator?.userId ?? "—"),
      h("dt", {}, "Summary"), h("dd", {}, r.summary ?? "—"),
      d.parentRunId ? h("dt", {}, "Parent") : null, d.parentRunId ? h("dd", {}, h("a", { href: `#/run/${d.parentRunId}` }, d.parentRunId)) : null,
      origin ? h("dt", {}, origin.kind === "resume" ? "Resumes" : "Re-runs") : null,
      origin ? h("dd", { id: "rerun-of" }, h("a", { href: `#/run/${origin.runId}` }, origin.runId)) : null),
    h("div", { class: "actions" },
      ended ? null : act("Terminate", "terminate"),
      ended ? again("Re-run", "rerun") : null,
      d.resumable ? again("Resume from failed node", "resume") : null,
      act("Delete", "delete")),
    d.error ? h("pre", { class: "error" }, d.error) : "",
    d.filesRemoved
      ? h("p", { class: "notice", id: "files-removed" },
          `Working directory removed ${time(d.filesRemoved.time)}: ${d.filesRemoved.reason}`)
      : "",
    d.traceback ? tracebackView(d.traceback, "traceback") : "",
    d.graph ? h("section", {}, h("h2", {}, "Graph"), h("div", { class: "graph-wrap" }, drawGraph(d, node?.nodeId, select))) : "",
    node
      ? h("section", { id: "node-detail" },
          h("h2", {}, `Node ${node.nodeId} (${node.nodeType}) `, badge(node.status)),
          node.reusedFrom ? h("p", { class: "reused" }, "Not run again: output reused from run ", h("a", { href: `#/run/${node.reusedFrom}` }, node.reusedFrom)) : null,
          h("p", { class: "dim" }, `${time(node.startTime)} → ${time(node.endTime)} · ${node.startTime !== undefined && node.endTime !== undefined ? dur(node.endTime - node.startTime) : ""} · attempts ${node.attempts ?? 1}`),
          node.error ? h("pre", { class: "error" }, node.error) : null,
          node.traceback ? tracebackView(node.traceback, "node-traceback") : null,
          h("div", { class: "io" }, h("div", {}, h("h3", {}, "Input"), notKept(node, "input") ?? json(node.input)), h("div", {}, h("h3", {}, "Output"), notKept(node, "output") ?? json(node.output))),
          node.stdout ? h("div", {}, h("h3", {}, "stdout"), h("pre", { class: "log" }, node.stdout)) : notKept(node, "stdout"),
          node.stderr ? h("div", {}, h("h3", {}, "stderr"), h("pre", { class: "log err" }, node.stderr)) : notKept(node, "stderr"))
      : d.nodes.length > 0 ? h("p", { class: "dim" }, "Click a node to see its input, output and logs.") : "",
    d.scripts && d.scripts.length > 0
      ? h("section", { id: "run-scripts" },
          h("h2", {}, "Script versions"),
          h("table", {},
            h("thead", {}, h("tr", {}, ...["Node", "Script", "Version", "sha256", "", "Environment"].map((t) => h("th", {}, t)))),
            h("tbody", {}, ...d.scripts.map((s) => h("tr", { "data-script-node": s.nodeId },
              h("td", {}, s.nodeId), h("td", {}, `${s.path === "/" ? "" : s.path}/${s.elementName}`), h("td", {}, `v${s.version}`),
              h("td", {}, h("code", { title: s.sha256 }, s.sha256.slice(0, 12))), h("td", { class: "dim" }, s.pinned ? "pinned" : "newest (not pinned)"), h("td", {}, packagesCell(s.environment)))))))
      : "",
    ended ? "" : h("section", { id: "live-output" },
      h("h2", {}, "Output (live)"), h("pre", { class: "log", id: "live-stdout" }),
      h("h2", {}, "stderr (live)"), h("pre", { class: "log err", id: "live-stderr" })),
    d.elementType === "PY"
      ? h("section", { id: "run-environment" },
          h("h2", {}, "Environment"),
          d.environment ? h("p", { class: "dim" }, h("code", {}, d.environment.hash), ` · `, h("a", { href: `#/versions/${encodeURIComponent(r.elementName ?? "")}` }, "versions")) : null,
          packagesCell(d.environment))
      : "",
    d.elementType === "PY" && ended
      ? h("section", { id: "task-output" },
          h("h2", {}, "stdout"), h("pre", { class: "log" }, d.stdout || "—"),
          h("h2", {}, "stderr"), h("pre", { class: "log err" }, d.stderr || "—"))
      : "",
    hooks.length > 0 ? webhooksTable(hooks) : "",
    kept,
    h("section", {}, h("h2", {}, "Parameter"), h("pre", {}, r.runParam ?? "—"), d.result !== undefined ? h("h2", {}, "Result") : null, d.result !== undefined ? json(d.result) : null),
  );
  if (!ended) void followRun(runId, liveHandlers(root, d.elementType === "PY", live), live.signal);
  return ended;
}

/** The page's graph and output as the run's events come (docs/live-progress.md). */
function liveHandlers(root: HTMLElement, task: boolean, live: Live) {
  const lastNode: Record<string, string | undefined> = {};
  const setNode = (n: LiveNode) => {
    const g = root.querySelector(`[data-node="${CSS.escape(n.nodeId)}"]`);
    if (!g) return;
    const status = n.status.toLowerCase();
    g.setAttribute("class", (g.getAttribute("class") ?? "").replace(/\bs-[a-z]+/, `s-${status}`));
    const sub = g.querySelector(".sub");
    if (sub) sub.textContent = `${n.status}${n.startTime !== undefined && n.endTime !== undefined ? ` · ${dur(n.endTime - n.startTime)}` : ""}`;
  };
  return {
    state: (nodes: LiveNode[]) => nodes.forEach(setNode),
    node: setNode,
    output(o: { nodeId?: string; stream: "stdout" | "stderr"; text: string }) {
      const pre = root.querySelector(`#live-${o.stream}`);
      if (!pre) return;
      // A flow's output says which node printed it, once per change of node.
      if (!task && o.nodeId !== lastNode[o.stream]) pre.append(h("span", { class: "dim" }, `── ${o.nodeId ?? ""} ──\n`));
      lastNode[o.stream] = o.nodeId;
      pre.append(o.text);
    },
    gap(dropped: number) {
      root.querySelector("#live-stdout")?.append(h("span", { class: "dim" }, `\n[${dropped} events missed]\n`));
    },
    end: () => live.rerender(),
  };
}

/** A failed script's traceback: each of the user's frames with its line of code. */
function tracebackView(tb: Traceback, id: string): HTMLElement {
  return h("section", { id, class: "traceback" },
    h("h3", {}, `Traceback${tb.nodeId ? ` (node ${tb.nodeId})` : ""}: ${tb.type}`),
    h("ol", { class: "frames" }, ...tb.frames.map((f) => h("li", { "data-frame": `${f.file}:${f.line}` },
      h("div", { class: "dim" }, `${f.file}, line ${f.line}, in ${f.function}`),
      h("code", {}, f.code)))),
    h("pre", { class: "error" }, `${tb.type}: ${tb.message}`));
}

/** Each completion webhook delivery with every attempt: when, how long, the answer or the error. */
function webhooksTable(hooks: WebhookDelivery[]): HTMLElement {
  const attempt = (a: WebhookDelivery["attempts"][number]) => `${time(a.at)} · ${a.ms} ms · ${a.httpStatus ?? a.error ?? ""}`;
  return h("section", { id: "run-webhooks" },
    h("h2", {}, "Webhooks"),
    h("table", {},
      h("thead", {}, h("tr", {}, ...["URL", "Run end", "Status", "Attempts"].map((t) => h("th", {}, t)))),
      h("tbody", {}, ...hooks.map((d) => h("tr", { "data-delivery": d.id },
        h("td", {}, d.url), h("td", {}, d.event), h("td", {}, badge(d.status)),
        h("td", {}, ...d.attempts.map((a) => h("div", {}, attempt(a))),
          d.nextAttemptAt !== undefined ? h("div", { class: "dim" }, `next ${time(d.nextAttemptAt)}`) : null))))));
}

/** A value of the node the run did not keep: said so, rather than shown as nothing. */
function notKept(node: NodeLog, key: "input" | "output" | "stdout" | "stderr"): HTMLElement | null {
  if (!node.omitted?.includes(key)) return null;
  const what = key === "stdout" || key === "stderr" ? h("h3", {}, key) : null;
  return h("div", {}, what, h("p", { class: "dim omitted" }, "Too large to keep (LIMIT_NODE_LOG_BYTES, or the run's share of LIMIT_RESULT_BYTES)."));
}
