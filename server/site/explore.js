// asof explorer (/explore): a filer's records on a time axis, each with its three clocks, and
// the API's answer for the cut the slider names. Plain JavaScript, same-origin requests only,
// no third-party code. The as-of rule is never applied here: which records are knowable is
// whatever the API answered for that exact cut; the page only draws it.
"use strict";

const CLOCKS = ["published_at", "available_at", "committed_at"];
const DAY = 86400000;
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const SVG = "http://www.w3.org/2000/svg";
const ROW = 18; // px per record row
const TOP = 28; // px above the first row: the axis labels
const CACHE_MAX = 400;

const $ = (id) => document.getElementById(id);

// ---- instants -----------------------------------------------------------------------------

function parseInstant(s) {
  if (typeof s !== "string" || !INSTANT.test(s)) return NaN;
  // Date.parse keeps milliseconds; the API's microseconds are cut to them (a stretch's end,
  // 23:59:59.999999Z, becomes .999, still inside it).
  return Date.parse(s.replace(/(\.\d{3})\d+Z$/, "$1Z"));
}

function fmt(ms) {
  return new Date(ms).toISOString().replace(/\.000Z$/, "Z");
}

function fmtShort(v) {
  return v ? v.replace("T", " ").replace(/(\.\d+)?Z$/, "Z") : "—";
}

function whyInvalid(s) {
  if (/^\d{4}-\d{2}-\d{2}$/.test(s)) return "That is a date, not an instant: add a time, e.g. T12:00:00Z.";
  if (/[+-]\d{2}:?\d{2}$/.test(s)) return "Give the instant in UTC with a literal Z, not an offset.";
  return "Write an instant as YYYY-MM-DDTHH:MM:SSZ (UTC).";
}

// ---- state --------------------------------------------------------------------------------

const S = {
  mode: "sample", // or "account"
  example: null, // sample company id
  source: "sec.edgar",
  filer: "", // ticker or CIK (account mode)
  lane: "certified_pit",
  clock: "published_at",
  asOf: NaN,
  asOfStart: NaN, // NaN: no diff
  domain: [0, 1],
  step: 3600000,
};

let meta = null; // results[0] of /v1/meta
let me = null; // results[0] of /v1/me when signed in
const universe = new Map(); // revision_id -> record, every revision the page has seen
let chartRows = []; // [{rec, y}] in drawing order
const answers = new Map(); // request URL -> {status, json, retryAfter}
let blockedUntil = 0; // a 429's Retry-After, as a time
let lastCut = null;
let lastDiff = null;
let inflight = false;
let pending = false;
let stepStarted = 0;
let firstRendered = false;

// ---- requests -----------------------------------------------------------------------------

// Requests the page sends at most every MIN_GAP ms (answers it holds cost nothing): a slider
// dragged across the axis asks a few cuts a second, within the public sample's per-address
// allowance for a while, rather than one per pixel.
const MIN_GAP = 100;
let lastSent = 0;

async function ask(url) {
  const hit = answers.get(url);
  if (hit) return hit;
  if (Date.now() < blockedUntil) return { status: 429, json: null, retryAfter: Math.ceil((blockedUntil - Date.now()) / 1000) };
  const res = await fetch(url, { headers: { accept: "application/json" }, credentials: "same-origin" });
  let json = null;
  try { json = await res.json(); } catch (_) { /* not JSON */ }
  const answer = { status: res.status, json, retryAfter: Number(res.headers.get("retry-after")) || 0 };
  if (res.status === 429) {
    blockedUntil = Date.now() + Math.max(1, answer.retryAfter) * 1000;
    setTimeout(() => schedule(), Math.max(1, answer.retryAfter) * 1000 + 50);
  } else if (res.status === 200 || res.status === 409) {
    // A cut on one corpus version never changes; the page forgets the oldest past a bound.
    if (answers.size >= CACHE_MAX) answers.delete(answers.keys().next().value);
    answers.set(url, answer);
  }
  return answer;
}

function filerParams() {
  if (S.mode === "sample") return { example: S.example };
  const p = {};
  const f = S.filer.trim();
  if (S.source === "sec.edgar" && f) {
    if (/^\d+$/.test(f)) p.cik = f;
    else p.ticker = f.toUpperCase();
  }
  if (S.source !== "sec.edgar") p.source = S.source;
  if (S.lane !== "certified_pit") p.lane = S.lane;
  return p;
}

