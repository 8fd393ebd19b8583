// A line diff (longest common subsequence), for comparing two generated modules.

/// The edit script from lines `a` to lines `b`: [{op: " " | "-" | "+", a, b, text}], where a
/// and b are 1-based line numbers (null on the side a line is not on).
export function diffLines(a, b) {
  // Trim the common head and tail: generated modules mostly differ in a few places.
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head &&
         a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const A = a.slice(head, a.length - tail), B = b.slice(head, b.length - tail);
  const n = A.length, m = B.length;
  if (n * m > 25e6) throw new Error(`the modules are too different to diff (${n} by ${m} lines)`);
  // lcs[i][j]: the LCS length of A[i..] and B[j..], in one flat array.
  const w = m + 1;
  const lcs = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      lcs[i * w + j] = A[i] === B[j] ? lcs[(i + 1) * w + j + 1] + 1
                                     : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
  const out = [];
  for (let k = 0; k < head; k++) out.push({ op: " ", a: k + 1, b: k + 1, text: a[k] });
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && A[i] === B[j]) {
      out.push({ op: " ", a: head + i + 1, b: head + j + 1, text: A[i] });
      i++; j++;
    } else if (j < m && (i === n || lcs[i * w + j + 1] >= lcs[(i + 1) * w + j])) {
      out.push({ op: "+", a: null, b: head + j + 1, text: B[j] });
      j++;
    } else {
      out.push({ op: "-", a: head + i + 1, b: null, text: A[i] });
      i++;
    }
  }
  for (let k = 0; k < tail; k++)
    out.push({ op: " ", a: a.length - tail + k + 1, b: b.length - tail + k + 1, text: a[a.length - tail + k] });
  return out;
}

/// Groups an edit script into hunks with `context` unchanged lines around each change;
/// unchanged stretches between hunks become {skipped: N}.
export function hunks(script, context = 3) {
  const keep = new Uint8Array(script.length);
  script.forEach((e, k) => {
    if (e.op === " ") return;
    for (let d = Math.max(0, k - context); d <= Math.min(script.length - 1, k + context); d++) keep[d] = 1;
  });
  const out = [];
  let skipped = 0;
  script.forEach((e, k) => {
    if (keep[k]) {
      if (skipped) out.push({ skipped });
      skipped = 0;
      out.push(e);
    } else {
      skipped++;
    }
  });
  if (skipped) out.push({ skipped });
  return out;
}
