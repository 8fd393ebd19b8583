// The page's router: URLs that can be shared (/explorations/12, /schedules/34,
// /compare/34/56, /new), each rendered by one view of views/; links inside the page navigate
// without a reload.
import { h, fill, errorBox } from "./dom.js";
import { setToken, token } from "./api.js";
import * as explorations from "./views/explorations.js";
import * as exploration from "./views/exploration.js";
import * as schedule from "./views/schedule.js";
import * as compare from "./views/compare.js";
import * as create from "./views/new.js";

const ROUTES = [
  [/^\/(?:explorations)?\/?$/, explorations, "explorations", () => ({})],
  [/^\/explorations\/([\d,]+)\/?$/, exploration, "explorations", (m) => ({ ids: m[1].split(",").filter(Boolean).map(Number) })],
  [/^\/schedules\/(\d+)\/?$/, schedule, "explorations", (m) => ({ id: Number(m[1]) })],
  [/^\/compare\/(\d+)\/(\d+)\/?$/, compare, "explorations", (m) => ({ a: Number(m[1]), b: Number(m[2]) })],
  [/^\/new\/?$/, create, "new", () => ({})],
];

const view = document.getElementById("view");
let cleanup = null;
let generation = 0;

export function navigate(url, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  render();
}

async function render() {
  const gen = ++generation;
  if (cleanup) {
    try { cleanup(); } catch { /* a view's cleanup never stops navigation */ }
    cleanup = null;
  }
  if (/^\/web\/?(index\.html)?$/.test(location.pathname)) {
    history.replaceState(null, "", "/"); // the page's own file, opened directly: its home
  }
  const path = location.pathname;
  const query = new URLSearchParams(location.search);
  for (const [re, module, nav, params] of ROUTES) {
    const m = re.exec(path);
    if (!m) continue;
    for (const a of document.querySelectorAll("[data-nav]"))
      a.toggleAttribute("aria-current", a.dataset.nav === nav);
    // Each render draws into a container of its own: a view still loading when the user moves
    // on writes into a container no longer on the page, never over the next view.
    const root = h("div.view-root", h("p.muted", "Loading…"));
    fill(view, root);
    try {
      const done = await module.render(root, params(m), query, { navigate, isCurrent: () => gen === generation });
      if (gen === generation) cleanup = done || null;
      else if (done) done();
    } catch (e) {
      if (gen === generation) {
        document.title = "Error · dtx";
        fill(root, errorBox(e, "This page could not be shown"));
      }
    }
    return;
  }
  document.title = "Not found · dtx";
  fill(view, h("h1", "Not found"), h("p", "No page at ", h("code", path), ". ", h("a", { href: "/explorations" }, "See the explorations"), "."));
}

// Links inside the page: no reload, unless a modifier asks for a new tab.
document.addEventListener("click", (e) => {
  const a = e.target.closest("a[href]");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || a.target || a.hasAttribute("download")) return;
  if (url.pathname.startsWith("/v1/") || url.pathname.startsWith("/web/") || url.pathname === "/metrics") return;
  e.preventDefault();
  if (url.pathname === location.pathname && url.search === location.search && url.hash) {
    location.hash = url.hash;
    return;
  }
  navigate(url.pathname + url.search + url.hash);
  view.focus({ preventScroll: true });
  window.scrollTo(0, 0);
});
window.addEventListener("popstate", render);

// The token, for a server started with --token.
const tokenForm = document.getElementById("token-form");
const tokenInput = document.getElementById("token-input");
const tokenMessage = document.getElementById("token-message");
document.getElementById("token-button").addEventListener("click", () => {
  tokenForm.hidden = !tokenForm.hidden;
  if (!tokenForm.hidden) tokenInput.focus();
});
tokenForm.addEventListener("submit", (e) => {
  e.preventDefault();
  setToken(tokenInput.value.trim());
  tokenInput.value = "";
  tokenMessage.textContent = token() ? "Saved in this browser." : "";
  // A view that could not load for want of the token loads again; any other keeps what was
  // typed into it (submit again).
  const failed = [...view.querySelectorAll('.error-box[data-status="401"]')]
    .filter((box) => !box.closest("#submit-error")); // a form's own error keeps the form
  if (failed.length) render();
  else tokenForm.hidden = true;
});
document.getElementById("token-clear").addEventListener("click", () => {
  setToken("");
  tokenMessage.textContent = "Forgotten.";
});
window.addEventListener("dtx-unauthorized", () => {
  tokenForm.hidden = false;
  tokenMessage.textContent = "This server needs a token for that: enter it here.";
});

render();