// A query string, instants left readable (a colon needs no escaping in a query).
function query(params) {
  return Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== null && v !== "")
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v).replace(/%3A/gi, ":")}`)
    .join("&");
}

function cutParams(asOf, clock) {
  const p = filerParams();
  p.as_of = fmt(asOf);
  if (clock !== "published_at") p.visible_by = clock;
  if (S.mode === "account") p.limit = 1000;
  return p;
}

function cutUrl(asOf = S.asOf, clock = S.clock) {
  const base = S.mode === "sample" ? "/v1/sample/news" : "/v1/news";
  return `${base}?${query(cutParams(asOf, clock))}`;
}

function diffParams() {
  const p = filerParams();
  p.as_of_start = fmt(S.asOfStart);
  p.as_of_end = fmt(S.asOf);
  if (S.clock !== "published_at") p.visible_by = S.clock;
  if (S.mode === "account") p.limit = 1000;
  return p;
}

function diffUrl() {
  const base = S.mode === "sample" ? "/v1/sample/diff" : "/v1/news/diff";
  return `${base}?${query(diffParams())}`;
}

// ---- where the question answers (from /v1/meta) -------------------------------------------

function laneInfo() {
  if (!meta) return null;
  if (S.mode === "sample") return meta.sample;
  const src = meta.corpus.sources.find((s) => s.source_id === S.source);
  return src ? src.lanes.find((l) => l.lane === S.lane) || null : null;
}

function stretches(clock = S.clock) {
  const info = laneInfo();
  if (!info || !info.answerable) return [];
  return (info.answerable[clock] || []).map((s) => [parseInstant(s.from), parseInstant(s.to)]);
}

function answerableAt(ms, clock = S.clock) {
  return stretches(clock).some(([a, b]) => a <= ms && ms <= b);
}

// The axis: every stretch any clock answers on this lane and every clock of the records,
// a day of margin on each side, at most 400 days (beyond, marks sit at the edge).
function computeDomain() {
  let lo = Infinity;
  let hi = -Infinity;
  for (const c of CLOCKS) for (const [a, b] of stretches(c)) { lo = Math.min(lo, a); hi = Math.max(hi, b); }
  const core = [lo, hi];
  for (const r of universe.values()) {
    for (const c of CLOCKS) {
      const t = parseInstant(r[c]);
      if (!Number.isNaN(t)) { lo = Math.min(lo, t); hi = Math.max(hi, t); }
    }
  }
  if (!Number.isFinite(lo)) {
    const last = meta && meta.sample && meta.sample.last_day;
    hi = last ? Date.parse(`${last}T23:59:59Z`) : Date.now();
    lo = hi - 30 * DAY;
  }
  if (hi - lo > 400 * DAY) {
    if (Number.isFinite(core[0])) { lo = Math.max(lo, core[0]); hi = Math.min(hi, Math.max(core[1], lo + 400 * DAY)); }
    if (hi - lo > 400 * DAY) lo = hi - 400 * DAY;
  }
  for (const t of [S.asOf, S.asOfStart]) if (Number.isFinite(t)) { lo = Math.min(lo, t); hi = Math.max(hi, t); }
  lo = Math.floor(lo / DAY) * DAY - DAY;
  hi = Math.ceil((hi + 1) / DAY) * DAY + DAY - 1000;
  S.domain = [lo, hi];
  S.step = hi - lo <= 120 * DAY ? 3600000 : DAY;
}

// The instant the page opens on when the link names none: the middle of the last stretch
// the chosen clock answers, to the hour (some records knowable, some not yet).
function defaultAsOf() {
  const st = stretches();
  if (st.length) {
    const [a, b] = st[st.length - 1];
    return Math.floor((a + (b - a) / 2) / 3600000) * 3600000;
  }
  return Math.floor((S.domain[0] + (S.domain[1] - S.domain[0]) / 2) / 3600000) * 3600000;
}

// ---- the records (the universe) -----------------------------------------------------------

function learn(rows) {
  let added = false;
  for (const r of rows || []) {
    if (!universe.has(r.revision_id)) { universe.set(r.revision_id, r); added = true; }
  }
  return added;
}

// Every record of the question, whether knowable at the cut or not: the cut at the end of
// what publication answers (each record's latest revision). Revisions a correction replaced
// join the picture when an answer holds them (a committed_at cut replays them); corrections
// are then drawn over them.
async function loadUniverse() {
  universe.clear();
  // Only cuts /v1/meta says answer are asked: the rest would be holes, known beforehand.
  const pub = stretches("published_at");
  if (pub.length) {
    const end = Math.floor(pub[pub.length - 1][1] / 1000) * 1000;
    const all = S.mode === "sample"
      ? await ask(`/v1/sample/news?${query({ example: S.example })}`)
      : await ask(cutUrl(end, "published_at"));
    if (all.status === 200) learn(all.json.results);
  }
  if (S.mode === "account") await learnReplaced();
}

// The revisions the corrections nearest the cut replaced, so each correction is drawn over
// what it corrected: the record route on committed_at, a second before the correction was
// committed, answers the revision in force then (a single record needs no coverage). At most
// REPLACED_ASKED lookups a load, within any plan's minute.
const REPLACED_ASKED = 4;

async function learnReplaced() {
  const near = (r) => Math.abs(parseInstant(r.published_at) - (Number.isFinite(S.asOf) ? S.asOf : 0));
  const corrections = [...universe.values()]
    .filter((r) => r.supersedes && !universe.has(r.supersedes) && r.committed_at)
    .sort((a, b) => near(a) - near(b))
    .slice(0, REPLACED_ASKED);
  for (const r of corrections) {
    const before = fmt(Math.floor(parseInstant(r.committed_at) / 1000) * 1000 - 1000);
    const a = await ask(`/v1/news/${encodeURIComponent(r.id)}?${query({ as_of: before, visible_by: "committed_at" })}`);
    if (a.status === 200) learn(a.json.results.filter((x) => x.revision_id === r.supersedes));
  }
}

// ---- drawing ------------------------------------------------------------------------------

function el(tag, attrs = {}, parent = null) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.append(e);
  return e;
}

let svg = null;
let width = 800;
const X0 = 8; // left margin

function x(ms) {
  const [lo, hi] = S.domain;
  const clamped = Math.min(hi, Math.max(lo, ms));
  return X0 + ((clamped - lo) / (hi - lo)) * (width - 2 * X0);
}

// Records every clock of which lies before the axis are knowable (or not, on a null clock)
// throughout it: they are drawn as thin rows in one block at the top, so the records that
// change on the axis keep the room.
const THIN = 3;

function earlier(r) {
  const ts = CLOCKS.map((c) => parseInstant(r[c])).filter((t) => !Number.isNaN(t));
  return ts.length > 0 && ts.every((t) => t < S.domain[0]);
}

function order() {
  // Corrections sit on the row of the revision they replace; the rest by publication.
  const recs = [...universe.values()];
  const byRev = new Map(recs.map((r) => [r.revision_id, r]));
  const base = recs.filter((r) => !(r.supersedes && byRev.has(r.supersedes)));
  base.sort((a, b) => (a.published_at || "").localeCompare(b.published_at || "") || a.id.localeCompare(b.id));
  const rows = [];
  let y = TOP;
  const thin = base.filter(earlier);
  for (const r of thin) { rows.push({ rec: r, y: y + THIN / 2, thin: true }); y += THIN; }
  const block = thin.length ? { from: TOP, to: y, n: thin.length } : null;
  if (thin.length) y += 14;
  for (const r of base.filter((r) => !earlier(r))) { rows.push({ rec: r, y: y + ROW / 2 }); y += ROW; }
  for (const r of recs) {
    if (r.supersedes && byRev.has(r.supersedes)) {
      const under = rows.find((row) => row.rec.revision_id === r.supersedes);
      rows.push({ rec: r, y: under ? under.y - (under.thin ? 0 : 6) : TOP, correction: true, thin: under && under.thin, under });
    }
  }
  return { rows, height: Math.max(y, TOP + ROW) + 24, block };
}

function mark(g, clock, t, y, onClock) {
  const cx = x(t);
  const size = onClock ? 6 : 4.5;
  const cls = `mark ${clock.split("_")[0]}${onClock ? " on-clock" : ""}${t < S.domain[0] || t > S.domain[1] ? " beyond" : ""}`;
  if (clock === "published_at") el("circle", { cx, cy: y, r: size, class: cls }, g);
  else if (clock === "available_at") el("path", { d: `M${cx} ${y - size - 1}L${cx + size + 1} ${y}L${cx} ${y + size + 1}L${cx - size - 1} ${y}Z`, class: cls }, g);
  else el("rect", { x: cx - size, y: y - size, width: 2 * size, height: 2 * size, class: cls }, g);
}

function recordTitle(r) {
  const parts = [`${r.form || r.source_id} ${r.id}`];
  if (r.supersedes) {
    parts.push(universe.has(r.supersedes)
      ? `a correction, drawn over the revision it replaced (${r.supersedes})`
      : `a correction of revision ${r.supersedes}, which no answer to this question holds (on published_at and available_at a cut sees a record's latest revision; only committed_at replays the ones it replaced)`);
  }
  for (const c of CLOCKS) parts.push(`${c}: ${fmtShort(r[c])}`);
  if (!r[S.clock]) parts.push(`no ${S.clock}: never visible on this clock`);
  return parts.join("\n");
}

