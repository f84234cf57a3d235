import { ApiError, DF, type RevisionSummary, type RevisionsPage, api } from "./api.ts";
import { badge, h, time } from "./dom.ts";

type Notify = (msg: string, bad?: boolean) => void;

/** `elementName` and `path` of the flow a revisions or diff page is about. */
export const flowLoc = (name: string, query: URLSearchParams) => ({ elementName: name, ...(query.get("path") ? { path: query.get("path") ?? "" } : {}) });
const qs = (query: URLSearchParams) => (query.get("path") ? `path=${encodeURIComponent(query.get("path") ?? "")}` : "");

/**
 * Asks before a release change with a modal <dialog> (visible in screenshots, unlike confirm()).
 * Resolves true on Confirm, false on Cancel or Escape.
 */
function confirmDialog(title: string, text: string, confirmLabel: string): Promise<boolean> {
  return new Promise((resolve) => {
    const dialog = h("dialog", { id: "confirm", class: "confirm" }) as HTMLDialogElement;
    const done = (answer: boolean) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    dialog.append(
      h("h2", {}, title),
      h("p", {}, text),
      h("div", { class: "actions" }, h("button", { class: "primary", "data-confirm": "yes", onclick: () => done(true) }, confirmLabel), h("button", { "data-confirm": "no", onclick: () => done(false) }, "Cancel")),
    );
    dialog.addEventListener("cancel", () => done(false));
    document.body.append(dialog);
    dialog.showModal();
  });
}

/** A flow's revisions, newest first, the live one marked; compare two; activate (roll back to) one. */
export async function revisionsView(root: HTMLElement, name: string, query: URLSearchParams, notify: Notify): Promise<void> {
  const loc = flowLoc(name, query);
  const pageNo = Number(query.get("page") ?? "0");
  const page = await api<RevisionsPage>("POST", `${DF}/flow/revisions`, { ...loc, pageNo, pageSize: 20 });
  const el = page.element;
  const activate = async (r: RevisionSummary) => {
    const older = el.releaseVersion !== null && r.version < el.releaseVersion;
    const what = older ? `Roll back ${name} to v${r.version}` : `Activate v${r.version} of ${name}`;
    const ok = await confirmDialog(`${what}?`, `v${r.version} "${r.revisionName}" becomes the release and the flow APPROVED: /run executes it from the next run. Its script nodes are pinned to the newest script versions now.`, older ? "Roll back" : "Activate");
    if (!ok) return;
    try {
      await api<string>("POST", `${DF}/flow/activate`, { ...loc, version: r.version });
      notify(`${what}: done`);
      location.hash = `#/revisions/${encodeURIComponent(name)}?${qs(query)}&t=${Date.now()}`;
    } catch (err) {
      notify(err instanceof ApiError ? `${what}: ${err.message} (${err.code})` : String(err), true);
    }
  };
  const rows = page.items.map((r) =>
    h(
      "tr",
      { "data-version": String(r.version), class: r.live ? "live" : "" },
      h("td", {}, h("input", { type: "checkbox", "data-pick": String(r.version), "aria-label": `pick v${r.version}` })),
      h("td", {}, h("a", { href: `#/diff/${encodeURIComponent(name)}?${qs(query)}&from=${r.version}&to=${r.version}` }, `v${r.version}`)),
      h("td", {}, r.revisionName),
      h("td", {}, badge(r.status), " ", r.live ? h("span", { class: "badge live-mark", "data-live": "true" }, "LIVE") : h("span", { class: "dim" }, r.stage)),
      h("td", {}, r.deployedBy ?? "—", h("div", { class: "dim" }, time(r.deployedAt))),
      h("td", {}, r.releasedAt ? time(r.releasedAt) : "never"),
      h("td", {}, (r.scriptPins ?? []).map((p) => `${p.nodeId}: ${p.elementName} v${p.version}`).join(", ") || "—"),
      h("td", { class: "row-actions" }, r.live ? "" : h("button", { "data-activate": String(r.version), onclick: () => void activate(r) }, el.releaseVersion !== null && r.version < el.releaseVersion ? "Roll back" : "Activate")),
    ),
  );
  const compare = () => {
    const picked = [...root.querySelectorAll<HTMLInputElement>("input[data-pick]:checked")].map((i) => Number(i.dataset.pick)).sort((a, b) => a - b);
    if (picked.length !== 2) return notify("Pick exactly two revisions to compare", true);
    location.hash = `#/diff/${encodeURIComponent(name)}?${qs(query)}&from=${picked[0]}&to=${picked[1]}`;
  };
  root.replaceChildren(
    h("h1", {}, `${name} · revisions `, badge(el.status)),
    h("p", { class: "dim" }, `${el.path} · release v${el.releaseVersion ?? "—"} · ${page.totalCount} revisions`),
    h("div", { class: "actions" }, h("button", { id: "compare", onclick: compare }, "Compare selected")),
    h(
      "table",
      { id: "revisions" },
      h("thead", {}, h("tr", {}, ...["", "Version", "Name", "State", "Deployed", "Released", "Script pins", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, ...rows),
    ),
    page.totalPage > 1
      ? h("div", { class: "actions" }, ...Array.from({ length: page.totalPage }, (_, i) => h("a", { href: `#/revisions/${encodeURIComponent(name)}?${qs(query)}&page=${i}` }, `page ${i + 1}`)))
      : "",
  );
}
