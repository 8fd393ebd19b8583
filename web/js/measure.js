// Times out of the API's measurement objects (server/openapi.json, MeasurementRecord): the
// three ways a kernel is timed, and which measurement ranks a schedule.

/// The times a page can rank by, as [key, label, description].
export const METRICS = [
  ["bench", "do_bench", "median of triton.testing.do_bench (the thesis' protocol)"],
  ["gpu", "GPU only", "median over a CUDA graph of back-to-back launches"],
  ["host", "host", "host cost per call, back to back"],
];

/// {median, lo, hi} in ms for one metric of a measurement, or null when not measured.
export function timeOf(m, metric) {
  if (!m || m.status !== "ok") return null;
  if (metric === "gpu") return m.gpu ? { median: m.gpu.median_ms, lo: m.gpu.q20_ms, hi: m.gpu.q80_ms } : null;
  if (metric === "host") return m.host_us !== undefined ? { median: m.host_us / 1000, lo: null, hi: null } : null;
  // The ranking statistic (the mean over rounds of the rounds' medians), what ranks a schedule;
  // the error mark from the samples' 20th and 80th percentiles.
  const lo = m.bench ? m.bench.q20_ms : null, hi = m.bench ? m.bench.q80_ms : null;
  if (m.time_ms !== undefined && m.time_ms !== null) return { median: m.time_ms, lo, hi };
  return m.bench ? { median: m.bench.median_ms, lo, hi } : null;
}

/// The measurement that ranks a schedule: the full protocol's, else the screening one.
export function rankingMeasurement(s) {
  return s.full || s.screen || null;
}

/// One measurement per baseline name (the full protocol's where there is one).
export function baselinesByName(list) {
  const out = new Map();
  for (const b of list || []) {
    const have = out.get(b.name);
    if (!have || (have.protocol !== "full" && b.measurement.protocol === "full"))
      out.set(b.name, b.measurement);
  }
  return out;
}

/// The metrics measured for at least one of these measurements.
export function metricsPresent(measurements) {
  return METRICS.filter(([key]) => measurements.some((m) => timeOf(m, key)));
}