function drawChart() {
  const box = $("chart");
  width = Math.max(320, Math.round(box.clientWidth || 800));
  const { rows, height, block } = order();
  chartRows = rows;
  svg = el("svg", { width: "100%", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": "chart-title chart-desc", class: "timeline" });
  const title = el("title", { id: "chart-title" }, svg);
  title.textContent = "Timeline of the records and their clocks";
  el("desc", { id: "chart-desc" }, svg).textContent = "";
  const defs = el("defs", {}, svg);
  for (const [id, cls] of [["hatch-hole", "hatch hole-hatch"], ["hatch-unanswerable", "hatch unanswerable-hatch"]]) {
    const p = el("pattern", { id, width: 8, height: 8, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" }, defs);
    el("rect", { width: 8, height: 8, class: `${cls}-bg` }, p);
    el("line", { x1: 0, y1: 0, x2: 0, y2: 8, class: cls }, p);
  }
  // Stretches the chosen clock does not answer: hatched, under everything.
  const gaps = el("g", { class: "unanswerable-layer" }, svg);
  let from = S.domain[0];
  for (const [a, b] of [...stretches(), [S.domain[1] + 1, S.domain[1] + 1]]) {
    if (a > from) {
      const r = el("rect", { x: x(from), y: TOP - 6, width: Math.max(0, x(Math.min(a, S.domain[1])) - x(from)), height: height - TOP, class: "unanswerable", fill: "url(#hatch-unanswerable)", "data-unanswerable": `${fmt(from)}..${fmt(Math.min(a, S.domain[1]))}` }, gaps);
      el("title", {}, r).textContent = `No ${S.clock} cut answers from ${fmtShort(fmt(from))} to ${fmtShort(fmt(Math.min(a, S.domain[1])))} for this lane: a cut there is a coverage hole (409).`;
    }
    from = Math.max(from, b + 1);
  }
  // Day ticks.
  const axis = el("g", { class: "axis" }, svg);
  const days = (S.domain[1] - S.domain[0]) / DAY;
  const every = Math.max(1, Math.ceil(days / Math.max(2, Math.floor(width / 90))));
  let n = 0;
  for (let t = Math.ceil(S.domain[0] / DAY) * DAY; t <= S.domain[1]; t += DAY, n++) {
    el("line", { x1: x(t), x2: x(t), y1: TOP - 8, y2: height - 18, class: n % every ? "tick minor" : "tick" }, axis);
    if (n % every === 0) {
      const label = el("text", { x: x(t) + 2, y: TOP - 12, class: "tick-label" }, axis);
      label.textContent = new Date(t).toISOString().slice(0, 10);
    }
  }
  el("g", { id: "diff-layer" }, svg);
  el("g", { id: "hole-layer" }, svg);
  const recs = el("g", { class: "records" }, svg);
  if (block) {
    const label = el("text", { x: X0 + 14, y: block.to + 11, class: "tick-label" }, axis);
    label.textContent = `▲ ${block.n} earlier record${block.n === 1 ? "" : "s"}: every clock before this axis`;
  }
  for (const row of rows) {
    const r = row.rec;
    const g = el("g", { class: `rec${r.supersedes ? " correction" : ""}${row.thin ? " thin" : ""}`, "data-id": r.id, "data-revision": r.revision_id }, recs);
    if (r.supersedes) g.setAttribute("data-supersedes", r.supersedes);
    if (row.thin) {
      el("rect", { x: X0, y: row.y - THIN / 2, width: 10, height: THIN - 0.5, class: "thin-bar" }, g);
      el("title", {}, g).textContent = recordTitle(r);
      continue;
    }
    const ts = CLOCKS.map((c) => parseInstant(r[c])).filter((t) => !Number.isNaN(t));
    if (ts.length > 1) el("line", { x1: x(Math.min(...ts)), x2: x(Math.max(...ts)), y1: row.y, y2: row.y, class: "gap" }, g);
    // A correction drawn over the revision it replaced: its publication joined to theirs.
    if (row.under && !row.under.thin) {
      const was = parseInstant(row.under.rec.published_at);
      const now = parseInstant(r.published_at);
      if (!Number.isNaN(was) && !Number.isNaN(now)) el("path", { d: `M${x(was)} ${row.under.y}L${x(now)} ${row.y}`, class: "correction-link" }, g);
    }
    for (const c of CLOCKS) {
      const t = parseInstant(r[c]);
      if (!Number.isNaN(t)) mark(g, c, t, row.y, c === S.clock);
    }
    // The form beside the marks, where there is room.
    if (ts.length) {
      const right = x(Math.max(...ts)) + 12;
      const left = x(Math.min(...ts)) - 12;
      const label = right + 60 < width
        ? el("text", { x: right, y: row.y + 4, class: "rec-label" }, g)
        : el("text", { x: left, y: row.y + 4, class: "rec-label", "text-anchor": "end" }, g);
      label.textContent = r.form || r.source_id;
    }
    if (!r[S.clock]) g.classList.add("never");
    el("title", {}, g).textContent = recordTitle(r);
  }
  el("line", { id: "start-line", class: "cursor start", y1: TOP - 8, y2: height - 18, x1: 0, x2: 0, visibility: "hidden" }, svg);
  el("line", { id: "as-of-line", class: "cursor", y1: TOP - 8, y2: height - 18, x1: 0, x2: 0 }, svg);
  box.replaceChildren(svg);
  svg.dataset.height = String(height);
  drawCursor();
}

function drawCursor() {
  if (!svg) return;
  const line = svg.querySelector("#as-of-line");
  line.setAttribute("x1", x(S.asOf));
  line.setAttribute("x2", x(S.asOf));
  const start = svg.querySelector("#start-line");
  const on = Number.isFinite(S.asOfStart);
  start.setAttribute("visibility", on ? "visible" : "hidden");
  if (on) { start.setAttribute("x1", x(S.asOfStart)); start.setAttribute("x2", x(S.asOfStart)); }
}

// The hole band: the days (or the ticker's day) the answer's coverage.missing names.
function missingSpan(keys, total) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const k of keys) {
    const m = k.match(/(\d{4}-\d{2}-\d{2})(?:\.\.(\d{4}-\d{2}-\d{2}))?$/) || k.match(/@(\d{4}-\d{2}-\d{2})$/);
    if (!m) continue;
    const a = Date.parse(`${m[1]}T00:00:00Z`);
    const b = Date.parse(`${m[2] || m[1]}T00:00:00Z`) + DAY - 1;
    lo = Math.min(lo, a);
    hi = Math.max(hi, b);
  }
  if (!Number.isFinite(lo)) { lo = Math.floor(S.asOf / DAY) * DAY; hi = lo + DAY - 1; }
  // Only the first keys are listed: the hole runs on to the cut's own day.
  if (total > keys.length) hi = Math.max(hi, Math.floor(S.asOf / DAY) * DAY + DAY - 1);
  return [lo, hi];
}

function holeSentence(keys, total) {
  const identity = keys.filter((k) => k.startsWith("identity."));
  const availability = keys.filter((k) => k.startsWith("availability."));
  const days = keys.filter((k) => !k.startsWith("identity.") && !k.startsWith("availability."));
  const why = [];
  if (identity.length) {
    const [, ticker, day] = identity[0].match(/identity\.ticker\/(.+)@(.+)$/) || [null, "the ticker", "that day"];
    why.push(`no point-in-time identity interval places ${ticker} on ${day}, so which filer it named then is unknown (a ticker is never resolved from today's ticker file)`);
  }
  if (availability.length) why.push(`${availability.length === 1 ? "a day" : `${availability.length} days`} this cut needs ${availability.length === 1 ? "has" : "have"} rows without available_at (this lane records when the agency published, not when a reader could first fetch it), so on this clock the answer is unknown`);
  if (days.length) why.push(`${days.length === 1 ? "a source-day" : `${days.length} source-days`} this cut depends on ${days.length === 1 ? "is" : "are"} not certified complete in this corpus (a day missing from the sample, a hole inside the span, a day past its end, or on committed_at a day certified only later)`);
  const more = total > keys.length ? ` (${total} keys in all; the first ${keys.length} are listed)` : "";
  return `No answer (409, count null): ${why.join("; and ")}.${more} That is not zero filings: zero would be a complete cut with no rows (200, count 0). The service refuses to guess.`;
}

// ---- applying an answer -------------------------------------------------------------------

function td(text) {
  const c = document.createElement("td");
  c.textContent = text == null || text === "" ? "—" : String(text);
  return c;
}

function apply(cut, diff) {
  lastCut = cut;
  lastDiff = diff;
  const ok = cut.status === 200;
  const results = ok ? cut.json.results : [];
  if (ok && learn(results)) { computeDomain(); configureRange(); drawChart(); }
  if (diff && diff.status === 200 && learn(diff.json.results)) { computeDomain(); configureRange(); drawChart(); }
  const knowable = new Set(results.map((r) => r.revision_id));
  const became = new Set(diff && diff.status === 200 ? diff.json.results.map((r) => r.revision_id) : []);
  // A revision a known correction replaced: on published_at and available_at a cut sees only
  // latest revisions, so it is replaced whatever the instant; on committed_at, once the
  // correction is in the answer.
  const replacedBy = new Map();
  for (const r of universe.values()) {
    if (r.supersedes && (S.clock !== "committed_at" || knowable.has(r.revision_id))) replacedBy.set(r.supersedes, r.id);
  }
  for (const g of svg.querySelectorAll(".rec")) {
    const rev = g.dataset.revision;
    const k = knowable.has(rev);
    g.classList.toggle("knowable", k);
    g.classList.toggle("pending", ok && !k && !replacedBy.has(rev));
    g.classList.toggle("replaced", ok && replacedBy.has(rev));
    g.classList.toggle("unknown", !ok);
    g.classList.toggle("became", became.has(rev));
    if (k) g.setAttribute("data-knowable", "true"); else g.removeAttribute("data-knowable");
  }
  // The diff window.
  const dl = svg.querySelector("#diff-layer");
  dl.replaceChildren();
  if (Number.isFinite(S.asOfStart) && S.asOfStart < S.asOf) {
    el("rect", { x: x(S.asOfStart), y: TOP - 8, width: Math.max(1, x(S.asOf) - x(S.asOfStart)), height: Number(svg.dataset.height) - TOP - 10, class: "diff-window" }, dl);
  }
  // The hole band, exactly when the API answered 409 coverage_missing.
  const hl = svg.querySelector("#hole-layer");
  hl.replaceChildren();
  const hole = [cut, diff].find((a) => a && a.status === 409 && a.json && a.json.status === "coverage_missing");
  const detail = $("hole-detail");
  if (hole) {
    const keys = hole.json.coverage.missing;
    const total = hole.json.coverage.missing_total || keys.length;
    const [a, b] = missingSpan(keys, total);
    const band = el("rect", { x: x(a), y: TOP - 8, width: Math.max(4, x(b) - x(a)), height: Number(svg.dataset.height) - TOP - 10, class: "hole", fill: "url(#hatch-hole)", tabindex: "0", role: "button", "aria-label": `Coverage hole: ${keys.join(", ")}`, "data-missing": keys.join(" ") }, hl);
    const sentence = holeSentence(keys, total);
    el("title", {}, band).textContent = `${keys.join("\n")}\n\n${sentence}`;
    const show = () => { detail.hidden = false; };
    band.addEventListener("focus", show);
    band.addEventListener("mouseenter", show);
    band.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); detail.hidden = false; detail.focus(); } });
    $("hole-sentence").textContent = sentence;
    $("hole-keys").textContent = keys.join(" ");
    detail.hidden = false;
  } else {
    detail.hidden = true;
  }
  drawCursor();
  renderList(cut, results, became, replacedBy);
  renderStatus(cut, diff, results.length, became.size);
  renderSnippets(cut);
  svg.querySelector("#chart-desc").textContent = $("status").textContent;
}

