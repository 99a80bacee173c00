// Pages of a list endpoint (`limit` and `offset`, as common.pagination answers them): which rows
// a page shows and where the previous and next pages start.

export interface PageSpan {
  from: number; // first row shown, 1-based (0: none)
  to: number; // last row shown
  count: number; // rows in all
  previous: number | null; // offset of the previous page (null: this is the first)
  next: number | null; // offset of the next page (null: this is the last)
}

/** The span of a page of `limit` rows at `offset` that came back with `shown` rows of `count`. */
export function pageSpan(count: number, limit: number, offset: number, shown: number): PageSpan {
  const from = shown > 0 ? offset + 1 : 0;
  const to = shown > 0 ? offset + shown : 0;
  return {
    from, to, count,
    previous: offset > 0 ? Math.max(0, Math.min(offset, count) - limit) : null,
    next: offset + shown < count && shown > 0 ? offset + shown : null,
  };
}
