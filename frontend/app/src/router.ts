// Client-side routing over the History API. Django answers every non-API path with the app's
// page, so a reload or a shared link lands on the same screen.

import { useSyncExternalStore } from "react";

/** Match a path pattern like `/review/:stage/:item?` (trailing `?`: optional segment). */
export function matchPath(pattern: string, pathname: string): Record<string, string> | null {
  const pat = pattern.split("/").filter(Boolean);
  const parts = pathname.split("/").filter(Boolean);
  const params: Record<string, string> = {};
  if (parts.length > pat.length) return null;
  for (let i = 0; i < pat.length; i++) {
    const p = pat[i];
    const optional = p.endsWith("?");
    const name = optional ? p.slice(0, -1) : p;
    const value = parts[i];
    if (value === undefined) {
      if (optional) continue;
      return null;
    }
    if (name.startsWith(":")) params[name.slice(1)] = decodeURIComponent(value);
    else if (name !== value) return null;
  }
  return params;
}

const listeners = new Set<() => void>();

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  window.addEventListener("popstate", listener);
  return () => {
    listeners.delete(listener);
    window.removeEventListener("popstate", listener);
  };
}

/** Go to `to` without reloading the page. */
export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  if (opts.replace) window.history.replaceState(null, "", to);
  else window.history.pushState(null, "", to);
  for (const l of listeners) l();
}

/** The current path (re-renders the caller when it changes). */
export function usePathname(): string {
  return useSyncExternalStore(subscribe, () => window.location.pathname);
}

/** The current query string parameters. */
export function useSearchParams(): URLSearchParams {
  const search = useSyncExternalStore(subscribe, () => window.location.search);
  return new URLSearchParams(search);
}