function renderList(cut, results, became, replacedBy) {
  const rows = $("rows");
  rows.replaceChildren();
  if (cut.status !== 200) {
    const tr = document.createElement("tr");
    const c = td(cut.status === 409 ? "No rows: the cut is a coverage hole (see above), not an empty answer." : answerProblem(cut));
    c.colSpan = 6;
    tr.append(c);
    rows.append(tr);
  } else if (!results.length) {
    const tr = document.createElement("tr");
    const c = td("No rows: a complete answer with nothing knowable yet (200, count 0).");
    c.colSpan = 6;
    tr.append(c);
    rows.append(tr);
  }
  for (const r of results) {
    const tr = document.createElement("tr");
    tr.dataset.id = r.id;
    tr.dataset.revision = r.revision_id;
    if (became.has(r.revision_id)) tr.dataset.became = "true";
    const notes = [];
    if (became.has(r.revision_id)) notes.push("new since as_of_start");
    if (r.supersedes) notes.push(`corrects ${r.supersedes}`);
    tr.append(td(r.id), td(r.form), td(fmtShort(r.published_at)), td(fmtShort(r.available_at)), td(fmtShort(r.committed_at)), td(notes.join("; ")));
    rows.append(tr);
  }
  const m = $("answer-meta");
  m.replaceChildren();
  if (cut.json && cut.json.corpus_version !== undefined) {
    const cv = document.createElement("code");
    cv.textContent = cut.json.corpus_version;
    const rid = document.createElement("code");
    rid.textContent = cut.json.request_id;
    m.append(`${cut.status} ${cut.json.status}, count ${cut.json.count === null ? "null" : cut.json.count}, from corpus_version `, cv, ", request_id ", rid);
    if (cut.json.next_cursor) m.append(" (more rows follow: the list shows the first page)");
  }
}

