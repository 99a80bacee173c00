// Previous / next page buttons of a list, with which rows are shown ("items 101–200 of 345").

import type { PageSpan } from "./paging";
import { pluralOf } from "./plural";

export function Pager({ span, noun, onPage }: { span: PageSpan; noun: string; onPage: (offset: number) => void }) {
  if (span.previous === null && span.next === null) return null;
  const what = pluralOf(noun);
  return (
    <nav className="pager" aria-label={`Pages of ${what}`}>
      <button type="button" disabled={span.previous === null} onClick={() => span.previous !== null && onPage(span.previous)}>
        ← Previous
      </button>
      <span className="pager-text" aria-live="polite">{what} {span.from}–{span.to} of {span.count}</span>
      <button type="button" disabled={span.next === null} onClick={() => span.next !== null && onPage(span.next)}>
        Next →
      </button>
    </nav>
  );
}
