// The keyboard shortcut engine. What the shortcuts are lives in one declarative list
// (shortcuts.ts); screens only bind handlers to ids. The registry matches key events to the
// bound shortcuts, ignores them while the person is typing in a field, and tells the help
// overlay what is active.

/** Where a shortcut applies. Scopes in one EXCLUSIVE group are never active together, so they
 *  may reuse keys (a review and an adjudication both vote with 1, 2, 3; a relation row labels
 *  its candidates with 1 and 0; an audit records its verdict with 1 and 2). */
export type Scope = "global" | "player" | "review" | "relation" | "audit" | "adjudication" | "manager";

export const EXCLUSIVE_SCOPES: readonly (readonly Scope[])[] = [["review", "relation", "audit", "adjudication", "manager"]];

export interface ShortcutDef {
  readonly id: string;
  readonly description: string;
  /** Key combos: `"?"`, `"space"`, `"shift+arrowleft"`, `"mod+enter"` (mod: Ctrl, or ⌘ on a Mac),
   *  letters and digits by their key (`"shift+1"` is Shift with the 1 key on any layout). */
  readonly keys: readonly string[];
  readonly scope: Scope;
  /** Also fires while the focus is in a text field (only for chords with Ctrl/⌘). */
  readonly allowInInput?: boolean;
  /** Fires again while the key is held (stepping frames); votes never repeat. */
  readonly repeat?: boolean;
}

/** The parts of a KeyboardEvent the registry reads (a real event, or a plain object in tests). */
export interface KeyLike {
  key: string;
  code?: string;
  ctrlKey?: boolean;
  metaKey?: boolean;
  altKey?: boolean;
  shiftKey?: boolean;
  repeat?: boolean;
  isComposing?: boolean;
  target?: unknown;
}

const MODIFIERS = ["mod", "alt", "shift"] as const;
const KEY_ALIASES: Record<string, string> = { " ": "space", spacebar: "space", esc: "escape", plus: "+" };

/** Canonical form of a combo as written in the registry: lower case, modifiers in a fixed order. */
export function normalizeCombo(combo: string): string {
  const raw = combo === " " ? "space" : combo.trim().toLowerCase();
  if (raw === "+") return "+";
  const parts = raw.endsWith("++") ? [...raw.slice(0, -2).split("+"), "+"] : raw.split("+");
  const key = parts.pop() as string;
  const mods = new Set(parts.map((p) => (p === "ctrl" || p === "cmd" || p === "meta" ? "mod" : p)));
  for (const m of mods) {
    if (!(MODIFIERS as readonly string[]).includes(m)) throw new Error(`unknown modifier ${m!} in shortcut ${combo!}`);
  }
  if (!key) throw new Error(`shortcut ${combo} has no key`);
  return [...MODIFIERS.filter((m) => mods.has(m)), KEY_ALIASES[key] ?? key].join("+");
}

/** The combo an event stands for. Letters and digits are read from the physical key when a
 *  modifier is held (Shift+1 is "shift+1", not "!"); other characters by what they type, so "?"
 *  is "?" on every layout. */
export function comboFromEvent(e: KeyLike): string {
  let key: string;
  let shift = !!e.shiftKey;
  const code = e.code ?? "";
  if (/^Digit[0-9]$/.test(code)) key = code.slice(5);
  else if (/^Key[A-Z]$/.test(code)) key = code.slice(3).toLowerCase();
  else {
    key = e.key.toLowerCase();
    // A printable character already says whether Shift was held ("?" vs "/").
    if (e.key.length === 1 && e.key !== " ") shift = false;
  }
  key = KEY_ALIASES[key] ?? key;
  const mods: string[] = [];
  if (e.ctrlKey || e.metaKey) mods.push("mod");
  if (e.altKey) mods.push("alt");
  if (shift) mods.push("shift");
  return [...mods, key].join("+");
}

/** True when key presses belong to what the person is typing: text inputs, text areas, selects
 *  and editable content. Range sliders, checkboxes and buttons do not take typing. */
export function isTypingTarget(target: unknown): boolean {
  if (!target || typeof target !== "object") return false;
  const el = target as { tagName?: string; type?: string; isContentEditable?: boolean };
  const tag = (el.tagName ?? "").toUpperCase();
  if (el.isContentEditable) return true;
  if (tag === "TEXTAREA" || tag === "SELECT") return true;
  if (tag === "INPUT") {
    const type = (el.type ?? "text").toLowerCase();
    return !["range", "checkbox", "radio", "button", "submit", "reset", "color", "file", "image"].includes(type);
  }
  return false;
}

/** Take the focus out of a text field (Escape's default on every field). */
function leaveField(target: unknown): boolean {
  const blur = (target as { blur?: () => void }).blur;
  if (typeof blur !== "function") return false;
  blur.call(target);
  return true;
}