function answerProblem(a) {
  if (a.status === 429) return `The ${S.mode === "sample" ? "public sample allows " + (meta ? meta.limits.public_requests_per_minute_per_address : "a few") + " requests a minute from one address" : "plan's limit is reached"}: the view catches up in ${a.retryAfter || 1} s.${S.mode === "sample" ? " Sign in for your plan's limit." : ""}`;
  if (a.json && a.json.error) return `${a.status}: ${a.json.error.message}`;
  return `The service answered ${a.status}.`;
}

function renderStatus(cut, diff, n, nBecame) {
  const s = $("status");
  const at = fmtShort(fmt(S.asOf));
  const who = S.mode === "sample" ? (meta.sample.examples.find((e) => e.id === S.example) || {}).name || S.example : (S.filer || S.source);
  s.className = "notice";
  if (cut.status === 200) {
    const total = svg.querySelectorAll(".rec").length;
    let text = `${n} of ${total} records of ${who} knowable at ${at} on ${S.clock}; ${total - n} not yet.`;
    if (diff && diff.status === 200) text += ` ${nBecame} became knowable after ${fmtShort(fmt(S.asOfStart))}.`;
    if (diff && diff.status !== 200) text += ` The window from ${fmtShort(fmt(S.asOfStart))}: ${diff.status === 409 ? "a coverage hole (see below)" : answerProblem(diff)}.`;
    s.textContent = text;
  } else if (cut.status === 409) {
    s.className = "notice error";
    s.textContent = `No answer for ${who} at ${at} on ${S.clock}: a coverage hole, not zero records.${nearestHint()}`;
  } else {
    s.className = "notice error";
    s.textContent = answerProblem(cut);
  }
}

function nearestHint() {
  if (answerableAt(S.asOf)) return " The source answers this instant: the hole is the question's own (its ticker, or the days it needs), named below.";
  const st = stretches();
  if (!st.length) {
    const other = CLOCKS.filter((c) => c !== S.clock && stretches(c).length);
    return ` This lane answers no cut on ${S.clock}${other.length ? `; try ${other.join(" or ")}` : ""}${S.mode === "sample" && S.clock === "available_at" ? ", or sign in for the forward_first_seen lane, whose rows carry available_at" : ""}.`;
  }
  return ` Cuts on ${S.clock} answer from ${st.map(([a, b]) => `${fmtShort(fmt(a))} to ${fmtShort(fmt(Math.floor(b / 1000) * 1000))}`).join(", ")}.`;
}

