import { badRequest } from "../errors.ts";

export const MAX_PAGE_SIZE = 100;

/** pageNo counts from 0; pageSize is 1..100 (docs/operations.md). Out of range is a 400. */
export function pageWindow(pageNo: number, pageSize: number): { limit: number; offset: number } {
  if (!Number.isInteger(pageNo) || pageNo < 0) throw badRequest("pageNo must be an integer ≥ 0");
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE_SIZE) {
    throw badRequest(`pageSize must be an integer from 1 to ${MAX_PAGE_SIZE}`);
  }
  const offset = pageNo * pageSize;
  // Past 2^53 the offset is no longer an integer a store can bind (SQLite reads it back as a
  // RangeError, PostgreSQL's bigint overflows): no page is that far, so it is a 400.
  if (!Number.isSafeInteger(offset)) throw badRequest("pageNo is too large");
  return { limit: pageSize, offset };
}

/** totalPage = ceil(totalCount / pageSize): 0 runs is 0 pages. */
export function totalPages(totalCount: number, pageSize: number): number {
  return Math.ceil(totalCount / pageSize);
}
