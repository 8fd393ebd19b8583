// A code editor for the new-exploration form: a textarea with a line-number gutter in which
// lines with diagnostics are marked, and the diagnostics listed below it (each a button that
// puts the cursor on its line). Plain textarea: keyboard, undo and paste work as everywhere.
import { h, fill } from "./dom.js";

export class Editor {
  /// name: the field's label; value: initial text.
  constructor(name, value = "", { rows = 12 } = {}) {
    this.name = name;
    const id = `editor-${name.toLowerCase().replace(/\W+/g, "-")}`;
    this.gutter = h("div.gutter", { "aria-hidden": "true" });
    this.textarea = h("textarea", {
      id, spellcheck: "false", autocomplete: "off", rows, wrap: "off",
      "aria-describedby": `${id}-diagnostics`,
    });
    this.textarea.value = value;
    this.list = h("ul.diagnostics", { id: `${id}-diagnostics`, "aria-live": "polite" });
    this.status = h("span.editor-status");
    this.el = h("div.editor-field",
      h("div.editor-head", h("label", { for: id }, name), this.status),
      h("div.editor", this.gutter, this.textarea),
      this.list);
    this.textarea.addEventListener("input", () => this.renderGutter());
    this.textarea.addEventListener("scroll", () => (this.gutter.scrollTop = this.textarea.scrollTop));
    this.textarea.addEventListener("keydown", (e) => {
      // Tab indents (two spaces) instead of leaving the field; Escape then Tab leaves it.
      if (e.key === "Tab" && !e.shiftKey && !this.escaped) {
        e.preventDefault();
        this.textarea.setRangeText("  ", this.textarea.selectionStart, this.textarea.selectionEnd, "end");
        this.textarea.dispatchEvent(new Event("input"));
      }
      this.escaped = e.key === "Escape";
    });
    this.diagnostics = [];
    this.renderGutter();
  }

  get value() {
    return this.textarea.value;
  }

  set value(v) {
    this.textarea.value = v;
    this.renderGutter();
  }

  onInput(fn) {
    this.textarea.addEventListener("input", fn);
  }

  /// Shows diagnostics: [{line, col, message, severity, code}] (line 1-based; 0: no place).
  setDiagnostics(diagnostics, status) {
    this.diagnostics = diagnostics;
    this.textarea.setAttribute("aria-invalid", diagnostics.some((d) => d.severity !== "warning") ? "true" : "false");
    fill(this.list, diagnostics.map((d) => h(`li.${d.severity === "warning" ? "warning" : "error"}`,
      h("button.link", {
        type: "button",
        dataset: { line: d.line || 0 },
        onclick: () => this.goTo(d.line, d.col),
      }, d.line ? `${d.line}:${d.col || 1}` : this.name),
      " ", d.severity === "warning" ? "warning: " : "error: ", d.message,
      d.code ? h("span.code-name", ` [${d.code}]`) : null)));
    if (status !== undefined) fill(this.status, status);
    this.renderGutter();
  }

  setStatus(...children) {
    fill(this.status, ...children);
  }

  goTo(line, col = 1) {
    if (!line) return this.textarea.focus();
    const lines = this.textarea.value.split("\n");
    let pos = 0;
    for (let i = 0; i < Math.min(line - 1, lines.length); i++) pos += lines[i].length + 1;
    pos += Math.max(0, (col || 1) - 1);
    this.textarea.focus();
    this.textarea.setSelectionRange(pos, pos);
    const lh = parseFloat(getComputedStyle(this.textarea).lineHeight) || 18;
    this.textarea.scrollTop = Math.max(0, (line - 3) * lh);
  }

  renderGutter() {
    const n = this.textarea.value.split("\n").length;
    const byLine = new Map();
    for (const d of this.diagnostics)
      if (d.line) byLine.set(d.line, (byLine.get(d.line) ? byLine.get(d.line) + "\n" : "") + d.message);
    fill(this.gutter, Array.from({ length: Math.max(n, 1) }, (_, i) => {
      const msg = byLine.get(i + 1);
      return h(msg ? "span.marked" : "span", { title: msg || null, dataset: { line: i + 1 } }, String(i + 1));
    }));
    this.gutter.scrollTop = this.textarea.scrollTop;
  }
}
