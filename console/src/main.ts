import "./style.css";
import { ApiError, loadScope, saveScope } from "./api.ts";
import { auditView } from "./audit.ts";
import { h } from "./dom.ts";
import { diffView } from "./diff.ts";
import { flowsView } from "./flows.ts";
import { revisionsView } from "./revisions.ts";
import { runView } from "./run.ts";
import { runsView, scriptsView } from "./runs.ts";
import { versionsView } from "./versions.ts";

/**
 * Hash router (#/flows, #/runs/TYPE/NAME?filters, #/run/ID?node=N, #/revisions/NAME?path=,
 * #/diff/NAME?path=&from=&to=, #/versions/NAME?path= (a script's versions),
 * #/audit?user=&action=&outcome=&from=&to=) with live updates: the
 * flows and runs pages by polling every 2 s, a run page by its run's events until it ends
 * (live.ts). Revisions and diffs are drawn once (they change
 * only by the user's own actions, which redraw them).
 */
const view = document.getElementById("view") as HTMLElement;
const form = document.getElementById("scope") as HTMLFormElement;
let timer: number | undefined;
let generation = 0;
/** Stops the live follow of the page being left. */
let leaving = new AbortController();

function notify(msg: string, bad = false): void {
  const el = h("div", { class: `toast${bad ? " bad" : ""}`, role: "status" }, msg);
  document.body.append(el);
  setTimeout(() => el.remove(), 4000);
}

/** The user is working in the page (a checked row, a focused field): do not redraw under them. */
const busy = () => view.querySelector("input[data-run]:checked") !== null || (document.activeElement instanceof HTMLInputElement && view.contains(document.activeElement));

async function render(): Promise<void> {
  const mine = ++generation;
  clearTimeout(timer);
  leaving.abort();
  leaving = new AbortController();
  const [route = "", qs = ""] = location.hash.replace(/^#/, "").split("?");
  const query = new URLSearchParams(qs);
  const parts = route.split("/").filter(Boolean).map(decodeURIComponent);
  let again = 0;
  try {
    if (parts[0] === "run" && parts[1]) {
      // A live run redraws itself when it ends (run.ts follows its events meanwhile).
      await runView(view, parts[1], query.get("node") ?? undefined, notify, {
        signal: leaving.signal,
        rerender: () => {
          if (mine === generation) void render();
        },
      });
    } else if (parts[0] === "runs" && parts[1] && parts[2]) {
      await runsView(view, parts[1], parts[2], query, notify);
      again = 2000;
    } else if (parts[0] === "revisions" && parts[1]) {
      await revisionsView(view, parts[1], query, notify);
    } else if (parts[0] === "versions" && parts[1]) {
      await versionsView(view, parts[1], query);
    } else if (parts[0] === "diff" && parts[1]) {
      await diffView(view, parts[1], query);
    } else if (parts[0] === "audit") {
      await auditView(view, query);
    } else if (parts[0] === "scripts") {
      scriptsView(view);
    } else {
      await flowsView(view, notify);
      again = 2000;
    }
    document.body.dataset.ready = "true";
  } catch (err) {
    const text = err instanceof ApiError ? `${err.message} (code ${err.code})` : String(err);
    const hint = "Set app, space and user above, or paste a session cookie from `sluice token`.";
    view.replaceChildren(h("h1", {}, "Cannot load"), h("pre", { class: "error" }, text), h("p", {}, hint));
  }
  if (again > 0 && mine === generation) {
    const tick = () => {
      if (mine !== generation) return;
      if (busy()) timer = window.setTimeout(tick, again);
      else void render();
    };
    timer = window.setTimeout(tick, again);
  }
}

const scope = loadScope();
for (const k of ["app", "space", "user"] as const) (form.elements.namedItem(k) as HTMLInputElement).value = scope[k];
form.addEventListener("submit", (e) => {
  e.preventDefault();
  const value = (k: string) => (form.elements.namedItem(k) as HTMLInputElement).value.trim();
  saveScope({ app: value("app"), space: value("space"), user: value("user") }, value("session"));
  void render();
});
window.addEventListener("hashchange", () => void render());
void render();
