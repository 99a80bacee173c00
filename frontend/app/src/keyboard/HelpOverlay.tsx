// The keyboard help dialog (?): every shortcut that does something on this screen, by scope.

import { useEffect, useRef } from "react";
import { displayCombo, type Scope } from "./registry";
import { shortcuts } from "./shortcuts";
import { useActiveShortcuts } from "./useShortcut";

const SCOPE_TITLES: Record<Scope, string> = {
  global: "Everywhere",
  player: "Player",
  review: "Review",
  relation: "Relation row",
  audit: "Audit",
  adjudication: "Adjudication",
  manager: "Manager screens",
};

export function HelpOverlay({ onClose }: { onClose: () => void }) {
  const active = useActiveShortcuts();
  const dialog = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const before = document.activeElement as HTMLElement | null;
    dialog.current?.focus();
    shortcuts.setModal(["global"]);
    return () => {
      shortcuts.setModal(null);
      before?.focus?.();
    };
  }, []);
  const scopes = [...new Set(active.map((a) => a.def.scope))];
  return (
    <div className="overlay" onClick={onClose}>
      <div
        className="dialog"
        role="dialog"
        aria-modal="true"
        aria-labelledby="help-title"
        tabIndex={-1}
        ref={dialog}
        onClick={(e) => e.stopPropagation()}
      >
        <h2 id="help-title">Keyboard shortcuts</h2>
        <p className="muted">Shortcuts are off while you type in a text field; Esc leaves the field. Press Esc or ? to close.</p>
        {scopes.map((scope) => (
          <section key={scope}>
            <h3>{SCOPE_TITLES[scope]}</h3>
            <table className="shortcuts">
              <tbody>
                {active
                  .filter((a) => a.def.scope === scope)
                  .map(({ def, detail }) => (
                    <tr key={def.id}>
                      <td>
                        {def.keys.map((k) => (
                          <kbd key={k}>{displayCombo(k)}</kbd>
                        ))}
                      </td>
                      <td>{detail ? `${def.description}: ${detail}` : def.description}</td>
                    </tr>
                  ))}
              </tbody>
            </table>
          </section>
        ))}
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
    </div>
  );
}
