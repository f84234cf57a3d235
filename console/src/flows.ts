import { ApiError, DF, type FlowRecord, api } from "./api.ts";
import { badge, dur, h, time } from "./dom.ts";

/** Flows page: every DPL element with status, schedule and last run, and the lifecycle buttons. */
export async function flowsView(root: HTMLElement, notify: (msg: string, bad?: boolean) => void): Promise<void> {
  const flows = await api<FlowRecord[]>("GET", `${DF}/monitor/flows`);
  const loc = (f: FlowRecord) => ({ elementName: f.element.elementName, ...(f.element.path ? { path: f.element.path } : {}) });
  const act = (label: string, fn: () => Promise<unknown>) =>
    h("button", {
      onclick: async () => {
        try {
          const out = await fn();
          if (typeof out === "string") notify(`${label}: ${out}`);
        } catch (err) {
          notify(err instanceof ApiError ? `${label}: ${err.message} (${err.code})` : String(err), true);
        }
      },
    }, label);
  const rows = flows.map((f) => {
    const name = f.element.elementName;
    const runsHref = `#/runs/DPL/${encodeURIComponent(name)}?path=${encodeURIComponent(f.element.path ?? "")}`;
    return h(
      "tr",
      { "data-flow": name },
      h("td", {}, h("a", { href: runsHref }, name), h("div", { class: "dim" }, f.element.path ?? "", f.element.description ? ` · ${f.element.description}` : "")),
      h("td", {}, badge(f.status)),
      h("td", {}, h("a", { href: `#/revisions/${encodeURIComponent(name)}?path=${encodeURIComponent(f.element.path ?? "")}`, "data-revisions": name }, `v${f.revision.version} ${f.revision.name}`)),
      h("td", {}, f.schedule ? h("span", {}, h("code", {}, f.schedule.crontab), h("div", { class: "dim" }, f.schedule.nextRunAt ? `next ${time(f.schedule.nextRunAt)}` : "not scheduled")) : "—"),
      h(
        "td",
        {},
        f.lastRun ? h("span", {}, h("a", { href: `#/run/${f.lastRun.runId}` }, badge(f.lastRun.runStatus)), h("div", { class: "dim" }, time(f.lastRun.createTime), " ", dur(f.lastRun.duration))) : "—",
      ),
      h("td", {}, String(f.totalRuns)),
      h(
        "td",
        { class: "row-actions" },
        act("Activate", async () => {
          const s = await api<string>("POST", `${DF}/flow/activate`, loc(f));
          location.hash = `#/flows?t=${Date.now()}`;
          return s;
        }),
        act("Deactivate", async () => {
          const s = await api<string>("POST", `${DF}/flow/deactivate`, loc(f));
          location.hash = `#/flows?t=${Date.now()}`;
          return s;
        }),
        act("Run", async () => {
          const text = prompt(`Parameter for ${name} (JSON)`, "{}");
          if (text === null) return;
          const runId = await api<string>("POST", `${DF}/run`, { ...loc(f), parameter: JSON.parse(text) });
          location.hash = `#/run/${runId}`;
          return undefined;
        }),
      ),
    );
  });
  root.replaceChildren(
    h("h1", {}, "Flows"),
    flows.length === 0
      ? h("p", { class: "dim" }, "No flows in this scope yet: deploy one with `sluice deploy flow.json --activate`.")
      : h(
          "table",
          { id: "flows" },
          h("thead", {}, h("tr", {}, ...["Flow", "Status", "Revision", "Schedule", "Last run", "Runs", ""].map((t) => h("th", {}, t)))),
          h("tbody", {}, ...rows),
        ),
  );
}
