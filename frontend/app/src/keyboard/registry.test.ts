import { describe, expect, it } from "vitest";
import { comboFromEvent, displayCombo, isTypingTarget, normalizeCombo, ShortcutRegistry, type ShortcutDef } from "./registry";
import { SHORTCUTS } from "./shortcuts";

const key = (k: string, extra: Record<string, unknown> = {}) => ({ key: k, code: "", ...extra });

describe("combos", () => {
  it("normalises modifiers and aliases", () => {
    expect(normalizeCombo("Shift+ArrowLeft")).toBe("shift+arrowleft");
    expect(normalizeCombo("ctrl+shift+Enter")).toBe("mod+shift+enter");
    expect(normalizeCombo("Cmd+Enter")).toBe("mod+enter");
    expect(normalizeCombo(" ")).toBe("space");
    expect(normalizeCombo("+")).toBe("+");
    expect(normalizeCombo("shift++")).toBe("shift++");
    expect(() => normalizeCombo("hyper+x")).toThrow(/modifier/);
  });

  it("reads digits and letters from the physical key, other characters from what they type", () => {
    expect(comboFromEvent(key("!", { code: "Digit1", shiftKey: true }))).toBe("shift+1");
    expect(comboFromEvent(key("&", { code: "Digit1" }))).toBe("1"); // AZERTY's 1 key
    expect(comboFromEvent(key("R", { code: "KeyR", shiftKey: true }))).toBe("shift+r");
    expect(comboFromEvent(key("?", { code: "Slash", shiftKey: true }))).toBe("?");
    expect(comboFromEvent(key(" ", { code: "Space" }))).toBe("space");
    expect(comboFromEvent(key("ArrowLeft", { code: "ArrowLeft", shiftKey: true }))).toBe("shift+arrowleft");
    expect(comboFromEvent(key("Enter", { code: "Enter", metaKey: true }))).toBe("mod+enter");
    expect(comboFromEvent(key("1", { code: "Numpad1" }))).toBe("1");
  });

  it("shows combos the way people read them", () => {
    expect(displayCombo("shift+arrowleft")).toBe("Shift + ←");
    expect(displayCombo("mod+enter")).toBe("Ctrl + Enter");
    expect(displayCombo("?")).toBe("?");
  });
});

describe("typing targets", () => {
  it("treats text fields as typing and controls as not", () => {
    expect(isTypingTarget({ tagName: "INPUT", type: "text" })).toBe(true);
    expect(isTypingTarget({ tagName: "INPUT" })).toBe(true);
    expect(isTypingTarget({ tagName: "TEXTAREA" })).toBe(true);
    expect(isTypingTarget({ tagName: "SELECT" })).toBe(true);
    expect(isTypingTarget({ tagName: "DIV", isContentEditable: true })).toBe(true);
    expect(isTypingTarget({ tagName: "INPUT", type: "range" })).toBe(false);
    expect(isTypingTarget({ tagName: "INPUT", type: "checkbox" })).toBe(false);
    expect(isTypingTarget({ tagName: "BUTTON" })).toBe(false);
    expect(isTypingTarget(null)).toBe(false);
  });
});

