// Building DOM nodes without innerHTML (data shown in the page never becomes markup), and the
// formatting every view shares.

/// h("a.link", {href: "/x"}, "text", child, ...): an element with classes, attributes
/// (functions under on* become listeners) and children (strings become text; null is skipped).
export function h(tag, attrs, ...children) {
  const [name, ...classes] = tag.split(".");
  const el = document.createElement(name || "div");
  if (classes.length) el.className = classes.join(" ");
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className += (el.className ? " " : "") + v;
    else if (k === "dataset") {
      for (const [dk, dv] of Object.entries(v)) if (dv !== null && dv !== undefined) el.dataset[dk] = dv;
    }
    else if (k === "value") el.value = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/// Replaces an element's children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/// A time in milliseconds, to three significant digits with a unit that keeps it readable.
export function ms(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (v >= 1000) return (v / 1000).toPrecision(3) + " s";
  if (v >= 1) return v.toPrecision(4) + " ms";
  if (v >= 0.001) return (v * 1000).toPrecision(3) + " µs";
  return (v * 1e6).toPrecision(3) + " ns";
}

export function ratio(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  return (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v >= 0.1 ? v.toFixed(2) : v.toPrecision(2)) + "×";
}

export function count(n) {
  return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US");
}

/// The size of a schedule space. One that did not fit a 64-bit count (`overflowed`: the server
/// sends the largest count it holds, past what a JavaScript number keeps exactly) is shown as
/// the lower bound it is: "at least 9.2 × 10^18".
export function spaceSize(n, overflowed) {
  if (!overflowed) return count(n);
  const exponent = Math.floor(Math.log10(Number(n)));
  const mantissa = Math.floor(Number(n) / 10 ** (exponent - 1)) / 10;
  return `at least ${mantissa} × 10^${exponent}`;
}

/// "3 min ago" from an ISO time.
export function age(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso || "";
  const s = Math.max(0, (Date.now() - t) / 1000);
  if (s < 60) return `${Math.floor(s)} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

export function duration(s) {
  if (s === null || s === undefined) return "–";
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

/// A state badge: queued, running, done, failed, cancelled.
export function badge(state) {
  return h(`span.badge.state-${state}`, state);
}

/// A progress bar (role=progressbar) from done of total; total 0 is indeterminate.
export function progressBar(done, total, label) {
  const pct = total > 0 ? Math.min(100, (100 * done) / total) : null;
  const bar = h("div.progress", {
    role: "progressbar",
    "aria-label": label || "progress",
    "aria-valuemin": 0,
    "aria-valuemax": total > 0 ? total : null,
    "aria-valuenow": total > 0 ? done : null,
    title: total > 0 ? `${done} of ${total}` : `${done}`,
  });
  const fillEl = h("div.progress-fill");
  if (pct === null) bar.classList.add("indeterminate");
  else fillEl.style.width = `${pct}%`;
  bar.append(fillEl);
  return bar;
}

/// A message shown where an error happened (role=alert so screen readers announce it).
export function errorBox(err, what) {
  const text = err && err.message ? err.message : String(err);
  return h("div.error-box", { role: "alert", dataset: { status: err && err.status } }, what ? `${what}: ` : "", text);
}

/// A button that copies text, saying so for a moment.
export function copyButton(getText, label = "Copy") {
  const b = h("button.small", { type: "button" }, label);
  b.addEventListener("click", async () => {
    const text = getText();
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // Not a secure context (http on another host): select a hidden textarea and copy.
      const ta = h("textarea", { class: "offscreen" }, text);
      document.body.append(ta);
      ta.select();
      document.execCommand("copy");
      ta.remove();
    }
    b.textContent = "Copied";
    setTimeout(() => (b.textContent = label), 1200);
  });
  return b;
}

/// A button that downloads text as a file.
export function downloadButton(getText, fileName, label = "Download") {
  return h("button.small", {
    type: "button",
    onclick: () => {
      const url = URL.createObjectURL(new Blob([getText()], { type: "text/plain" }));
      const a = h("a", { href: url, download: fileName });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    },
  }, label);
}

/// Shape text "x=4,y=96" from an object {x: 4, y: 96}, and back.
export function shapeText(shape) {
  if (typeof shape === "string") return shape;
  return Object.entries(shape).map(([k, v]) => `${k}=${v}`).join(",");
}

export function parseShape(text) {
  const shape = {};
  for (const part of text.split(/[,\s]+/).filter(Boolean)) {
    const m = /^([A-Za-z_]\w*)\s*[=:]\s*(\d+)$/.exec(part);
    if (!m) throw new Error(`"${part}" is not LABEL=SIZE (as x=1024)`);
    shape[m[1]] = Number(m[2]);
  }
  if (!Object.keys(shape).length) throw new Error("a shape needs at least one LABEL=SIZE");
  return shape;
}

/// Runs `redraw` (which replaces what is inside `container`) and gives the focus back to the
/// element that had it, found again by its id or its data-focus key: a page refreshed while
/// someone works in it with the keyboard must not throw their place away.
export function keepFocus(container, redraw) {
  const active = document.activeElement;
  let selector = null;
  if (active && active !== document.body && container.contains(active)) {
    if (active.id) selector = `#${CSS.escape(active.id)}`;
    else if (active.dataset.focus) selector = `[data-focus="${CSS.escape(active.dataset.focus)}"]`;
  }
  redraw();
  if (selector && !container.contains(document.activeElement)) {
    const again = container.querySelector(selector);
    if (again) again.focus({ preventScroll: true });
  }
}

/// A word as a POSIX shell reads it back unchanged: bare when it is plain, else single-quoted.
export function shellWord(text) {
  const s = String(text);
  return /^[A-Za-z0-9_.,:=\/@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}
