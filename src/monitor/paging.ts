import { badRequest } from "../errors.ts";

export const MAX_PAGE_SIZE = 100;

/** pageNo counts from 0; pageSize is 1..100 (docs/operations.md). Out of range is a 400. */
export function pageWindow(pageNo: number, pageSize: number): { limit: number; offset: number } {
  if (!Number.isInteger(pageNo) || pageNo < 0) throw badRequest("pageNo must be an integer ≥ 0");
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE_SIZE) {
    throw badRequest(`pageSize must be an integer from 1 to ${MAX_PAGE_SIZE}`);
  }
  return { limit: pageSize, offset: pageNo * pageSize };
}

/** totalPage = ceil(totalCount / pageSize): 0 runs is 0 pages. */
export function totalPages(totalCount: number, pageSize: number): number {
  return Math.ceil(totalCount / pageSize);
}
