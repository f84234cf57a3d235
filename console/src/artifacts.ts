import { DF, api } from "./api.ts";
import { h, time } from "./dom.ts";

interface ArtifactList {
  collected: boolean;
  files: { name: string; nodeId: string | null; size: number; contentType: string; createTime: number }[];
  skipped: { name: string; reason: string }[];
  skippedMore: number;
}

const size = (n: number) => (n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(1)} MiB`);

/** The files a run kept (docs/artifacts.md), each a download link; nothing when it kept none. */
export async function artifactsSection(runId: string): Promise<HTMLElement | ""> {
  const base = `${DF}/run/${encodeURIComponent(runId)}/artifacts`;
  const list = await api<ArtifactList>("GET", base).catch(() => undefined);
  if (!list || (list.files.length === 0 && list.skipped.length === 0)) return "";
  return h("section", { id: "run-artifacts" },
    h("h2", {}, "Artifacts"),
    h("table", {},
      h("thead", {}, h("tr", {}, ...["File", "Node", "Size", "Type", "Kept"].map((t) => h("th", {}, t)))),
      h("tbody", {}, ...list.files.map((f) => h("tr", { "data-artifact": f.name },
        h("td", {}, h("a", { href: `${base}/${encodeURIComponent(f.name)}`, download: f.name.split("/").pop() ?? f.name }, f.name)),
        h("td", {}, f.nodeId ?? "—"), h("td", {}, size(f.size)), h("td", { class: "dim" }, f.contentType), h("td", { class: "dim" }, time(f.createTime)))))),
    ...list.skipped.map((s) => h("p", { class: "dim", "data-skipped": s.name }, `Not kept: ${s.name} (${s.reason})`)),
    list.skippedMore > 0 ? h("p", { class: "dim" }, `and ${list.skippedMore} more not kept`) : null);
}
