import type { NodeLog, RunDetail } from "./api.ts";
import { dur } from "./dom.ts";

const NS = "http://www.w3.org/2000/svg";
const W = 150;
const H = 46;
const GX = 60;
const GY = 24;

function svg(tag: string, attrs: Record<string, string | number>): SVGElement {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/**
 * The run's graph, laid out in columns by longest path from the sources (enough for the DAGs
 * flows are), each node coloured by its status in this run. Clicking a node selects it.
 */
export function drawGraph(detail: RunDetail, selected: string | undefined, onSelect: (id: string) => void): SVGElement {
  const g = detail.graph ?? { vertexes: [], edges: [] };
  const logs = new Map<string, NodeLog>(detail.nodes.map((n) => [n.nodeId, n]));
  const depth = new Map<string, number>();
  const incoming = new Map<string, string[]>();
  for (const e of g.edges) incoming.set(e.target, [...(incoming.get(e.target) ?? []), e.source]);
  const depthOf = (id: string, seen: Set<string>): number => {
    const known = depth.get(id);
    if (known !== undefined) return known;
    if (seen.has(id)) return 0;
    seen.add(id);
    const d = Math.max(-1, ...(incoming.get(id) ?? []).map((s) => depthOf(s, seen))) + 1;
    depth.set(id, d);
    return d;
  };
  const columns: string[][] = [];
  for (const v of g.vertexes) {
    const d = depthOf(v.id, new Set());
    (columns[d] ??= []).push(v.id);
  }
  const pos = new Map<string, { x: number; y: number }>();
  columns.forEach((col, ci) => col.forEach((id, ri) => pos.set(id, { x: 10 + ci * (W + GX), y: 10 + ri * (H + GY) })));
  const width = 20 + columns.length * (W + GX);
  const height = 20 + Math.max(1, ...columns.map((c) => c.length)) * (H + GY);
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "graph" });
  const defs = svg("defs", {});
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#889" }));
  defs.append(marker);
  root.append(defs);
  for (const e of g.edges) {
    const a = pos.get(e.source);
    const b = pos.get(e.target);
    if (!a || !b) continue;
    root.append(svg("line", { x1: a.x + W, y1: a.y + H / 2, x2: b.x, y2: b.y + H / 2, class: "edge", "marker-end": "url(#arrow)" }));
  }
  for (const v of g.vertexes) {
    const p = pos.get(v.id);
    if (!p) continue;
    const log = logs.get(v.id);
    const status = log?.status ?? (detail.run.runStatus === "STARTED" ? "PENDING" : "NONE");
    const reused = log?.reusedFrom !== undefined ? " reused" : "";
    const node = svg("g", { class: `node s-${status.toLowerCase()}${reused}${selected === v.id ? " selected" : ""}`, "data-node": v.id, transform: `translate(${p.x},${p.y})` });
    node.append(svg("rect", { width: W, height: H, rx: 6 }));
    const title = svg("text", { x: 8, y: 18, class: "title" });
    title.textContent = `${v.name ?? v.id} · ${v.type}`;
    const sub = svg("text", { x: 8, y: 36, class: "sub" });
    sub.textContent = `${reused ? "REUSED" : status}${log?.startTime !== undefined && log.endTime !== undefined ? ` · ${dur(log.endTime - log.startTime)}` : ""}`;
    node.append(title, sub);
    node.addEventListener("click", () => onSelect(v.id));
    root.append(node);
  }
  return root;
}