// ---- the same question elsewhere ----------------------------------------------------------

let tab = "curl";

function renderSnippets(cut) {
  const origin = location.origin;
  const params = cutParams(S.asOf, S.clock);
  delete params.limit;
  if (S.mode === "account" && cut && cut.json && cut.json.corpus_version) params.corpus_version = cut.json.corpus_version;
  const diff = Number.isFinite(S.asOfStart);
  let text;
  if (tab === "curl") {
    const path = S.mode === "sample" ? "/v1/sample/news" : "/v1/news";
    const auth = S.mode === "sample" ? "" : ' -H "Authorization: Bearer $ASOF_KEY"';
    text = `curl${auth} '${origin}${path}?${query(params)}'`;
    if (diff) {
      const d = diffParams();
      delete d.limit;
      if (params.corpus_version) d.corpus_version = params.corpus_version;
      text += `\n# what became knowable since as_of_start:\ncurl${auth} '${origin}${S.mode === "sample" ? "/v1/sample/diff" : "/v1/news/diff"}?${query(d)}'`;
    }
  } else if (tab === "python") {
    if (S.mode === "sample") {
      text = `import httpx\n\nr = httpx.get("${origin}/v1/sample/news", params=${pyDict(params)})\nanswer = r.json()  # 409 with coverage.missing is a hole, never an empty list\nprint(answer["corpus_version"], answer["count"])`;
      if (diff) {
        const d = diffParams();
        text += `\n# what became knowable since as_of_start:\nnew = httpx.get("${origin}/v1/sample/diff", params=${pyDict(d)}).json()`;
      }
    } else {
      const args = Object.entries(params).filter(([k]) => k !== "as_of").map(([k, v]) => `${k}=${JSON.stringify(v)}`);
      text = `import os\nimport asof\n\napi = asof.connect("${origin}", os.environ["ASOF_KEY"])\nrows = api.news(as_of="${params.as_of}"${args.length ? ", " + args.join(", ") : ""})`;
      if (diff) text += `\nnew = api.diff("${fmt(S.asOfStart)}", "${fmt(S.asOf)}"${args.length ? ", " + args.join(", ") : ""})`;
    }
  } else {
    const src = S.mode === "sample" ? meta.sample.source_id : S.source;
    const lane = S.mode === "sample" ? meta.sample.lane : S.lane;
    const cik = S.mode === "sample" ? (meta.sample.examples.find((e) => e.id === S.example) || {}).cik : /^\d+$/.test(S.filer.trim()) ? String(Number(S.filer.trim())) : null;
    const where = cik ? `\nWHERE cik = '${cik}'` : S.filer.trim() && src === "sec.edgar" ? `\n-- SQL has no ticker resolution: look the ticker up with identity_asof('${fmt(S.asOf)}') and filter by cik` : "";
    const fn = diff ? `news_diff('${fmt(S.asOfStart)}', '${fmt(S.asOf)}', '${S.clock}', '${lane}', '${src}')` : `news_asof('${fmt(S.asOf)}', '${S.clock}', '${lane}', '${src}')`;
    text = `-- asof sql --corpus <a local copy of the corpus> "..." (a hole fails the query, never an empty table)\nSELECT id, form, published_at, available_at, committed_at\nFROM ${fn}${where}\nORDER BY published_at, id`;
  }
  $("snippet-code").textContent = text;
}

function pyDict(o) {
  return `{${Object.entries(o).map(([k, v]) => `"${k}": ${JSON.stringify(v)}`).join(", ")}}`;
}

function selectTab(name, focus) {
  tab = name;
  for (const t of ["curl", "python", "sql"]) {
    const b = $(`tab-${t}`);
    b.setAttribute("aria-selected", String(t === name));
    b.tabIndex = t === name ? 0 : -1;
    if (t === name && focus) b.focus();
  }
  $("snippet").setAttribute("aria-labelledby", `tab-${name}`);
  renderSnippets(lastCut);
}

// ---- the URL ------------------------------------------------------------------------------

function writeUrl() {
  const p = {};
  if (S.mode === "sample") p.example = S.example;
  else {
    if (S.source !== "sec.edgar") p.source = S.source;
    const f = S.filer.trim();
    if (f && /^\d+$/.test(f)) p.cik = f;
    else if (f) p.ticker = f.toUpperCase();
  }
  if (S.lane !== "certified_pit") p.lane = S.lane;
  if (S.clock !== "published_at") p.visible_by = S.clock;
  p.as_of = fmt(S.asOf);
  if (Number.isFinite(S.asOfStart)) p.as_of_start = fmt(S.asOfStart);
  const url = `/explore?${query(p)}`;
  history.replaceState(null, "", url);
  const a = $("share");
  a.href = url;
  a.textContent = location.origin + url;
}

// ---- the update loop ----------------------------------------------------------------------

