import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { inspectZip } from "../../src/scripts/zip-inspect.ts";
import { makeZip } from "../helpers/zip.ts";

const limits = { zipEntries: 10, zipUncompressedBytes: 10_000 };

/** Rewrites one field of the first entry's central directory record, which yauzl trusts. */
function lie(zip: Buffer, field: "method" | "compressedSize" | "uncompressedSize", value: number) {
  const at = zip.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
  assert.ok(at >= 0, "central directory record");
  const b = Buffer.from(zip);
  if (field === "method") b.writeUInt16LE(value, at + 10);
  else b.writeUInt32LE(value, at + (field === "compressedSize" ? 20 : 24));
  return b;
}

describe("inspectZip", () => {
  it("accepts main.py at the root and returns every .py source", async () => {
    const v = await inspectZip(
      makeZip([
        { name: "main.py", content: "x=1" },
        { name: "util.py", content: "y=2" },
      ]),
      limits,
    );
    assert.equal(v.ok, true);
    if (v.ok) assert.deepEqual(v.pyFiles.map((f) => f.name).sort(), ["main.py", "util.py"]);
  });
  it("accepts main.py inside a single top-level folder", async () => {
    const v = await inspectZip(
      makeZip([{ name: "pkg/" }, { name: "pkg/main.py", content: "" }]),
      limits,
    );
    assert.equal(v.ok && v.entry, "pkg/main.py");
  });
  it("rejects a zip without main.py (status 2), naming what its top level holds", async () => {
    const v = await inspectZip(makeZip([{ name: "a/main.py" }, { name: "b/x.py" }]), limits);
    assert.deepEqual(v.ok ? null : [v.status, v.message], [
      2,
      "zip has no main.py at its root or in a single top-level folder (its top level holds a/, b/)",
    ]);
  });
  it("a zip made by macOS Finder: its __MACOSX/ metadata is neither a top folder nor Python", async () => {
    // AppleDouble files: binary, named like the files they describe.
    const fork = "\u0000\u0005\u0016\u0007\u0000\u0002Mac OS X";
    const v = await inspectZip(
      makeZip([
        { name: "proj/main.py", content: "import helper" },
        { name: "proj/helper.py", content: "x = 1" },
        { name: "__MACOSX/proj/._main.py", content: fork },
        { name: "__MACOSX/proj/._helper.py", content: fork },
      ]),
      limits,
    );
    assert.equal(v.ok, true, JSON.stringify(v));
    if (!v.ok) return;
    assert.equal(v.entry, "proj/main.py");
    assert.deepEqual(v.pyFiles.map((f) => f.name).sort(), ["proj/helper.py", "proj/main.py"]);
    assert.equal(v.files.length, 4, "the version's file list still shows every file");
  });
  it("rejects ../ entries and absolute paths (status 2)", async () => {
    for (const name of ["../evil.py", "a/../../evil.py", "/etc/x.py"]) {
      const v = await inspectZip(makeZip([{ name: "main.py" }, { name }]), limits);
      assert.equal(v.ok, false, name);
      if (!v.ok) assert.equal(v.status, 2);
    }
  });
  it("rejects links (status 2)", async () => {
    const v = await inspectZip(
      makeZip([{ name: "main.py" }, { name: "l", content: "/etc/passwd", symlink: true }]),
      limits,
    );
    assert.equal(!v.ok && v.status === 2 && /link/.test(v.message), true);
  });
  it("enforces entry count and uncompressed size (status 3)", async () => {
    const many = Array.from({ length: 11 }, (_, i) => ({ name: `f${i}.py` }));
    const a = await inspectZip(makeZip([{ name: "main.py" }, ...many]), limits);
    assert.equal(!a.ok && a.status, 3);
    const b = await inspectZip(makeZip([{ name: "main.py", content: "#".repeat(20_000) }]), limits);
    assert.equal(!b.ok && b.status, 3);
  });
  it("rejects bytes that are not a zip (status 2)", async () => {
    const v = await inspectZip(Buffer.from("not a zip"), limits);
    assert.equal(!v.ok && v.status, 2);
  });
  it("rejects an entry whose data does not match its stored sizes or method (status 2, not a throw)", async () => {
    const source = "x = 1\n".repeat(50); // 300 bytes
    const zip = makeZip([{ name: "main.py", content: source }]);
    const compressed = zip.readUInt32LE(zip.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02])) + 20);
    const cases = [
      ["uncompressedSize", 10, /too many bytes/], // more data than the header says (a bomb)
      ["uncompressedSize", 5000, /not enough bytes/],
      ["compressedSize", compressed - 4, /unexpected end of file|not enough bytes/],
      ["method", 12, /unsupported compression method/],
    ] as const;
    for (const [field, value, why] of cases) {
      const v = await inspectZip(lie(zip, field, value), limits);
      assert.equal(v.ok, false, `${field} ${value}`);
      if (!v.ok) {
        assert.equal(v.status, 2, `${field} ${value}`);
        assert.match(v.message, /^corrupt zip: entry "main\.py": /);
        assert.match(v.message, why);
      }
    }
  });
});
