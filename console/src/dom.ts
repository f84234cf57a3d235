/** A tiny element builder: the console is small enough not to need a framework. */
type Child = Node | string | number | null | undefined | false;

export function h(tag: string, attrs: Record<string, string | ((e: Event) => void) | boolean | undefined> = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
    else if (v === true) el.setAttribute(k, "");
    else if (typeof v === "string") el.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(typeof c === "number" ? String(c) : c);
  return el;
}

export const badge = (status: string) => h("span", { class: `badge s-${status.toLowerCase()}`, "data-status": status }, status);
export const time = (ms?: number) => (ms === undefined ? "" : new Date(ms).toLocaleString());
export const dur = (ms?: number) => (ms === undefined ? "" : ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`);
export const json = (v: unknown) => h("pre", {}, v === undefined ? "—" : JSON.stringify(v, null, 2));
export const TERMINAL = new Set(["SUCCESS", "FAILURE", "CANCELED"]);
