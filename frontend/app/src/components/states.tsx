// Loading, empty and error states: every screen says plainly what is going on.

import type { ReactNode } from "react";
import { ApiError } from "../api/client";

export function Loading({ what }: { what: string }) {
  return (
    <p className="loading" role="status">
      Loading {what}…
    </p>
  );
}

export function EmptyState({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty" role="status">
      <h2>{title}</h2>
      {children}
    </div>
  );
}

/** An error with the API's message, its code and any details it attached (unless the screen
 *  shows them its own way: `details={false}`), and a way out. */
export function ErrorState({ error, onRetry, title, details = true }: { error: unknown; onRetry?: () => void; title?: string; details?: boolean }) {
  const api = error instanceof ApiError ? error : null;
  const message = api ? api.message : error instanceof Error ? error.message : String(error);
  const extra = details && api && Object.keys(api.extra).length > 0 ? api.extra : null;
  return (
    <div className="error" role="alert">
      <h2>{title ?? (api?.status === 403 ? "Not allowed" : api?.status === 404 ? "Not found" : "Something went wrong")}</h2>
      <p>{message}</p>
      {api && (
        <p className="muted">
          code <code>{api.code}</code>
          {api.status ? ` · HTTP ${api.status}` : ""}
        </p>
      )}
      {extra && <ExtraDetails extra={extra} />}
      {onRetry && (
        <button type="button" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

function ExtraDetails({ extra }: { extra: Record<string, unknown> }) {
  const fields = extra.fields as Record<string, unknown> | undefined;
  if (fields && typeof fields === "object") {
    return (
      <ul>
        {Object.entries(fields).map(([field, msgs]) => (
          <li key={field}>
            <strong>{field}</strong>: {Array.isArray(msgs) ? msgs.join(" ") : String(msgs)}
          </li>
        ))}
      </ul>
    );
  }
  return (
    <dl className="extra">
      {Object.entries(extra).map(([k, v]) => (
        <div key={k}>
          <dt>{k.replaceAll("_", " ")}</dt>
          <dd>{typeof v === "object" ? JSON.stringify(v) : String(v)}</dd>
        </div>
      ))}
    </dl>
  );
}
