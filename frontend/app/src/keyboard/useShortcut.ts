// Binding shortcuts from React components: the handler may change on every render; the binding
// lives as long as the component (and `enabled`). Bindings are made in a layout effect, before the
// browser paints: a key pressed as soon as the screen shows what it acts on is never lost.

import { useLayoutEffect, useRef, useSyncExternalStore } from "react";
import { shortcuts } from "./shortcuts";
import type { ActiveShortcut } from "./registry";

export function useShortcut(id: string, handler: () => void, opts: { detail?: string; enabled?: boolean } = {}): void {
  const latest = useRef(handler);
  latest.current = handler;
  const enabled = opts.enabled ?? true;
  useLayoutEffect(() => {
    if (!enabled) return undefined;
    return shortcuts.bind(id, () => latest.current(), opts.detail);
  }, [id, enabled, opts.detail]);
}

/** The keys of a shortcut, for `aria-keyshortcuts` and hints on buttons. */
export function keysOf(id: string): readonly string[] {
  return shortcuts.defs.find((d) => d.id === id)?.keys ?? [];
}

/** `aria-keyshortcuts` value of a shortcut id ("Shift+ArrowLeft"). */
export function ariaKeys(id: string): string {
  const name = (p: string) =>
    ({ mod: "Control", shift: "Shift", alt: "Alt", space: "Space", escape: "Escape", enter: "Enter" })[p] ??
    (p.startsWith("arrow") ? `Arrow${p.slice(5, 6).toUpperCase()}${p.slice(6)}` : p.length === 1 ? p : p[0].toUpperCase() + p.slice(1));
  return keysOf(id).map((k) => k.split("+").map(name).join("+")).join(" ");
}

let cached: ActiveShortcut[] = [];
let version = -1;
let current = 0;
shortcuts.subscribe(() => {
  current++;
});

/** The shortcuts bound right now (re-renders when bindings change). */
export function useActiveShortcuts(): ActiveShortcut[] {
  return useSyncExternalStore(
    (cb) => shortcuts.subscribe(cb),
    () => {
      if (version !== current) {
        cached = shortcuts.active();
        version = current;
      }
      return cached;
    },
  );
}

export interface ShortcutBinding {
  id: string;
  handler: () => void;
  detail?: string;
  enabled?: boolean;
}

/** Bind a list of shortcuts whose length may differ between screens (one per label of a stage). */
export function useShortcutList(bindings: ShortcutBinding[]): void {
  const latest = useRef(bindings);
  latest.current = bindings;
  const signature = bindings.map((b) => `${b.id}:${b.detail ?? ""}:${b.enabled !== false}`).join("|");
  useLayoutEffect(() => {
    const offs = latest.current.map((b, i) =>
      b.enabled === false ? null : shortcuts.bind(b.id, () => latest.current[i]?.handler(), b.detail),
    );
    return () => {
      for (const off of offs) off?.();
    };
  }, [signature]);
}
