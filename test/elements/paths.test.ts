import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  checkElementName,
  checkFolderPath,
  checkNewFolderPath,
  joinPath,
} from "../../src/elements/paths.ts";

describe("folder paths", () => {
  it("accepts / and /a/b", () => {
    assert.equal(checkFolderPath("/"), null);
    assert.equal(checkFolderPath("/ml/models"), null);
  });
  it("rejects relative, trailing slash, empty, . and .. segments", () => {
    assert.match(checkFolderPath("ml") ?? "", /start with/);
    assert.match(checkFolderPath("/ml/") ?? "", /end with/);
    assert.match(checkFolderPath("/a//b") ?? "", /empty/);
    assert.match(checkFolderPath("/a/./b") ?? "", /\./);
    assert.match(checkFolderPath("/a/../b") ?? "", /\.\./);
  });
  it("joins", () => {
    assert.equal(joinPath("/", "x"), "/x");
    assert.equal(joinPath("/a", "x"), "/a/x");
  });
});

describe("element names", () => {
  it("allows unicode letters, digits, _ - .", () => {
    assert.equal(checkElementName("score_v2.1-β"), null);
    assert.equal(checkElementName("订单"), null);
  });
  it("rejects /, spaces, empty and over 128 characters", () => {
    assert.notEqual(checkElementName("a/b"), null);
    assert.notEqual(checkElementName("a b"), null);
    assert.notEqual(checkElementName(""), null);
    assert.notEqual(checkElementName("x".repeat(129)), null);
    assert.equal(checkElementName("x".repeat(128)), null);
  });
});

describe("paths a write creates folders for", () => {
  it("at most 32 levels and 1024 characters (code points)", () => {
    assert.equal(checkNewFolderPath(`/${Array(32).fill("a").join("/")}`), null);
    assert.match(checkNewFolderPath(`/${Array(33).fill("a").join("/")}`) ?? "", /32 levels/);
    assert.equal(checkNewFolderPath(`/${"訂".repeat(1023)}`), null);
    assert.equal(checkNewFolderPath(`/${"😀".repeat(1023)}`), null);
    assert.match(checkNewFolderPath(`/${"a".repeat(1024)}`) ?? "", /1024 characters/);
    assert.match(checkNewFolderPath(`/${"a".repeat(10_000_000)}`) ?? "", /1024 characters/);
  });
});
