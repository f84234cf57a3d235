import { type Environment, SCRIPT, type ScriptVersionsPage, api } from "./api.ts";
import { h, time } from "./dom.ts";

/** An environment's packages, one per line, its hash as the title; "—" without one. */
export function packagesCell(env: Environment | null | undefined): HTMLElement {
  if (!env) return h("span", { class: "dim" }, "no dependencies");
  return h("div", { class: "packages", title: `environment ${env.hash}` }, ...env.packages.map((p) => h("code", { "data-package": p }, p)));
}

/** A script element's versions, newest first, each with the packages of its environment. */
export async function versionsView(root: HTMLElement, name: string, query: URLSearchParams): Promise<void> {
  const pageNo = Number(query.get("page") ?? "0");
  const path = query.get("path");
  const page = await api<ScriptVersionsPage>("POST", `${SCRIPT}/script/element/versions`, { elementName: name, ...(path ? { path } : {}), pageNo, pageSize: 20 });
  const el = page.element;
  const rows = page.items.map((v) =>
    h("tr", { "data-version": String(v.version) },
      h("td", {}, `v${v.version}`),
      h("td", {}, v.kind, h("div", { class: "dim" }, `${v.size} bytes`)),
      h("td", {}, v.uploadedBy ?? "—", h("div", { class: "dim" }, time(v.uploadedAt))),
      h("td", {}, h("code", { title: v.sha256 }, v.sha256.slice(0, 12))),
      h("td", { class: "env" }, packagesCell(v.env), v.env ? h("div", { class: "dim" }, `declared: ${v.env.declared.join(", ")}`) : null)));
  const here = `path=${encodeURIComponent(el.path)}`;
  root.replaceChildren(
    h("h1", {}, `${el.elementName} · versions`),
    h("p", { class: "dim" }, `${el.path} · ${page.totalCount} versions · `, h("a", { href: `#/runs/PY/${encodeURIComponent(name)}?${here}` }, "tasks")),
    h("table", { id: "versions" },
      h("thead", {}, h("tr", {}, ...["Version", "Kind", "Uploaded", "sha256", "Environment"].map((t) => h("th", {}, t)))),
      h("tbody", {}, ...rows)),
    page.totalPage > 1
      ? h("div", { class: "actions" }, ...Array.from({ length: page.totalPage }, (_, i) => h("a", { href: `#/versions/${encodeURIComponent(name)}?${here}&page=${i}` }, `page ${i + 1}`)))
      : "",
  );
}
