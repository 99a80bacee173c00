import { describe, expect, it } from "vitest";
import { pageSpan } from "./paging";

describe("pages of a list", () => {
  // issue 27, finding 14: the seat board showed "first 100" with no way to the rest
  it("says which rows are shown and where the previous and next pages start", () => {
    expect(pageSpan(345, 100, 0, 100)).toEqual({ from: 1, to: 100, count: 345, previous: null, next: 100 });
    expect(pageSpan(345, 100, 100, 100)).toEqual({ from: 101, to: 200, count: 345, previous: 0, next: 200 });
    expect(pageSpan(345, 100, 300, 45)).toEqual({ from: 301, to: 345, count: 345, previous: 200, next: null });
  });

  it("has one page when everything fits, and none for an empty list", () => {
    expect(pageSpan(7, 100, 0, 7)).toEqual({ from: 1, to: 7, count: 7, previous: null, next: null });
    expect(pageSpan(0, 100, 0, 0)).toEqual({ from: 0, to: 0, count: 0, previous: null, next: null });
  });

  it("never goes before the first row, whatever offset the address carries", () => {
    expect(pageSpan(345, 100, 50, 100).previous).toBe(0);
    expect(pageSpan(10, 100, 500, 0)).toEqual({ from: 0, to: 0, count: 10, previous: 0, next: null });
  });
});
