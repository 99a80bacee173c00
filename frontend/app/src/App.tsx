// The application frame: header and navigation by role, the current screen, the keyboard
// listener and its help overlay, and focus moved to each new screen's heading.

import { useEffect, useRef, useState } from "react";
import { csrfToken } from "./api/client";
import type { Me } from "./api/types";
import { Link } from "./components/Link";
import { EmptyState } from "./components/states";
import { HelpOverlay } from "./keyboard/HelpOverlay";
import { shortcuts } from "./keyboard/shortcuts";
import { useShortcut } from "./keyboard/useShortcut";
import { findRoute, mayOpen, ROUTES, type Section } from "./routes";
import { usePathname } from "./router";

const SECTIONS: Section[] = ["Annotate", "Adjudicate", "Audit", "Manage", "Data"];

export function App({ me }: { me: Me }) {
  const pathname = usePathname();
  const [help, setHelp] = useState(false);
  const heading = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (!e.defaultPrevented && shortcuts.handle(e)) e.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
  useShortcut("help", () => setHelp((h) => !h));
  useShortcut("close", () => setHelp(false), { enabled: help });

  const found = findRoute(pathname);
  const title = found ? found.route.title(found.params) : "Page not found";
  useEffect(() => {
    document.title = `${title} · Trajlab`;
    heading.current?.focus({ preventScroll: true });
    // a navigation wider than the window scrolls sideways: keep the current page's link in view
    document.querySelector("header.top nav a[aria-current='page']")?.scrollIntoView?.({ block: "nearest", inline: "nearest" });
  }, [pathname, title]);

  const nav = SECTIONS.map((section) => ({
    section,
    routes: ROUTES.filter((r) => r.nav?.section === section && mayOpen(r, me)),
  })).filter((s) => s.routes.length > 0);

  return (
    <>
      <a className="skip" href="#main">Skip to content</a>
      <header className="top">
        <Link to="/" className="brand">Trajlab</Link>
        <nav aria-label="Main">
          {nav.map(({ section, routes }) => (
            <div key={section} className="nav-section">
              <span className="nav-title">{section}</span>
              {routes.map((r) => (
                <Link key={r.path} to={r.path} current={pathname.startsWith(r.path)}>{r.nav?.label}</Link>
              ))}
            </div>
          ))}
        </nav>
        <div className="user">
          <span title={me.roles.join(", ")}>{me.username}</span>
          <button type="button" className="icon" onClick={() => setHelp(true)} aria-label="Keyboard shortcuts" aria-keyshortcuts="?">?</button>
          <a href="/api/docs/">API</a>
          <form method="post" action="/accounts/logout/">
            <input type="hidden" name="csrfmiddlewaretoken" value={csrfToken()} />
            <button type="submit">Sign out</button>
          </form>
        </div>
      </header>
      <main id="main">
        <h1 ref={heading} tabIndex={-1}>{title}</h1>
        {!found ? (
          <EmptyState title="There is no such page">
            <p><Link to="/">Go to your work</Link></p>
          </EmptyState>
        ) : !mayOpen(found.route, me) ? (
          <EmptyState title="This screen is not for your role">
            <p>It needs the role {found.route.roles.join(" or ")}; you have {me.roles.join(", ") || "no role"}.</p>
          </EmptyState>
        ) : (
          found.route.render(found.params, me)
        )}
      </main>
      {help && <HelpOverlay onClose={() => setHelp(false)} />}
    </>
  );
}