// One question at a time: a move while an answer is on its way is asked next, with the
// latest state (the moves in between are never asked). Each finished step is measured as
// the User Timing entry `asof-step`, from the move to the drawn answer.
function schedule() {
  if (!stepStarted) stepStarted = performance.now();
  if (inflight) { pending = true; return; }
  inflight = true;
  (async () => {
    try {
      do {
        pending = false;
        const t0 = stepStarted;
        stepStarted = 0;
        $("chart").setAttribute("aria-busy", "true");
        drawCursor();
        writeUrl();
        const diffOn = Number.isFinite(S.asOfStart);
        if (!answers.has(cutUrl()) || (diffOn && !answers.has(diffUrl()))) {
          const wait = lastSent + MIN_GAP - performance.now();
          if (wait > 0) {
            await new Promise((r) => setTimeout(r, wait));
            if (pending) continue; // moved on while waiting: ask the latest instead
          }
          lastSent = performance.now();
        }
        const [cut, diff] = await Promise.all([ask(cutUrl()), diffOn ? ask(diffUrl()) : Promise.resolve(null)]);
        if (pending) continue; // moved on meanwhile: draw only the latest question
        apply(cut, diff);
        $("chart").setAttribute("aria-busy", "false");
        document.body.dataset.asOf = fmt(S.asOf);
        document.body.dataset.answered = cutUrl();
        if (t0) performance.measure("asof-step", { start: t0, end: performance.now() });
        if (!firstRendered) {
          firstRendered = true;
          performance.measure("asof-first-render", { start: 0, end: performance.now() });
        }
      } while (pending);
    } catch (e) {
      $("status").className = "notice error";
      $("status").textContent = "The service could not be reached just now.";
    } finally {
      inflight = false;
    }
  })();
}

function setAsOf(ms, { fromRange = false } = {}) {
  if (!Number.isFinite(ms)) return;
  S.asOf = Math.floor(ms / 1000) * 1000;
  if (S.asOf < S.domain[0] || S.asOf > S.domain[1]) { computeDomain(); configureRange(); drawChart(); }
  if (!fromRange) $("as-of-range").value = String(Math.round((S.asOf - S.domain[0]) / S.step));
  $("as-of").value = fmt(S.asOf);
  $("as-of-error").textContent = "";
  $("as-of-range").setAttribute("aria-valuetext", `${fmtShort(fmt(S.asOf))}${answerableAt(S.asOf) ? "" : " (no answer here on this clock)"}`);
  stepStarted = performance.now();
  schedule();
}

function configureRange() {
  const r = $("as-of-range");
  r.min = "0";
  r.max = String(Math.round((S.domain[1] - S.domain[0]) / S.step));
  r.step = "1";
  if (Number.isFinite(S.asOf)) r.value = String(Math.round((S.asOf - S.domain[0]) / S.step));
}

// The record clocks on the chosen clock, sorted: "next change" jumps to the next of them.
function changes() {
  const ts = [];
  for (const r of universe.values()) {
    const t = parseInstant(r[S.clock]);
    if (!Number.isNaN(t)) ts.push(Math.floor(t / 1000) * 1000);
  }
  for (const [a, b] of stretches()) ts.push(a, Math.floor(b / 1000) * 1000 + 1000);
  return [...new Set(ts)].sort((a, b) => a - b);
}

// ---- controls -----------------------------------------------------------------------------

function fillSelect(select, values, chosen) {
  select.replaceChildren();
  for (const [value, label] of values) {
    const o = document.createElement("option");
    o.value = value;
    o.textContent = label;
    if (value === chosen) o.selected = true;
    select.append(o);
  }
}

function fillLanes() {
  let lanes;
  if (S.mode === "sample") {
    lanes = [meta.sample.lane];
    $("lane-help").textContent = "The public sample holds one lane; sign in for both.";
  } else {
    const src = meta.corpus.sources.find((s) => s.source_id === S.source);
    lanes = src ? src.lanes.map((l) => l.lane) : ["certified_pit"];
    $("lane-help").textContent = "certified_pit: complete days, certified; forward_first_seen: rows as the live poller first saw them, with available_at.";
  }
  if (!lanes.includes(S.lane)) S.lane = lanes[0];
  fillSelect($("lane"), lanes.map((l) => [l, l]), S.lane);
  $("lane").disabled = lanes.length < 2;
}

async function reload({ keepAsOf = true } = {}) {
  $("chart").setAttribute("aria-busy", "true");
  await loadUniverse();
  const had = Number.isFinite(S.asOf);
  computeDomain();
  if (!keepAsOf || !had) S.asOf = defaultAsOf();
  computeDomain();
  configureRange();
  drawChart();
  setAsOf(S.asOf);
}

function readUrl() {
  const q = new URLSearchParams(location.search);
  const problems = [];
  const clock = q.get("visible_by");
  if (clock) { if (CLOCKS.includes(clock)) S.clock = clock; else problems.push(`visible_by ${clock} is not a clock`); }
  if (q.get("lane")) S.lane = q.get("lane");
  if (q.get("example")) S.example = q.get("example");
  if (q.get("source")) S.source = q.get("source");
  if (q.get("ticker")) S.filer = q.get("ticker");
  if (q.get("cik")) S.filer = q.get("cik");
  for (const [name, key] of [["as_of", "asOf"], ["as_of_start", "asOfStart"]]) {
    const v = q.get(name);
    if (v === null) continue;
    const t = parseInstant(v);
    if (Number.isNaN(t)) problems.push(`${name}: ${whyInvalid(v)}`);
    else S[key] = t;
  }
  return problems;
}

