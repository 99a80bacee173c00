// The header's navigation: a few menus (Review, Build, Models, Releases, Admin; routes.tsx says
// which screen sits in which), each a button that shows its links. It fits one row at any width
// a person uses, and works from the keyboard: Tab reaches every button, Enter or ↓ opens a menu,
// ↑ / ↓ move through its links, Esc closes it and gives the focus back to its button. Leaving a
// menu (focus, a click elsewhere, a navigation) closes it.

import { type KeyboardEvent, useEffect, useRef, useState } from "react";
import { flushSync } from "react-dom";
import type { Me } from "./api/types";
import { Link } from "./components/Link";
import { useShortcut } from "./keyboard/useShortcut";
import { isUnder, menuOf, navMenus, type Section } from "./routes";

export function MainNav({ me, pathname }: { me: Me; pathname: string }) {
  const menus = navMenus(me);
  const [open, setOpen] = useState<Section | null>(null);
  const nav = useRef<HTMLElement>(null);
  const buttons = useRef(new Map<Section, HTMLButtonElement>());
  const current = menuOf(pathname);

  useEffect(() => setOpen(null), [pathname]);
  useShortcut("close", () => {
    if (open) buttons.current.get(open)?.focus();
    setOpen(null);
  }, { enabled: open !== null });
  useEffect(() => {
    if (!open) return undefined;
    const outside = (e: PointerEvent) => {
      if (!nav.current?.contains(e.target as Node)) setOpen(null);
    };
    document.addEventListener("pointerdown", outside);
    return () => document.removeEventListener("pointerdown", outside);
  }, [open]);

  const links = (section: Section) => [...(nav.current?.querySelectorAll<HTMLAnchorElement>(`#menu-${section} a`) ?? [])];
  const onKeyDown = (e: KeyboardEvent<HTMLLIElement>, section: Section) => {
    if (e.key !== "ArrowDown" && e.key !== "ArrowUp" && e.key !== "Home" && e.key !== "End") return;
    e.preventDefault(); // the menu's own keys: no shortcut of the screen below takes them
    // Open it now (not at the next render), so the link can take the focus in this key press and
    // the next press moves on from there, however fast it comes.
    if (open !== section) flushSync(() => setOpen(section));
    const all = links(section);
    const at = all.indexOf(document.activeElement as HTMLAnchorElement);
    const next = e.key === "Home" ? 0 : e.key === "End" ? all.length - 1
      : at < 0 ? (e.key === "ArrowDown" ? 0 : all.length - 1)
      : (at + (e.key === "ArrowDown" ? 1 : -1) + all.length) % all.length;
    all[next]?.focus();
  };

  return (
    <nav aria-label="Main" ref={nav}>
      <ul className="menus">
        {menus.map(({ section, routes }) => (
          <li key={section} className={`menu${current === section ? " current" : ""}`} onKeyDown={(e) => onKeyDown(e, section)}
            onBlur={(e) => {
              if (open === section && !e.currentTarget.contains(e.relatedTarget as Node | null)) setOpen(null);
            }}>
            <button type="button" aria-expanded={open === section} aria-controls={`menu-${section}`}
              ref={(el) => { if (el) buttons.current.set(section, el); else buttons.current.delete(section); }}
              onClick={() => setOpen(open === section ? null : section)}
              title={current === section ? `${section}: the current page is in this menu` : undefined}>
              {section} <span aria-hidden="true">▾</span>
            </button>
            <ul id={`menu-${section}`} className="menu-links" hidden={open !== section}>
              {routes.map((r) => (
                <li key={r.path}><Link to={r.path} current={isUnder(r, pathname)}>{r.nav?.label}</Link></li>
              ))}
            </ul>
          </li>
        ))}
      </ul>
    </nav>
  );
}
