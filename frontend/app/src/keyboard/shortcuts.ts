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
  // review (usability, duplicates, descriptions, cross-video pairs)
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
  { id: "review.otherReason", description: "Type another reason (Enter keeps it, Esc leaves the field; then vote)", keys: ["o"], scope: "review" },
  { id: "review.previous", description: "Previous item (your earlier votes)", keys: ["p", "["], scope: "review" },
  { id: "review.next", description: "Next item", keys: ["n", "]"], scope: "review" },
  { id: "review.undo", description: "Withdraw the vote you just made, before it is sent", keys: ["mod+z"], scope: "review" },
  { id: "review.sendNow", description: "Send the vote now instead of at the end of the undo countdown", keys: ["enter"], scope: "review" },
  { id: "review.skip", description: "Skip this item (with a reason); it does not come straight back", keys: ["s"], scope: "review" },
  // description review: the table of sentences and facts, and the inline correction
  { id: "review.rowDown", description: "Select the next row", keys: ["arrowdown"], scope: "review" },
  { id: "review.rowUp", description: "Select the previous row", keys: ["arrowup"], scope: "review" },
  { id: "review.edit", description: "Edit the selected row (Enter keeps the edit, Esc leaves it)", keys: ["e"], scope: "review" },
  { id: "review.toggleKnown", description: "Mark the selected fact unknown, or known again", keys: ["u"], scope: "review" },
  { id: "review.toggleRemoved", description: "Remove the selected fact, or bring it back", keys: ["x"], scope: "review" },
  { id: "review.revertRow", description: "Undo your edits of the selected row", keys: ["shift+x"], scope: "review" },
  { id: "review.evidence", description: "Show the selected fact's next evidence frame", keys: ["f"], scope: "review" },
  { id: "review.submitCorrection", description: "Vote usable after minor correction, with your edits", keys: ["mod+enter"], scope: "review", allowInInput: true },
  // relation rows: a query against the candidates of its pool
  { id: "relation.match", description: "Label the selected candidate 1 (match)", keys: ["1"], scope: "relation" },
  { id: "relation.mismatch", description: "Label the selected candidate 0 (mismatch)", keys: ["0"], scope: "relation" },
  { id: "relation.unknown", description: "Label the selected candidate ⊥ (unknown)", keys: ["u"], scope: "relation" },
  { id: "relation.nextCandidate", description: "Select the next candidate", keys: ["arrowdown"], scope: "relation" },
  { id: "relation.previousCandidate", description: "Select the previous candidate", keys: ["arrowup"], scope: "relation" },
  { id: "relation.play", description: "Play the selected candidate from its first frame", keys: ["v"], scope: "relation" },
  { id: "relation.faithful", description: "The query is faithful to its target", keys: ["f"], scope: "relation" },
  { id: "relation.unfaithful", description: "The query is not faithful to its target", keys: ["shift+f"], scope: "relation" },
  { id: "relation.natural1", description: "Naturalness 1 (unnatural)", keys: ["shift+1"], scope: "relation" },
  { id: "relation.natural2", description: "Naturalness 2", keys: ["shift+2"], scope: "relation" },
  { id: "relation.natural3", description: "Naturalness 3", keys: ["shift+3"], scope: "relation" },
  { id: "relation.natural4", description: "Naturalness 4", keys: ["shift+4"], scope: "relation" },
  { id: "relation.natural5", description: "Naturalness 5 (fully natural)", keys: ["shift+5"], scope: "relation" },
  { id: "relation.submit", description: "Send the row's labels", keys: ["mod+enter"], scope: "relation", allowInInput: true },
  { id: "relation.previous", description: "Previous item (your earlier votes)", keys: ["p", "["], scope: "relation" },
  { id: "relation.next", description: "Next item", keys: ["n", "]"], scope: "relation" },
  { id: "relation.undo", description: "Withdraw the labels you just sent, before they are sent", keys: ["mod+z"], scope: "relation" },
  { id: "relation.sendNow", description: "Send the labels now instead of at the end of the undo countdown", keys: ["enter"], scope: "relation" },
  { id: "relation.skip", description: "Skip this row (with a reason); it does not come straight back", keys: ["s"], scope: "relation" },
  // audit: one accepted record at a time, blinded
  { id: "audit.correct", description: "Verdict: the record is correct", keys: ["1"], scope: "audit" },
  { id: "audit.error", description: "Verdict: the record has an error", keys: ["2"], scope: "audit" },
  { id: "audit.type1", description: "Error type 1", keys: ["shift+1"], scope: "audit" },
  { id: "audit.type2", description: "Error type 2", keys: ["shift+2"], scope: "audit" },
  { id: "audit.type3", description: "Error type 3", keys: ["shift+3"], scope: "audit" },
  { id: "audit.type4", description: "Error type 4", keys: ["shift+4"], scope: "audit" },
  { id: "audit.type5", description: "Error type 5", keys: ["shift+5"], scope: "audit" },
  { id: "audit.type6", description: "Error type 6", keys: ["shift+6"], scope: "audit" },
  { id: "audit.submit", description: "Record the verdict and take the next record", keys: ["mod+enter"], scope: "audit", allowInInput: true },
  // adjudication
  { id: "adjudication.label1", description: "Decide the first label", keys: ["1"], scope: "adjudication" },
  { id: "adjudication.label2", description: "Decide the second label", keys: ["2"], scope: "adjudication" },
  { id: "adjudication.label3", description: "Decide the third label", keys: ["3"], scope: "adjudication" },
  { id: "adjudication.submit", description: "Submit the decision with its reason", keys: ["mod+enter"], scope: "adjudication", allowInInput: true },
  { id: "adjudication.previous", description: "Previous item in the queue", keys: ["p", "["], scope: "adjudication" },
  { id: "adjudication.next", description: "Next item in the queue", keys: ["n", "]"], scope: "adjudication" },
  { id: "adjudication.bottomMatch", description: "Relation row: label the next candidate left ⊥ 1 (match)", keys: ["y"], scope: "adjudication" },
  { id: "adjudication.bottomMismatch", description: "Relation row: label the next candidate left ⊥ 0 (mismatch)", keys: ["x"], scope: "adjudication" },
  { id: "adjudication.bottomUnknown", description: "Relation row: the next candidate left ⊥ stays ⊥ (cannot tell either)", keys: ["u"], scope: "adjudication" },
  // manager screens
  { id: "manager.refresh", description: "Refresh now", keys: ["shift+r"], scope: "manager" },
];

/** The registry the app uses (tests build their own from SHORTCUTS or from test lists). */
export const shortcuts = new ShortcutRegistry(SHORTCUTS);
