import { type AuditPage, DF, api } from "./api.ts";
import { dur, h, time } from "./dom.ts";

const OUTCOMES = ["success", "failure", "accepted", "refused"];
const ACTIONS = ["upload", "deploy", "activate", "deactivate", "batch-deploy", "batch-deactivate", "terminate", "delete", "secret-put", "secret-delete", "webhook-secret-rotate", "import", "token-use"];

/** The scope's audit trail (GET /audit, docs/audit.md): filters in the hash, newest first, paged. */
export async function auditView(root: HTMLElement, query: URLSearchParams): Promise<void> {
  const params = new URLSearchParams({ pageNo: query.get("page") ?? "0", pageSize: "50" });
  for (const k of ["user", "action", "outcome"]) if (query.get(k)) params.set(k, query.get(k) ?? "");
  for (const k of ["from", "to"]) {
    const day = query.get(k);
    if (day) params.set(k, String(Date.parse(day) + (k === "to" ? 86_399_999 : 0)));
  }
  const page = await api<AuditPage>("GET", `${DF}/audit?${params}`);

  const field = (name: string, attrs: Record<string, string> = {}) => h("input", { name, value: query.get(name) ?? "", ...attrs });
  const select = (name: string, values: string[]) =>
    h("select", { name }, h("option", { value: "" }, `any ${name}`), ...values.map((v) => h("option", { value: v, selected: query.get(name) === v }, v)));
  const filters = h("form", { class: "filters", "data-audit-filters": true, onsubmit: (e: Event) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(e.target as HTMLFormElement)) if (typeof v === "string" && v) q.set(k, v);
    location.hash = `#/audit?${q}`;
  } },
    field("user", { placeholder: "user" }), select("action", ACTIONS), select("outcome", OUTCOMES),
    field("from", { type: "date" }), field("to", { type: "date" }), h("button", { type: "submit" }, "Filter"));

  const rows = page.entries.map((e) =>
    h("tr", { "data-audit": e.id },
      h("td", {}, time(e.at)),
      h("td", {}, e.user ?? ""),
      h("td", {}, e.address ?? ""),
      h("td", {}, e.action),
      h("td", { class: "summary" }, h("code", {}, JSON.stringify(e.target))),
      h("td", {}, h("span", { class: `badge s-${e.outcome === "success" || e.outcome === "accepted" ? "success" : "failure"}`, "data-outcome": e.outcome }, e.outcome)),
      h("td", {}, e.code === null ? "" : String(e.code)),
      h("td", {}, dur(e.durationMs)),
    ));
  const pageNo = Number(query.get("page") ?? 0);
  const go = (p: number) => {
    const q = new URLSearchParams(query);
    q.set("page", String(p));
    location.hash = `#/audit?${q}`;
  };
  root.replaceChildren(
    h("h1", {}, "Audit trail"),
    filters,
    h("p", { class: "dim" }, `${page.totalCount} entries`),
    h("table", {},
      h("thead", {}, h("tr", {}, ...["When", "User", "From", "Action", "Target", "Outcome", "Code", "Took"].map((t) => h("th", {}, t)))),
      h("tbody", {}, ...rows)),
    h("p", { class: "pager" },
      h("button", { disabled: pageNo <= 0, onclick: () => go(pageNo - 1) }, "Newer"),
      ` page ${pageNo + 1} of ${Math.max(page.totalPage, 1)} `,
      h("button", { disabled: pageNo + 1 >= page.totalPage, onclick: () => go(pageNo + 1) }, "Older")),
  );
}
