/**
 * The structured diff of two flow revisions (docs/dataflow-service.md, "Revision diff"). Vertexes
 * are matched by `id`, edges by `id` when they have one, else by `source->target` (a second edge
 * between the same nodes gets `#2`, and so on). Changed paths are JSON Pointers (RFC 6901) into
 * the vertex, edge or `configure`, listed in document order.
 */

export interface VertexRef {
  id: string;
  type: string;
}

export interface EdgeRef {
  key: string;
  source: string;
  target: string;
}

export interface RevisionDiff {
  vertexes: {
    added: VertexRef[];
    removed: VertexRef[];
    changed: (VertexRef & { paths: string[] })[];
  };
  edges: { added: EdgeRef[]; removed: EdgeRef[]; changed: (EdgeRef & { paths: string[] })[] };
  configure: { changed: string[] };
}

type Json = unknown;

const isObject = (v: Json): v is Record<string, Json> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

const pointerToken = (key: string) => key.replace(/~/g, "~0").replace(/\//g, "~1");

/** Every JSON Pointer at which `a` and `b` differ, as deep as both sides have the same shape. */
export function changedPaths(a: Json, b: Json, at = ""): string[] {
  const out: string[] = [];
  collectPaths(a, b, at, out);
  return out;
}

/**
 * Into one list: spreading each level's list into its parent's (`push(...list)`) overflowed the
 * stack past ~100,000 changes in one array and copied every path once per level.
 */
function collectPaths(a: Json, b: Json, at: string, out: string[]): void {
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (i >= a.length || i >= b.length) out.push(`${at}/${i}`);
      else collectPaths(a[i], b[i], `${at}/${i}`, out);
    }
    return;
  }
  if (isObject(a) && isObject(b)) {
    const keys = [...Object.keys(a), ...Object.keys(b).filter((k) => !Object.hasOwn(a, k))];
    for (const k of keys) {
      const p = `${at}/${pointerToken(k)}`;
      if (!Object.hasOwn(a, k) || !Object.hasOwn(b, k)) out.push(p);
      else collectPaths(a[k], b[k], p, out);
    }
    return;
  }
  if (!Object.is(a, b)) out.push(at === "" ? "" : at);
}

interface GraphLike {
  vertexes?: Record<string, Json>[];
  edges?: Record<string, Json>[];
}

function keyed(items: Record<string, Json>[], keyOf: (item: Record<string, Json>) => string) {
  const map = new Map<string, Record<string, Json>>();
  const seen = new Map<string, number>();
  for (const item of items) {
    const base = keyOf(item);
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    map.set(n === 1 ? base : `${base}#${n}`, item);
  }
  return map;
}

const vertexRef = (v: Record<string, Json>): VertexRef => ({
  id: String(v.id),
  type: String(v.type),
});
const edgeKey = (e: Record<string, Json>) =>
  typeof e.id === "string" && e.id !== "" ? e.id : `${String(e.source)}->${String(e.target)}`;
const edgeRef = (key: string, e: Record<string, Json>): EdgeRef => ({
  key,
  source: String(e.source),
  target: String(e.target),
});

/** `from` → `to`: what `to` added, removed and changed. */
export function diffRevisions(
  from: { flow: Json; configure: Json },
  to: { flow: Json; configure: Json },
): RevisionDiff {
  const fa = (from.flow ?? {}) as GraphLike;
  const fb = (to.flow ?? {}) as GraphLike;
  const va = keyed(fa.vertexes ?? [], (v) => String(v.id));
  const vb = keyed(fb.vertexes ?? [], (v) => String(v.id));
  const ea = keyed(fa.edges ?? [], edgeKey);
  const eb = keyed(fb.edges ?? [], edgeKey);
  const out: RevisionDiff = {
    vertexes: { added: [], removed: [], changed: [] },
    edges: { added: [], removed: [], changed: [] },
    configure: { changed: changedPaths(from.configure ?? {}, to.configure ?? {}) },
  };
  for (const [id, v] of va) {
    const other = vb.get(id);
    if (!other) out.vertexes.removed.push(vertexRef(v));
    else {
      const paths = changedPaths(v, other);
      if (paths.length > 0) out.vertexes.changed.push({ ...vertexRef(other), paths });
    }
  }
  for (const [id, v] of vb) if (!va.has(id)) out.vertexes.added.push(vertexRef(v));
  for (const [key, e] of ea) {
    const other = eb.get(key);
    if (!other) out.edges.removed.push(edgeRef(key, e));
    else {
      const paths = changedPaths(e, other);
      if (paths.length > 0) out.edges.changed.push({ ...edgeRef(key, other), paths });
    }
  }
  for (const [key, e] of eb) if (!ea.has(key)) out.edges.added.push(edgeRef(key, e));
  return out;
}
