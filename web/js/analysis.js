// What the page computes from an exploration's columns (GET /v1/explorations/ID/columns):
// rows with both protocols' times, the time under one protocol and metric, how much each
// template variable explains of the time, the history of the search, failures by reason, and
// the sample of sorted times a chart draws when there are more than it can show.

/// The protocols a time can come from, as [key, label].
export const PROTOCOLS = [["screen", "screening"], ["full", "full protocol"]];

/// One object per schedule, in rank order. `vars[i]` is the index of its value of variable i
/// (null where it does not use it).
export function rowsOf(cols) {
  const n = cols.count;
  const vars = cols.variables || [];
  const pick = (p, i) => {
    const c = cols[p];
    if (c.time_ms[i] === null && c.median_ms[i] === null && c.gpu_ms[i] === null && c.host_us[i] === null) return null;
    return { time: c.time_ms[i], median: c.median_ms[i], q20: c.q20_ms[i], q80: c.q80_ms[i], gpu: c.gpu_ms[i], host: c.host_us[i] };
  };
  const rows = new Array(n);
  for (let i = 0; i < n; i++) {
    const canonical = cols.canonical[i];
    const v = vars.map((x) => x.at[i]);
    rows[i] = {
      i, id: cols.schedule_id[i], rank: cols.rank[i], canonical, index: cols.index[i],
      status: cols.status[i], message: cols.message[i], order: cols.order[i],
      screen: pick("screen", i), full: pick("full", i), vars: v,
      search: null, // searchOf(row, variables): made when a filter first needs it
    };
  }
  return rows;
}

/// The text a filter matches (lower case), made once per row when first asked for.
export function searchOf(row, variables) {
  if (row.search === null) row.search = searchText(row.canonical, variables, row.vars);
  return row.search;
}

// Filters match the canonical text and each variable as `name(value)` and `name=value`, both
// with the full name (`geglu.num_warps`) and the primitive's (`num_warps`): a canonical text
// omits a primitive at its default (num_warps(4)), a variable at that value does not.
function searchText(canonical, vars, v) {
  let text = canonical || "";
  vars.forEach((x, k) => {
    if (v[k] === null || v[k] === undefined) return;
    const value = x.values[v[k]];
    const short = x.name.split(".").slice(1).join(".") || x.name;
    text += ` ${x.name}(${value}) ${x.name}=${value} ${short}(${value}) ${short}=${value}`;
  });
  if (!/num_warps\(/.test(canonical || "")) text += " num_warps(4)";
  if (!/num_stages\(/.test(canonical || "")) text += " num_stages(3)";
  return text.toLowerCase();
}

/// {median, lo, hi} in ms of a row's time under one protocol and metric, or null. The do_bench
/// time is the ranking statistic (the mean over rounds of the rounds' medians, what ranks),
/// its error mark the 20th-80th percentile of the samples.
export function rowTime(row, protocol, metric) {
  const t = row[protocol];
  if (!t) return null;
  if (metric === "gpu") return t.gpu === null ? null : { median: t.gpu, lo: null, hi: null };
  if (metric === "host") return t.host === null ? null : { median: t.host / 1000, lo: null, hi: null };
  const v = t.time ?? t.median;
  return v === null || v === undefined ? null : { median: v, lo: t.q20, hi: t.q80 };
}

/// The metrics measured under a protocol, among METRICS.
export function metricsIn(rows, protocol, metrics) {
  return metrics.filter(([k]) => rows.some((r) => rowTime(r, protocol, k)));
}

/// At most `max` items of a sorted list, evenly spaced by position, the first (the best) and the
/// last always among them; each keeps its position in the list (`at`).
export function sampleSorted(list, max) {
  if (list.length <= max) return list.map((item, at) => ({ item, at }));
  const out = [];
  const step = (list.length - 1) / (max - 1);
  let last = -1;
  for (let k = 0; k < max; k++) {
    const at = Math.round(k * step);
    if (at !== last) out.push({ item: list[at], at });
    last = at;
  }
  return out;
}

/// How much of the variance of log time each variable explains on its own (first-order
/// effects, as fANOVA's main effects over the measured schedules): the variance of the mean
/// log time per value, weighted by how many schedules take the value, divided by the total
/// variance. Sorted, largest first. `times[i]` is the time of rows[i] (null: left out).
export function importance(rows, times, variables) {
  const ys = [];
  const idx = [];
  rows.forEach((r, i) => {
    if (times[i] > 0) { ys.push(Math.log(times[i])); idx.push(i); }
  });
  if (ys.length < 2) return [];
  const mean = ys.reduce((a, b) => a + b, 0) / ys.length;
  const total = ys.reduce((a, y) => a + (y - mean) ** 2, 0) / ys.length;
  return variables.map((v, k) => {
    const sums = new Map();
    idx.forEach((i, j) => {
      const key = rows[i].vars[k] ?? -1; // not used: a level of its own
      const s = sums.get(key) || { n: 0, sum: 0 };
      s.n++; s.sum += ys[j];
      sums.set(key, s);
    });
    let between = 0;
    for (const s of sums.values()) between += s.n * (s.sum / s.n - mean) ** 2;
    between /= ys.length;
    return { name: v.name, k, share: total > 0 ? between / total : 0, levels: sums.size };
  }).sort((a, b) => b.share - a.share);
}

/// Time and best-so-far in measurement order: [{order, ms, best, row}], the rows with a time.
export function historyOf(rows, times) {
  const list = [];
  rows.forEach((r, i) => { if (times[i] !== null && r.order !== null) list.push({ row: r, ms: times[i], order: r.order }); });
  list.sort((a, b) => a.order - b.order);
  let best = Infinity;
  return list.map((e, n) => {
    best = Math.min(best, e.ms);
    return { n: n + 1, ms: e.ms, best, row: e.row };
  });
}

/// Failed schedules grouped by reason: the status and the message's first line with its numbers
/// replaced by N (one reason for "needs 131072 bytes" and "needs 262144 bytes"), largest first.
export function failureGroups(rows) {
  const groups = new Map();
  for (const r of rows) {
    if (r.status === "ok" || r.status === "unmeasured") continue;
    const first = (r.message || "").split("\n").find((l) => l.trim()) || "";
    const reason = first.replace(/\d+(\.\d+)?/g, "N").trim().slice(0, 200);
    const key = `${r.status}\u0000${reason}`;
    if (!groups.has(key)) groups.set(key, { status: r.status, reason, rows: [] });
    groups.get(key).rows.push(r);
  }
  return [...groups.values()].sort((a, b) => b.rows.length - a.rows.length || a.status.localeCompare(b.status));
}

const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];

/// A colour per value index of a variable (grey for "not used").
export function valueColor(k) {
  return k === null || k === undefined ? "#9aa3ad" : PALETTE[k % PALETTE.length];
}

/// Values of a variable in numeric order when they are all numbers, else as first seen.
export function valueOrder(variable) {
  const vals = variable.values.map((v, k) => ({ v, k }));
  if (vals.every(({ v }) => /^-?\d+(\.\d+)?$/.test(v))) vals.sort((a, b) => Number(a.v) - Number(b.v));
  return vals.map(({ k }) => k);
}
