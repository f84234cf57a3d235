import { ApiError, DF, type RunsPage, api } from "./api.ts";
import { badge, dur, h, time } from "./dom.ts";

const STATUSES = ["QUEUED", "STARTED", "SUCCESS", "FAILURE", "CANCELED"];
const TRIGGERS = ["API", "SCHEDULED", "SYNC", "ASYNC"];

/**
 * Runs of one element with the filters of POST /monitor/runs (status, trigger, version, quick
 * search, paging), refreshed by the caller's poll; terminate and delete act on the checked rows.
 */
export async function runsView(root: HTMLElement, type: string, name: string, query: URLSearchParams, notify: (msg: string, bad?: boolean) => void): Promise<void> {
  const list = (k: string) => query.get(k)?.split(",").filter(Boolean) ?? [];
  const body: Record<string, unknown> = {
    elementName: name,
    elementType: type,
    pageNo: Number(query.get("page") ?? 0),
    pageSize: 20,
    orderBy: [{ name: "createTime", asc: false }],
  };
  if (query.get("path")) body.path = query.get("path");
  if (list("status").length) body.runStatusFilter = list("status");
  if (list("trigger").length) body.triggerFilter = list("trigger");
  if (list("version").length) body.versionFilter = list("version");
  if (query.get("q")) body.quickSearch = query.get("q");
  const page = await api<RunsPage>("POST", `${DF}/monitor/runs`, body);

  const go = (changes: Record<string, string>) => {
    const q = new URLSearchParams(query);
    for (const [k, v] of Object.entries(changes)) if (v) q.set(k, v); else q.delete(k);
    location.hash = `#/runs/${type}/${encodeURIComponent(name)}?${q}`;
  };
  const toggles = (key: string, values: string[]) =>
    h("span", { class: "toggles" }, ...values.map((v) => {
      const on = list(key).includes(v);
      return h("label", {}, h("input", { type: "checkbox", checked: on, "data-filter": `${key}:${v}`, onchange: () => go({ [key]: (on ? list(key).filter((x) => x !== v) : [...list(key), v]).join(","), page: "" }) }), v);
    }));
  const selected = () => [...root.querySelectorAll<HTMLInputElement>("input[data-run]:checked")].map((i) => i.dataset.run ?? "");
  const bulk = (label: string, path: string) =>
    h("button", { onclick: async () => {
      try {
        const out = await api<Record<string, boolean>>("POST", `${DF}/run/${path}`, { runIds: selected() });
        notify(`${label}: ${Object.values(out).filter(Boolean).length} of ${Object.keys(out).length}`);
        go({ t: String(Date.now()) });
      } catch (err) {
        notify(err instanceof ApiError ? err.message : String(err), true);
      }
    } }, label);

  const rows = page.runs.map((r) =>
    h("tr", { "data-run": r.runId },
      h("td", {}, h("input", { type: "checkbox", "data-run": r.runId })),
      h("td", {}, h("a", { href: `#/run/${r.runId}` }, r.runId)),
      h("td", {}, badge(r.runStatus)),
      h("td", {}, r.triggerType),
      h("td", {}, r.version ?? ""),
      h("td", {}, time(r.startTime ?? r.createTime)),
      h("td", {}, dur(r.duration)),
      h("td", { class: "summary" }, r.runName ?? "", h("div", { class: "dim" }, r.summary ?? "")),
    ));
  const searchBox = h("input", { value: query.get("q") ?? "", placeholder: "quick search", name: "q" }) as HTMLInputElement;
  root.replaceChildren(
    h("h1", {}, `${type === "PY" ? "Script tasks" : "Runs"} of ${name}`),
    type === "PY" ? h("p", {}, h("a", { href: `#/versions/${encodeURIComponent(name)}${query.get("path") ? `?path=${encodeURIComponent(query.get("path") ?? "")}` : ""}`, id: "script-versions" }, "Versions and their environments")) : "",
    h("div", { class: "filters" },
      toggles("status", STATUSES),
      toggles("trigger", TRIGGERS),
      h("form", { onsubmit: (e: Event) => { e.preventDefault(); go({ q: searchBox.value, page: "" }); } }, searchBox),
    ),
    h("p", { class: "counts" },
      `${page.totalCount} runs · `, badge("QUEUED"), ` ${page.queuedCount} `, badge("STARTED"), ` ${page.startedCount} `,
      badge("SUCCESS"), ` ${page.successCount} `, badge("FAILURE"), ` ${page.failureCount} `, badge("CANCELED"), ` ${page.canceledCount}`),
    h("div", { class: "actions" }, bulk("Terminate", "terminate"), bulk("Delete", "delete")),
    h("table", { id: "runs" },
      h("thead", {}, h("tr", {}, ...["", "Run", "Status", "Trigger", "Ver", "Started", "Duration", "Name / summary"].map((t) => h("th", {}, t)))),
      h("tbody", {}, ...rows)),
    h("p", { class: "pager" },
      h("button", { disabled: body.pageNo === 0, onclick: () => go({ page: String(Number(body.pageNo) - 1) }) }, "‹ Prev"),
      ` page ${Number(body.pageNo) + 1} of ${Math.max(1, page.totalPage)} `,
      h("button", { disabled: Number(body.pageNo) + 1 >= page.totalPage, onclick: () => go({ page: String(Number(body.pageNo) + 1) }) }, "Next ›")),
  );
}

/** Script tasks: pick a PY element by name, then the same runs view. */
export function scriptsView(root: HTMLElement): void {
  const input = h("input", { placeholder: "script element name", name: "element" }) as HTMLInputElement;
  root.replaceChildren(
    h("h1", {}, "Script tasks"),
    h("form", { onsubmit: (e: Event) => { e.preventDefault(); location.hash = `#/runs/PY/${encodeURIComponent(input.value)}`; } }, input, h("button", {}, "Show tasks"), h("button", { type: "button", onclick: () => { location.hash = `#/versions/${encodeURIComponent(input.value)}`; } }, "Show versions")),
  );
}
