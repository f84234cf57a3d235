import { DF, type RevisionDetail, type RevisionDiff, type RunDetail, api } from "./api.ts";
import { badge, h } from "./dom.ts";
import { drawGraph } from "./graph.ts";
import { flowLoc } from "./revisions.ts";

type Mark = "added" | "removed" | "changed" | "same";

const pretty = (v: unknown) => (v === undefined ? "" : JSON.stringify(v, null, 2));

/** One revision's graph with each vertex marked as the diff sees it (the run graph's drawing). */
function markedGraph(rev: RevisionDetail, marks: Map<string, Mark>): SVGElement {
  const detail = {
    run: { runId: "", triggerType: "", runStatus: "SUCCESS" },
    elementType: "DPL",
    resumable: false,
    nodes: rev.flow.vertexes.map((v) => ({ nodeId: v.id, nodeType: v.type, status: (marks.get(v.id) ?? "same").toUpperCase() })),
    graph: rev.flow,
  } as RunDetail;
  return drawGraph(detail, undefined, () => undefined);
}

/** A side-by-side row: the item in `from` on the left, in `to` on the right, the changed paths under. */
function row(key: string, mark: Mark, left: unknown, right: unknown, paths: string[] = []): HTMLElement {
  return h(
    "tr",
    { class: `d-${mark}`, "data-diff": key, "data-mark": mark },
    h("td", {}, h("strong", {}, key), h("div", {}, badge(mark.toUpperCase())), paths.length ? h("ul", { class: "paths" }, ...paths.map((p) => h("li", {}, h("code", {}, p)))) : ""),
    h("td", {}, h("pre", {}, pretty(left))),
    h("td", {}, h("pre", {}, pretty(right))),
  );
}

/** Two revisions side by side: graphs with marked vertexes, then vertexes, edges and configure. */
export async function diffView(root: HTMLElement, name: string, query: URLSearchParams): Promise<void> {
  const loc = flowLoc(name, query);
  const fromVersion = Number(query.get("from"));
  const toVersion = Number(query.get("to"));
  const [diff, a, b] = await Promise.all([
    api<RevisionDiff>("POST", `${DF}/flow/revision-diff`, { ...loc, fromVersion, toVersion }),
    api<RevisionDetail>("POST", `${DF}/flow/revision`, { ...loc, version: fromVersion }),
    api<RevisionDetail>("POST", `${DF}/flow/revision`, { ...loc, version: toVersion }),
  ]);
  const marks = new Map<string, Mark>();
  for (const v of diff.vertexes.added) marks.set(v.id, "added");
  for (const v of diff.vertexes.removed) marks.set(v.id, "removed");
  const changedPaths = new Map(diff.vertexes.changed.map((v) => [v.id, v.paths]));
  for (const id of changedPaths.keys()) marks.set(id, "changed");
  const vertexIds = [...new Set([...a.flow.vertexes.map((v) => v.id), ...b.flow.vertexes.map((v) => v.id)])];
  const byId = (rev: RevisionDetail, id: string) => rev.flow.vertexes.find((v) => v.id === id);
  // The server's edge keys (docs/dataflow-service.md, "Revision diff"): id, else source->target, #n for repeats.
  const keyed = (rev: RevisionDetail) => {
    const seen = new Map<string, number>();
    return new Map(rev.flow.edges.map((e) => {
      const base = e.id || `${e.source}->${e.target}`;
      const n = (seen.get(base) ?? 0) + 1;
      seen.set(base, n);
      return [n === 1 ? base : `${base}#${n}`, e] as const;
    }));
  };
  const [ea, eb] = [keyed(a), keyed(b)];
  const edgeMarks = new Map<string, [Mark, string[]]>();
  for (const e of diff.edges.added) edgeMarks.set(e.key, ["added", []]);
  for (const e of diff.edges.removed) edgeMarks.set(e.key, ["removed", []]);
  for (const e of diff.edges.changed) edgeMarks.set(e.key, ["changed", e.paths]);
  const edgeKeys = [...new Set([...ea.keys(), ...eb.keys()])];
  const head = (rev: RevisionDetail) => h("th", {}, `v${rev.version} · ${rev.revisionName} `, rev.live ? h("span", { class: "badge live-mark" }, "LIVE") : badge(rev.status));
  const counts = `${diff.vertexes.added.length} added, ${diff.vertexes.removed.length} removed, ${diff.vertexes.changed.length} changed vertexes · ${diff.edges.added.length + diff.edges.removed.length + diff.edges.changed.length} edge changes · ${diff.configure.changed.length} configure fields`;
  root.replaceChildren(
    h("h1", {}, h("a", { href: `#/revisions/${encodeURIComponent(name)}?${query.get("path") ? `path=${encodeURIComponent(query.get("path") ?? "")}` : ""}` }, name), ` · v${fromVersion} → v${toVersion}`),
    h("p", { class: "dim", id: "diff-summary" }, counts),
    h("div", { class: "side" }, h("div", {}, h("h2", {}, `v${fromVersion}`), h("div", { class: "graph-wrap" }, markedGraph(a, marks))), h("div", {}, h("h2", {}, `v${toVersion}`), h("div", { class: "graph-wrap" }, markedGraph(b, marks)))),
    h("h2", {}, "Vertexes"),
    h("table", { class: "diff", id: "diff-vertexes" }, h("thead", {}, h("tr", {}, h("th", {}, "id"), head(a), head(b))), h("tbody", {}, ...vertexIds.map((id) => row(id, marks.get(id) ?? "same", byId(a, id), byId(b, id), changedPaths.get(id))))),
    h("h2", {}, "Edges"),
    h("table", { class: "diff", id: "diff-edges" }, h("thead", {}, h("tr", {}, h("th", {}, "edge"), head(a), head(b))), h("tbody", {}, ...edgeKeys.map((k) => {
      const [mark, paths] = edgeMarks.get(k) ?? ["same", []];
      return row(k, mark, ea.get(k), eb.get(k), paths);
    }))),
    h("h2", {}, "Configure"),
    h("table", { class: "diff", id: "diff-configure" }, h("thead", {}, h("tr", {}, h("th", {}, "configure"), head(a), head(b))), h("tbody", {}, row("configure", diff.configure.changed.length ? "changed" : "same", a.configure, b.configure, diff.configure.changed))),
  );
}
