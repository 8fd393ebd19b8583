// Syntax highlighting with highlight.js (Debian's libjs-highlight.js, the global `hljs`), and
// a grammar for Decoupled Triton (docs/language.md) so that DT programs read like code too.
import { h } from "./dom.js";

let registered = false;

function dtLanguage(hljs) {
  return {
    name: "Decoupled Triton",
    aliases: ["dt"],
    keywords: {
      keyword: "Func In SIn Var RVar where and or not",
      built_in: "rsum rmax rmin rdot len reshape program_id block tensorize map fuse_at " +
        "atomic precision num_warps num_stages compile exp log sqrt rsqrt tanh sigmoid pow " +
        "abs max min where erf sin cos",
    },
    contains: [
      hljs.HASH_COMMENT_MODE,
      hljs.C_NUMBER_MODE,
      { className: "variable", begin: /\$[A-Za-z_]\w*/ },
      { className: "symbol", begin: /\b[A-Za-z_]\w*(?=\s*:)/ },
    ],
  };
}

/// A <pre><code> block of `text` highlighted as `language` ("python" or "dt"), with line
/// numbers in a gutter. Without highlight.js the code is shown plain.
export function codeBlock(text, language, label) {
  const code = h(`code.hljs.language-${language}`);
  if (typeof hljs !== "undefined") {
    if (!registered) {
      hljs.registerLanguage("dt", dtLanguage);
      registered = true;
    }
    // highlight.js 9 (Debian's): highlight(languageName, code).
    code.innerHTML = hljs.highlight(language, text, true).value;
    code.dataset.highlighted = "yes";
  } else {
    code.textContent = text;
  }
  const lines = text.endsWith("\n") ? text.split("\n").length - 1 : text.split("\n").length;
  const gutter = h("div.gutter", { "aria-hidden": "true" },
    Array.from({ length: lines }, (_, i) => h("span", String(i + 1))));
  return h("div.code", { role: "region", "aria-label": label || `${language} code`, tabindex: "0" },
    gutter, h("pre", code));
}