export type Handler = () => void;

interface Binding {
  handler: Handler;
  detail?: string;
  token: number;
}

export interface ActiveShortcut {
  def: ShortcutDef;
  detail?: string; // what the binding does on this screen ("vote usable")
}

/** Key matching and bindings over a fixed list of shortcut definitions. */
export class ShortcutRegistry {
  readonly defs: readonly ShortcutDef[];
  private readonly byCombo = new Map<string, ShortcutDef[]>();
  private readonly bindings = new Map<string, Binding[]>();
  private readonly listeners = new Set<() => void>();
  private modalScopes: readonly Scope[] | null = null;
  private nextToken = 1;

  constructor(defs: readonly ShortcutDef[]) {
    const ids = new Set<string>();
    for (const def of defs) {
      if (ids.has(def.id)) throw new Error(`shortcut id ${def.id} is defined twice`);
      ids.add(def.id);
      if (def.keys.length === 0) throw new Error(`shortcut ${def.id} has no keys`);
      for (const k of def.keys) {
        const combo = normalizeCombo(k);
        if (def.allowInInput && !combo.startsWith("mod+") && combo !== "escape") {
          throw new Error(`shortcut ${def.id}: only Ctrl/⌘ chords and Escape may fire while typing (${k})`);
        }
        for (const other of this.byCombo.get(combo) ?? []) {
          if (!exclusive(def.scope, other.scope)) {
            throw new Error(`shortcuts ${other.id} and ${def.id} both use ${combo} in scopes that can be active together`);
          }
        }
        this.byCombo.set(combo, [...(this.byCombo.get(combo) ?? []), def]);
      }
    }
    this.defs = defs;
  }

  /** Bind a handler to a shortcut id until the returned function is called. A later binding of
   *  the same id takes over until it is released (the innermost screen wins). */
  bind(id: string, handler: Handler, detail?: string): () => void {
    if (!this.defs.some((d) => d.id === id)) throw new Error(`no shortcut with id ${id}`);
    const token = this.nextToken++;
    this.bindings.set(id, [...(this.bindings.get(id) ?? []), { handler, detail, token }]);
    this.changed();
    return () => {
      const rest = (this.bindings.get(id) ?? []).filter((b) => b.token !== token);
      if (rest.length) this.bindings.set(id, rest);
      else this.bindings.delete(id);
      this.changed();
    };
  }

  /** While a modal is open only these scopes' shortcuts fire (null: all). */
  setModal(scopes: readonly Scope[] | null): void {
    this.modalScopes = scopes;
    this.changed();
  }

  /** Run the shortcut an event stands for. Returns true when one ran (the caller then prevents
   *  the browser's default action, e.g. scrolling on Space).
   *
   *  Escape in a text field that no bound shortcut takes leaves the field (the focus goes back to
   *  the page, and with it the screen's shortcuts): no field is a keyboard trap. */
  handle(e: KeyLike): boolean {
    if (e.isComposing) return false;
    const combo = comboFromEvent(e);
    const typing = isTypingTarget(e.target);
    for (const def of this.byCombo.get(combo) ?? []) {
      if (typing && !def.allowInInput) continue;
      if (e.repeat && !def.repeat) continue;
      if (this.modalScopes && !this.modalScopes.includes(def.scope)) continue;
      const stack = this.bindings.get(def.id);
      if (!stack || stack.length === 0) continue;
      stack[stack.length - 1].handler();
      return true;
    }
    if (typing && combo === "escape") return leaveField(e.target);
    return false;
  }

  /** The shortcuts that do something now, in definition order (for the help overlay). */
  active(): ActiveShortcut[] {
    return this.defs
      .filter((d) => (this.bindings.get(d.id)?.length ?? 0) > 0)
      .map((def) => {
        const stack = this.bindings.get(def.id) as Binding[];
        return { def, detail: stack[stack.length - 1].detail };
      });
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private changed(): void {
    for (const l of this.listeners) l();
  }
}

function exclusive(a: Scope, b: Scope): boolean {
  return a !== b && EXCLUSIVE_SCOPES.some((group) => group.includes(a) && group.includes(b));
}

/** A combo as people read it: "Shift + ←". */
export function displayCombo(combo: string): string {
  const names: Record<string, string> = {
    arrowleft: "←", arrowright: "→", arrowup: "↑", arrowdown: "↓", space: "Space", escape: "Esc",
    enter: "Enter", mod: "Ctrl", shift: "Shift", alt: "Alt", home: "Home", end: "End",
  };
  return normalizeCombo(combo)
    .split("+")
    .map((p) => names[p] ?? (p.length === 1 ? p.toUpperCase() : p))
    .join(" + ");
}
