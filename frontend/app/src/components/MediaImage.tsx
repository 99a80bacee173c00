// An image loaded within the page's media budget (api/mediaBudget.ts), e.g. a crop: it waits for a
// slot behind the frames a player shows, and leaving the screen (unmounting) cancels its wait or
// its download, so images of an item already voted on never hold a connection a vote needs.

import { useEffect, useState } from "react";
import type { MediaPriority } from "../api/mediaBudget";
import { loadImage } from "../player/frameCache";

export function MediaImage({ src, alt, priority = "crop", className }: {
  src: string; alt: string; priority?: MediaPriority; className?: string;
}) {
  const [shown, setShown] = useState<string | null>(null);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    const ctrl = new AbortController();
    setShown(null);
    setFailed(false);
    loadImage(src, ctrl.signal, priority).then(
      () => !ctrl.signal.aborted && setShown(src), // the document's image list answers this address now
      (e: unknown) => !(e instanceof DOMException && e.name === "AbortError") && setFailed(true),
    );
    return () => ctrl.abort();
  }, [src, priority]);
  if (shown) return <img src={shown} alt={alt} className={className} />;
  return <span className={`media-placeholder${failed ? " failed" : ""}`} role="img" aria-label={failed ? `${alt} (could not be loaded)` : alt} aria-busy={!failed} />;
}