describe("ShortcutRegistry", () => {
  const defs: ShortcutDef[] = [
    { id: "help", description: "help", keys: ["?"], scope: "global" },
    { id: "vote", description: "vote", keys: ["1"], scope: "review" },
    { id: "decide", description: "decide", keys: ["1"], scope: "adjudication" },
    { id: "step", description: "step", keys: ["arrowright"], scope: "player", repeat: true },
    { id: "submit", description: "submit", keys: ["mod+enter"], scope: "adjudication", allowInInput: true },
  ];

  it("runs the bound handler and reports that it did", () => {
    const r = new ShortcutRegistry(defs);
    const calls: string[] = [];
    r.bind("vote", () => calls.push("vote"));
    expect(r.handle(key("1", { code: "Digit1" }))).toBe(true);
    expect(r.handle(key("2", { code: "Digit2" }))).toBe(false);
    expect(calls).toEqual(["vote"]);
  });

  it("does nothing for a shortcut without a binding, and lets the same key serve exclusive scopes", () => {
    const r = new ShortcutRegistry(defs);
    const calls: string[] = [];
    expect(r.handle(key("1", { code: "Digit1" }))).toBe(false);
    const off = r.bind("decide", () => calls.push("decide"));
    r.handle(key("1", { code: "Digit1" }));
    off();
    r.bind("vote", () => calls.push("vote"));
    r.handle(key("1", { code: "Digit1" }));
    expect(calls).toEqual(["decide", "vote"]);
  });

  it("is off while typing, except for chords meant for text fields", () => {
    const r = new ShortcutRegistry(defs);
    const calls: string[] = [];
    r.bind("vote", () => calls.push("vote"));
    r.bind("submit", () => calls.push("submit"));
    const field = { tagName: "TEXTAREA" };
    expect(r.handle(key("1", { code: "Digit1", target: field }))).toBe(false);
    expect(r.handle(key("Enter", { code: "Enter", ctrlKey: true, target: field }))).toBe(true);
    expect(r.handle(key("1", { code: "Digit1", target: { tagName: "INPUT", type: "checkbox" } }))).toBe(true);
    expect(calls).toEqual(["submit", "vote"]);
  });

  it("Escape leaves a text field when nothing bound takes it, and a vote key typed there stays text", () => {
    // issue 27, finding 10: Esc did not leave the "Other reason" field
    const r = new ShortcutRegistry(defs);
    const calls: string[] = [];
    r.bind("vote", () => calls.push("vote"));
    let blurred = 0;
    const field = { tagName: "INPUT", type: "text", blur: () => { blurred += 1; } };
    expect(r.handle(key("2", { code: "Digit2", target: field }))).toBe(false);
    expect(r.handle(key("1", { code: "Digit1", target: field }))).toBe(false);
    expect(r.handle(key("Escape", { code: "Escape", target: field }))).toBe(true);
    expect(blurred).toBe(1);
    expect(calls).toEqual([]);
    // outside a field Escape is nobody's unless bound
    expect(r.handle(key("Escape", { code: "Escape", target: { tagName: "BUTTON", blur: () => { blurred += 1; } } }))).toBe(false);
    expect(blurred).toBe(1);
    // a bound Escape for text fields (a dialog's close) goes first and the field keeps the focus
    const dialog = new ShortcutRegistry([...defs, { id: "close", description: "close", keys: ["escape"], scope: "global", allowInInput: true }]);
    dialog.bind("close", () => calls.push("close"));
    expect(dialog.handle(key("Escape", { code: "Escape", target: field }))).toBe(true);
    expect(calls).toEqual(["close"]);
    expect(blurred).toBe(1);
  });

  it("ignores held-down repeats unless the shortcut repeats", () => {
    const r = new ShortcutRegistry(defs);
    const calls: string[] = [];
    r.bind("vote", () => calls.push("vote"));
    r.bind("step", () => calls.push("step"));
    r.handle(key("1", { code: "Digit1", repeat: true }));
    r.handle(key("ArrowRight", { code: "ArrowRight", repeat: true }));
    expect(calls).toEqual(["step"]);
  });

  it("the latest binding wins until released", () => {
    const r = new ShortcutRegistry(defs);
    const calls: string[] = [];
    r.bind("help", () => calls.push("outer"));
    const off = r.bind("help", () => calls.push("inner"), "inner help");
    r.handle(key("?"));
    expect(r.active().map((a) => a.detail)).toEqual(["inner help"]);
    off();
    r.handle(key("?"));
    expect(calls).toEqual(["inner", "outer"]);
  });

  it("a modal lets only its scopes through", () => {
    const r = new ShortcutRegistry(defs);
    const calls: string[] = [];
    r.bind("vote", () => calls.push("vote"));
    r.bind("help", () => calls.push("help"));
    r.setModal(["global"]);
    r.handle(key("1", { code: "Digit1" }));
    r.handle(key("?"));
    r.setModal(null);
    r.handle(key("1", { code: "Digit1" }));
    expect(calls).toEqual(["help", "vote"]);
  });

  it("lists active shortcuts in definition order for the help overlay", () => {
    const r = new ShortcutRegistry(defs);
    r.bind("step", () => undefined);
    r.bind("help", () => undefined);
    expect(r.active().map((a) => a.def.id)).toEqual(["help", "step"]);
  });

  it("refuses duplicate ids, keys that clash across scopes, unknown ids and typing-time letters", () => {
    expect(() => new ShortcutRegistry([...defs, { id: "help", description: "", keys: ["h"], scope: "global" }])).toThrow(/twice/);
    expect(() => new ShortcutRegistry([...defs, { id: "x", description: "", keys: ["1"], scope: "player" }])).toThrow(/both use 1/);
    expect(() => new ShortcutRegistry([{ id: "x", description: "", keys: ["a"], scope: "global", allowInInput: true }])).toThrow(/while typing/);
    expect(() => new ShortcutRegistry(defs).bind("nope", () => undefined)).toThrow(/no shortcut/);
  });

  it("the app's own list is consistent", () => {
    const r = new ShortcutRegistry(SHORTCUTS);
    expect(r.defs.length).toBe(SHORTCUTS.length);
    for (const d of SHORTCUTS) expect(d.description.length).toBeGreaterThan(3);
  });
});
