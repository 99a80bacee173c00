// The application frame: header and navigation menus by role, the current screen, the keyboard
// listener and its help overlay, and focus moved to each new screen's heading.

import { useEffect, useRef, useState } from "react";
import { csrfToken } from "./api/client";
import type { Me } from "./api/types";
import { Link } from "./components/Link";
import { EmptyState } from "./components/states";
import { HelpOverlay } from "./keyboard/HelpOverlay";
import { shortcuts } from "./keyboard/shortcuts";
import { useShortcut } from "./keyboard/useShortcut";
import { MainNav } from "./MainNav";
import { findRoute, mayOpen } from "./routes";
import { usePathname } from "./router";

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
  }, [pathname, title]);

  return (
    <>
      <a className="skip" href="#main">Skip to content</a>
      <header className="top">
        <Link to="/" className="brand">Trajlab</Link>
        <MainNav me={me} pathname={pathname} />
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
