// A confirmation dialog's keyboard: it takes the focus when it opens (so Tab starts inside it,
// whatever its buttons' state), and Esc closes it wherever the focus is, through the shortcut
// registry's "close" (not a key handler on the dialog, which only hears keys pressed inside it).

import { useEffect, useRef } from "react";
import { useShortcut } from "../keyboard/useShortcut";

export function useDialog<T extends HTMLElement = HTMLDivElement>(onClose: () => void, { enabled = true } = {}) {
  const box = useRef<T>(null);
  useEffect(() => {
    box.current?.focus();
  }, []);
  useShortcut("close", onClose, { enabled });
  return box;
}
