// Every keyboard shortcut of the UI, in one place. Screens bind handlers to these ids
// (useShortcut); the help overlay (?) lists the ones that do something on the current screen.

import { ShortcutRegistry, type ShortcutDef } from "./registry";

export const SHORTCUTS: readonly ShortcutDef[] = [
  // global
  { id: "help", description: "Show or hide the keyboard shortcuts", keys: ["?"], scope: "global" },
  { id: "close", description: "Close the dialog", keys: ["escape"], scope: "global", allowInInput: true },
  // player
  { id: "player.toggle", description: "Play / pause", keys: ["space", "k"], scope: "player" },
  { id: "player.back", description: "Previous frame", keys: ["arrowleft", "j"], scope: "player", repeat: true },
  { id: "player.forward", description: "Next frame", keys: ["arrowright", "l"], scope: "player", repeat: true },
  { id: "player.back10", description: "Back 10 frames", keys: ["shift+arrowleft"], scope: "player", repeat: true },
  { id: "player.forward10", description: "Forward 10 frames", keys: ["shift+arrowright"], scope: "player", repeat: true },
  { id: "player.start", description: "First frame", keys: ["home"], scope: "player" },
  { id: "player.end", description: "Last frame", keys: ["end"], scope: "player" },
  { id: "player.slower", description: "Slower", keys: ["-"], scope: "player" },
  { id: "player.faster", description: "Faster", keys: ["=", "+"], scope: "player" },
  { id: "player.replay", description: "Replay from the start", keys: ["r"], scope: "player" },
  { id: "player.zoomIn", description: "Zoom in on the followed box", keys: ["z"], scope: "player" },
  { id: "player.zoomOut", description: "Zoom out", keys: ["shift+z"], scope: "player" },
  // review (usability, duplicates, and the stages that come later)
  { id: "review.label1", description: "Vote the first label", keys: ["1"], scope: "review" },
  { id: "review.label2", description: "Vote the second label", keys: ["2"], scope: "review" },
  { id: "review.label3", description: "Vote the third label", keys: ["3"], scope: "review" },
  { id: "review.label4", description: "Vote the fourth label", keys: ["4"], scope: "review" },
  { id: "review.reason1", description: "Toggle reason 1", keys: ["shift+1"], scope: "review" },
  { id: "review.reason2", description: "Toggle reason 2", keys: ["shift+2"], scope: "review" },
  { id: "review.reason3", description: "Toggle reason 3", keys: ["shift+3"], scope: "review" },
  { id: "review.reason4", description: "Toggle reason 4", keys: ["shift+4"], scope: "review" },
  { id: "review.reason5", description: "Toggle reason 5", keys: ["shift+5"], scope: "review" },
  { id: "review.reason6", description: "Toggle reason 6", keys: ["shift+6"], scope: "review" },
  { id: "review.previous", description: "Previous item (your earlier votes)", keys: ["p", "["], scope: "review" },
  { id: "review.next", description: "Next item", keys: ["n", "]"], scope: "review" },
  // adjudication
  { id: "adjudication.label1", description: "Decide the first label", keys: ["1"], scope: "adjudication" },
  { id: "adjudication.label2", description: "Decide the second label", keys: ["2"], scope: "adjudication" },
  { id: "adjudication.label3", description: "Decide the third label", keys: ["3"], scope: "adjudication" },
  { id: "adjudication.submit", description: "Submit the decision with its reason", keys: ["mod+enter"], scope: "adjudication", allowInInput: true },
  { id: "adjudication.previous", description: "Previous item in the queue", keys: ["p", "["], scope: "adjudication" },
  { id: "adjudication.next", description: "Next item in the queue", keys: ["n", "]"], scope: "adjudication" },
  // manager screens
  { id: "manager.refresh", description: "Refresh now", keys: ["shift+r"], scope: "manager" },
];

/** The registry the app uses (tests build their own from SHORTCUTS or from test lists). */
export const shortcuts = new ShortcutRegistry(SHORTCUTS);