async function init() {
  const problems = readUrl();
  const m = await ask("/v1/meta");
  if (m.status !== 200) { $("status").textContent = "The service's description could not be loaded just now."; return; }
  meta = m.json.results[0];
  if (document.body.dataset.session === "1") {
    const r = await ask("/v1/me");
    if (r.status === 200) { me = r.json.results[0]; S.mode = "account"; }
  }
  if (S.mode === "account") {
    $("mode").textContent = `Signed in as ${me.email} (${me.plan} plan): the data routes, every held source, both lanes. Your session is the credential; no key is used by this page.`;
    $("nav-sign-in").textContent = "Account";
    $("nav-sign-in").href = "/account";
    $("example-field").hidden = true;
    $("source-field").hidden = false;
    $("filer-field").hidden = false;
    const held = meta.corpus.sources.map((s) => s.source_id);
    if (!held.includes(S.source)) { problems.push(`source ${S.source} is not held here`); S.source = held.includes("sec.edgar") ? "sec.edgar" : held[0]; }
    fillSelect($("source"), held.map((s) => [s, s]), S.source);
    if (!S.filer && S.source === "sec.edgar" && meta.sample) S.filer = meta.sample.examples[0].ticker;
    $("filer").value = S.filer;
    $("filer").disabled = S.source !== "sec.edgar";
  } else {
    if (!meta.sample) { $("status").textContent = "This deployment ships no public sample: sign in to explore its data."; return; }
    $("mode").textContent = `The public sample: ${meta.sample.examples.length} companies on ${meta.sample.first_day} to ${meta.sample.last_day}, no account needed. Sign in to explore every source with your plan.`;
    const ids = meta.sample.examples.map((e) => e.id);
    if (!S.example || !ids.includes(S.example)) { if (S.example) problems.push(`the sample does not hold ${S.example}`); S.example = ids[0]; }
    fillSelect($("example"), meta.sample.examples.map((e) => [e.id, `${e.name} (${e.ticker})`]), S.example);
  }
  fillLanes();
  $(`clock-${S.clock}`).checked = true;
  $("diff-on").checked = Number.isFinite(S.asOfStart);
  $("start-field").hidden = !Number.isFinite(S.asOfStart);
  if (Number.isFinite(S.asOfStart)) $("as-of-start").value = fmt(S.asOfStart);
  if (problems.length) $("as-of-error").textContent = `Not taken from the link: ${problems.join("; ")}.`;
  wire();
  await reload();
  if (problems.length) $("as-of-error").textContent = `Not taken from the link: ${problems.join("; ")}.`;
}

function wire() {
  const range = $("as-of-range");
  range.addEventListener("input", () => {
    setAsOf(S.domain[0] + Number(range.value) * S.step, { fromRange: true });
  });
  range.addEventListener("keydown", (e) => {
    if (e.shiftKey && (e.key === "ArrowRight" || e.key === "ArrowLeft" || e.key === "ArrowUp" || e.key === "ArrowDown")) {
      e.preventDefault();
      const dir = e.key === "ArrowRight" || e.key === "ArrowUp" ? 1 : -1;
      setAsOf(Math.min(S.domain[1], Math.max(S.domain[0], S.asOf + dir * DAY)));
    }
  });
  const exact = $("as-of");
  exact.addEventListener("change", () => {
    const t = parseInstant(exact.value.trim());
    if (Number.isNaN(t)) { $("as-of-error").textContent = whyInvalid(exact.value.trim()); return; }
    setAsOf(t);
  });
  exact.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); exact.dispatchEvent(new Event("change")); } });
  $("controls").addEventListener("submit", (e) => e.preventDefault());
  $("next-change").addEventListener("click", () => {
    const next = changes().find((t) => t > S.asOf);
    if (next !== undefined) setAsOf(next);
  });
  $("prev-change").addEventListener("click", () => {
    const prev = changes().filter((t) => t < S.asOf).pop();
    if (prev !== undefined) setAsOf(prev);
  });
  for (const c of CLOCKS) {
    $(`clock-${c}`).addEventListener("change", () => {
      S.clock = c;
      computeDomain();
      configureRange();
      drawChart();
      // The same instant on another clock: the comparison the page exists for.
      setAsOf(S.asOf);
    });
  }
  $("lane").addEventListener("change", () => { S.lane = $("lane").value; reload({ keepAsOf: false }); });
  $("example").addEventListener("change", () => { S.example = $("example").value; reload(); });
  $("source").addEventListener("change", () => {
    S.source = $("source").value;
    $("filer").disabled = S.source !== "sec.edgar";
    fillLanes();
    reload({ keepAsOf: false });
  });
  $("filer").addEventListener("change", () => { S.filer = $("filer").value.trim(); reload(); });
  $("diff-on").addEventListener("change", () => {
    const on = $("diff-on").checked;
    $("start-field").hidden = !on;
    if (on) {
      if (!Number.isFinite(S.asOfStart) || S.asOfStart >= S.asOf) S.asOfStart = Math.max(S.domain[0], S.asOf - 3 * DAY);
      $("as-of-start").value = fmt(S.asOfStart);
    } else S.asOfStart = NaN;
    stepStarted = performance.now();
    schedule();
  });
  $("as-of-start").addEventListener("change", () => {
    const v = $("as-of-start").value.trim();
    const t = parseInstant(v);
    if (Number.isNaN(t)) { $("as-of-start-error").textContent = whyInvalid(v); return; }
    $("as-of-start-error").textContent = "";
    S.asOfStart = Math.floor(t / 1000) * 1000;
    stepStarted = performance.now();
    schedule();
  });
  const tabs = ["curl", "python", "sql"];
  for (const t of tabs) {
    $(`tab-${t}`).addEventListener("click", () => selectTab(t, false));
    $(`tab-${t}`).addEventListener("keydown", (e) => {
      const i = tabs.indexOf(t);
      if (e.key === "ArrowRight") selectTab(tabs[(i + 1) % 3], true);
      if (e.key === "ArrowLeft") selectTab(tabs[(i + 2) % 3], true);
    });
  }
  $("copy-snippet").addEventListener("click", async () => {
    const text = $("snippet-code").textContent;
    try {
      await navigator.clipboard.writeText(text);
      $("copied").textContent = "Copied.";
    } catch (_) {
      const range = document.createRange();
      range.selectNodeContents($("snippet-code"));
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      $("copied").textContent = "Selected: press Ctrl+C (or ⌘C) to copy.";
    }
  });
  let resized = 0;
  window.addEventListener("resize", () => {
    clearTimeout(resized);
    resized = setTimeout(() => { if (svg && Math.abs(($("chart").clientWidth || 0) - width) > 20) { drawChart(); if (lastCut) apply(lastCut, lastDiff); } }, 150);
  });
}

function beacon() {
  try {
    const data = JSON.stringify({ path: location.pathname });
    navigator.sendBeacon("/site/beacon", new Blob([data], { type: "application/json" }));
  } catch (_) { /* counting never breaks a page */ }
}

document.addEventListener("DOMContentLoaded", () => {
  beacon();
  init();
});
