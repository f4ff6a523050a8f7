// The web view's page. Two views chosen by the URL's fragment: the list
// of snapshots (#/) and one snapshot (#/snapshot/ID, or
// #/snapshot/latest, which follows new snapshots). The list is polled
// every POLL_MS. Elements carry data-* attributes with the numbers they
// show, and data-ready once rendered, for tests to read.
"use strict";

const POLL_MS = 2000;
const PAGE = 50;
const COSE_MAX = 300; // nodes up to which the graph gets a force-directed layout

// el builds an element: el("td", {class: "num", dataset: {x: 1}}, "text", child).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "dataset") Object.assign(e.dataset, v);
    else if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

const $ = (id) => document.getElementById(id);

// api fetches a JSON answer; an error answer is thrown with its message.
async function api(path) {
  const r = await fetch(path, {cache: "no-store"});
  let body;
  try { body = await r.json(); } catch (e) { body = {error: r.status + " " + r.statusText}; }
  if (!r.ok) {
    const err = new Error(body.error || r.statusText);
    err.damaged = !!body.damaged;
    throw err;
  }
  return body;
}

// localTime writes an RFC 3339 time as "2006-01-02 15:04:05" local, as
// actorsnap ls does.
function localTime(s) {
  const d = new Date(s);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// fmt writes a decoded value (decoded.JSON's form) compactly:
// {Balance: 762, Owner: "ann"}; bytes and undecoded states by size.
function fmt(v) {
  if (v === null || v === undefined) return "null";
  if (Array.isArray(v)) return "[" + v.map(fmt).join(", ") + "]";
  if (typeof v === "object") {
    if ("$bytes" in v) return `<${v.size} bytes>`;
    if ("$undecoded" in v) return `<${v.size} bytes, ${v.$undecoded}>`;
    if ("$ext" in v) return `<ext ${v.$ext}>`;
    const parts = Object.entries(v).map(([k, x]) => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? k : JSON.stringify(k)) + ": " + fmt(x));
    return "{" + parts.join(", ") + "}";
  }
  if (typeof v === "string") return JSON.stringify(v);
  return String(v);
}

// valueCell shows a decoded value, cut at 300 characters (all of it in
// the tooltip); undecoded bytes are labelled as such.
function valueCell(v) {
  const s = fmt(v);
  const cut = s.length > 300 ? s.slice(0, 300) + "…" : s;
  const undecoded = v && typeof v === "object" && "$undecoded" in v;
  return el("td", {class: "value" + (undecoded ? " undecoded" : ""), title: s}, cut);
}

function setStatus(text) { $("status").textContent = text; }

// pager writes "41–60 of 200" with previous and next buttons.
function pager(node, pg, go) {
  node.replaceChildren();
  const from = pg.matched === 0 ? 0 : pg.offset + 1;
  const to = Math.min(pg.offset + pg.limit, pg.matched);
  node.append(el("span", {dataset: {matched: pg.matched}}, `${from}–${to} of ${pg.matched}` + (pg.matched !== pg.total ? ` (of ${pg.total})` : "")));
  const prev = el("button", {type: "button", onclick: () => go(Math.max(0, pg.offset - pg.limit))}, "← previous");
  const next = el("button", {type: "button", onclick: () => go(pg.offset + pg.limit)}, "next →");
  prev.disabled = pg.offset === 0;
  next.disabled = to >= pg.matched;
  node.append(prev, next);
}

// ---- the list of snapshots ----

let listText = "";  // the last list answer, to redraw only on change
let listRows = [];
let charts = [];

async function pollList() {
  let body, text;
  try {
    const r = await fetch("api/snapshots", {cache: "no-store"});
    text = await r.text();
    body = JSON.parse(text);
    if (!r.ok) throw new Error(body.error || r.statusText);
  } catch (e) {
    setStatus("cannot read the store: " + e.message);
    return;
  }
  setStatus("updated " + new Date().toLocaleTimeString());
  if (text === listText) return;
  listText = text;
  listRows = body.snapshots;
  $("store-owner").textContent = body.owner ? `owner ${body.owner}` + (body.writer ? " (running)" : "") : "";
  renderList();
  onNewSnapshots();
}

function renderList() {
  const rows = listRows;
  const ok = rows.filter((s) => !s.damaged);
  const count = $("snapshot-count");
  count.textContent = `${ok.length} stored` + (ok.length !== rows.length ? `, ${rows.length - ok.length} damaged` : "");
  count.dataset.count = ok.length;
  count.dataset.damaged = rows.length - ok.length;
  const tbody = $("snapshots").tBodies[0];
  tbody.replaceChildren(...rows.slice().reverse().map(listRow));
  $("snapshots").dataset.rows = rows.length;
  drawCharts(ok);
  $("snapshots").dataset.ready = "1";
  if (!document.body.dataset.listMs && !$("list-view").hidden) document.body.dataset.listMs = performance.now().toFixed(1);
}

function listRow(s) {
  const name = s.id ? String(s.id) : s.name;
  if (s.damaged) {
    return el("tr", {class: "damaged", dataset: {id: name, damaged: "1"}},
      el("td", {}, name), el("td", {colspan: 7}, "DAMAGED: " + s.damaged));
  }
  const num = (col, v) => el("td", {class: "num", dataset: {col}}, v);
  return el("tr", {class: s.deadlocks ? "has-deadlock" : "",
    dataset: {id: s.id, participants: s.participants, inFlight: s.in_flight, stateBytes: s.state_bytes, durationUs: s.duration_us, mode: s.mode, deadlocks: s.deadlocks}},
  el("td", {dataset: {col: "id"}}, el("a", {href: "#/snapshot/" + s.id}, s.id)),
  el("td", {dataset: {col: "taken"}}, localTime(s.taken)),
  el("td", {dataset: {col: "duration"}}, s.duration),
  el("td", {dataset: {col: "mode"}}, s.mode),
  num("participants", s.participants), num("in-flight", s.in_flight), num("state-bytes", s.state_bytes),
  num("deadlocks", s.deadlocks));
}

// drawCharts draws duration and size over the store's history.
function drawCharts(ok) {
  for (const c of charts) c.destroy();
  charts = [];
  if (ok.length === 0 || document.getElementById("list-view").hidden) return;
  const ids = ok.map((s) => s.id);
  const opts = (title, series, axes) => ({
    width: 560, height: 200, title: "", legend: {show: true},
    scales: {x: {time: false}},
    series: [{label: "snapshot"}, ...series], axes: [{label: title}, ...axes.map((a) => ({size: 60, ...a}))],
  });
  charts.push(new uPlot(opts("snapshot", [{label: "ms", stroke: "#2f5fb3", width: 2, points: {show: ok.length < 60}}], [{}]),
    [ids, ok.map((s) => s.duration_us / 1000)], $("chart-duration")));
  charts.push(new uPlot(opts("snapshot", [
    {label: "state bytes", stroke: "#2e7d32", width: 2, scale: "bytes"},
    {label: "in flight", stroke: "#ef6c00", width: 2, scale: "msgs"}],
  [{scale: "bytes", size: 70}, {scale: "msgs", side: 1, size: 60, grid: {show: false}}]),
  [ids, ok.map((s) => s.state_bytes), ok.map((s) => s.in_flight)], $("chart-size")));
  $("chart-duration").dataset.points = ids.length;
  $("chart-size").dataset.points = ids.length;
}

// ---- one snapshot ----

let current = null; // {arg, id, summary}
let cy = null;

async function showSnapshot(arg) {
  const view = $("snapshot-view");
  view.dataset.ready = "";
  $("snap-error").hidden = true;
  let s;
  try {
    s = await api("api/snapshots/" + encodeURIComponent(arg));
  } catch (e) {
    $("snap-id").textContent = arg;
    $("snap-error").textContent = (e.damaged ? "This snapshot is damaged: " : "Cannot show this snapshot: ") + e.message;
    $("snap-error").hidden = false;
    for (const id of ["snap-summary", "deadlocks", "violations", "graph", "diff", "diff-channels", "diff-counts"]) $(id).replaceChildren();
    for (const id of ["participants", "channels"]) $(id).tBodies[0].replaceChildren();
    view.dataset.ready = "error";
    return;
  }
  current = {arg, id: s.id, summary: s};
  Object.assign(view.dataset, {id: s.id, participants: s.participants, inFlight: s.in_flight, stateBytes: s.state_bytes, deadlocks: s.deadlocks, violations: s.violations});
  $("snap-id").textContent = s.id;
  renderNav();
  renderSummary(s);
  renderDeadlocks(s);
  await Promise.all([loadGraph(""), loadParticipants(0), loadChannels(0), loadDiff(0)]);
  view.dataset.ready = "1";
  document.body.dataset.snapshotMs = performance.now().toFixed(1);
}

function renderNav() {
  const nav = $("snap-nav");
  nav.replaceChildren();
  const ids = listRows.filter((r) => !r.damaged).map((r) => r.id);
  const i = ids.indexOf(current.id);
  if (i > 0) nav.append(el("a", {href: "#/snapshot/" + ids[i - 1]}, "← " + ids[i - 1]), " ");
  if (i >= 0 && i < ids.length - 1) nav.append(el("a", {href: "#/snapshot/" + ids[i + 1]}, ids[i + 1] + " →"), " ");
  if (current.arg === "latest") nav.append("following the latest");
  else nav.append(el("a", {href: "#/snapshot/latest"}, "follow the latest"));
}

function renderSummary(s) {
  const items = [
    ["taken", localTime(s.taken)], ["duration", s.duration], ["mode", s.mode],
    ["participants", s.participants], ["departed", s.departed], ["channels", s.channels],
    ["in flight", s.in_flight], ["state bytes", s.state_bytes], ["waiting", s.waiting],
    ["deadlocks", s.deadlocks], ["violations", s.violations],
  ];
  $("snap-summary").replaceChildren(...items.map(([k, v]) =>
    el("div", {dataset: {field: k.replace(" ", "-")}}, el("dt", {}, k), el("dd", {}, v))));
}

function renderDeadlocks(s) {
  $("deadlocks").replaceChildren(...s.deadlock_list.map((d, i) =>
    el("div", {class: "deadlock", dataset: {deadlock: i}}, el("strong", {}, `Deadlock ${i + 1}: `), d.text)));
  $("violations").replaceChildren(...s.violation_list.map((v) =>
    el("div", {class: "violation"}, el("strong", {}, `Invariant ${v.invariant} violated: `), v.error)));
}

// ---- the graph ----

async function loadGraph(focus) {
  const node = $("graph");
  node.dataset.ready = "";
  let g;
  try {
    g = await api(`api/snapshots/${current.id}/graph?focus=${encodeURIComponent(focus)}`);
  } catch (e) {
    $("graph-note").textContent = e.message;
    node.dataset.ready = "error";
    return;
  }
  let note = `${g.participants} participants, ${g.channels} channels`;
  if (g.collapsed) {
    note += ` — more than ${g.limit}, so collapsed by kind (${g.kinds.map((k) => k.kind + " ×" + k.count).join(", ")}); search a participant to see its neighbours`;
  }
  if (focus && !g.focus) note += ` — no participant "${focus}"`;
  $("graph-note").textContent = note;
  try {
    await drawGraph(g);
  } catch (e) {
    $("graph-note").textContent = note + " — cannot draw it: " + e.message;
    node.dataset.ready = "error";
    return;
  }
  Object.assign(node.dataset, {nodes: cy.nodes().length, edges: cy.edges().length, collapsed: g.collapsed ? "1" : "0", ready: "1"});
}

// loadScript loads a script once: cytoscape.js is large, and the list
// does not need it.
const scripts = {};
function loadScript(src) {
  if (!scripts[src]) {
    scripts[src] = new Promise((resolve, reject) => {
      document.head.append(el("script", {src, onload: resolve, onerror: () => reject(new Error("cannot load " + src))}));
    });
  }
  return scripts[src];
}

async function drawGraph(g) {
  await loadScript("vendor/cytoscape/cytoscape.min.js");
  if (cy) cy.destroy();
  const maxFlight = Math.max(1, ...g.edges.map((e) => e.in_flight));
  const maxCount = Math.max(1, ...g.nodes.map((n) => n.count));
  cy = cytoscape({
    container: $("graph"),
    elements: [
      ...g.nodes.map((n) => ({data: n, classes: [n.group ? "group" : "", n.deadlock || "", n.focus ? "focus" : "", n.departed ? "departed" : ""].join(" ")})),
      ...g.edges.map((e) => ({data: {...e, w: 1 + 5 * e.in_flight / maxFlight}, classes: [e.deadlock ? "deadlock" : "", e.wait ? "wait" : ""].join(" ")})),
    ],
    style: [
      {selector: "node", style: {"label": "data(label)", "font-size": 8, "min-zoomed-font-size": 7, "width": 14, "height": 14, "background-color": "#2f5fb3", "color": "#1d2330"}},
      {selector: "node.group", style: {"shape": "round-rectangle", "background-color": "#90a4c8", "font-size": 12,
        "width": `mapData(count, 1, ${maxCount}, 30, 90)`, "height": `mapData(count, 1, ${maxCount}, 30, 90)`}},
      {selector: "node.departed", style: {"background-color": "#bbb"}},
      {selector: "node.member", style: {"background-color": "#c62828", "border-width": 3, "border-color": "#7f0000"}},
      {selector: "node.blocked", style: {"background-color": "#ef6c00"}},
      {selector: "node.focus", style: {"border-width": 3, "border-color": "#111", "width": 22, "height": 22}},
      {selector: "edge", style: {"width": "data(w)", "line-color": "#b8c2d3", "target-arrow-color": "#b8c2d3", "target-arrow-shape": "triangle",
        "curve-style": "bezier", "arrow-scale": 0.6, "opacity": 0.8}},
      {selector: "edge[in_flight > 0]", style: {"line-color": "#6d86b8", "target-arrow-color": "#6d86b8"}},
      {selector: "edge.deadlock", style: {"line-color": "#c62828", "target-arrow-color": "#c62828", "width": 4, "opacity": 1, "z-index": 10}},
      {selector: "edge.wait", style: {"line-style": "dashed"}},
    ],
    wheelSensitivity: 0.2,
    maxZoom: 2.5, // a small graph is not blown up to fill the box
  });
  cy.on("tap", "node", (ev) => {
    const n = ev.target.data();
    if (n.group) return;
    $("participant-search").value = n.id;
    $("channel-search").value = n.id;
    loadParticipants(0);
    loadChannels(0);
  });
  // A force-directed layout reads best but costs time quadratic in the
  // nodes; above a few hundred, a circle.
  const n = g.nodes.length;
  const layout = cy.layout(n <= COSE_MAX ? {name: "cose", animate: false, randomize: true, numIter: 400, nodeRepulsion: () => 20000, idealEdgeLength: () => 40}
    : {name: "circle", animate: false, avoidOverlap: false});
  const t0 = performance.now();
  layout.one("layoutstop", () => { $("graph").dataset.layoutMs = (performance.now() - t0).toFixed(0); });
  await new Promise((resolve) => {
    layout.one("layoutstop", resolve);
    layout.run();
  });
}

// ---- participants, channels, diff ----

async function loadParticipants(offset) {
  const q = $("participant-search").value.trim();
  const where = $("participant-where").value.trim();
  const table = $("participants");
  table.dataset.ready = "";
  $("participant-error").textContent = "";
  let r;
  try {
    r = await api(`api/snapshots/${current.id}/participants?offset=${offset}&limit=${PAGE}&q=${encodeURIComponent(q)}&where=${encodeURIComponent(where)}`);
  } catch (e) {
    $("participant-error").textContent = e.message;
    table.dataset.ready = "error";
    return;
  }
  table.tBodies[0].replaceChildren(...r.items.map((p) => el("tr", {dataset: {id: p.id, stateBytes: p.state_bytes}},
    el("td", {}, p.id, p.deadlock ? el("span", {class: "tag " + p.deadlock}, " deadlock " + p.deadlock) : null),
    el("td", {}, p.departed ? "(stopped)" : p.kind),
    el("td", {class: "num"}, p.state_bytes),
    valueCell(p.state))));
  Object.assign(table.dataset, {total: r.total, matched: r.matched, offset: r.offset, rows: r.items.length, ready: "1"});
  pager($("participants-pager"), r, loadParticipants);
}

async function loadChannels(offset) {
  const q = $("channel-search").value.trim();
  const table = $("channels");
  table.dataset.ready = "";
  let r;
  try {
    r = await api(`api/snapshots/${current.id}/channels?offset=${offset}&limit=${PAGE}&q=${encodeURIComponent(q)}`);
  } catch (e) {
    table.tBodies[0].replaceChildren(el("tr", {}, el("td", {colspan: 5, class: "error"}, e.message)));
    table.dataset.ready = "error";
    return;
  }
  table.tBodies[0].replaceChildren(...r.items.map((c) => el("tr", {dataset: {channel: c.from + "->" + c.to, inFlight: c.in_flight}},
    el("td", {}, c.from + " → " + c.to),
    el("td", {class: "num"}, c.sent), el("td", {class: "num"}, c.received), el("td", {class: "num"}, c.in_flight),
    el("td", {class: "value"}, ...c.messages.map((m) => el("div", {},
      el("code", {}, "#" + m.seq + " " + m.type + (m.sender ? " from " + m.sender : "") + ": "), fmt(m.value))),
    c.messages.length < c.in_flight ? el("div", {class: "note"}, `… ${c.in_flight - c.messages.length} more`) : null))));
  Object.assign(table.dataset, {matched: r.matched, rows: r.items.length, ready: "1"});
  pager($("channels-pager"), r, loadChannels);
}

async function loadDiff(offset) {
  const list = $("diff");
  list.dataset.ready = "";
  let d;
  try {
    d = await api(`api/snapshots/${current.id}/diff?offset=${offset}&limit=${PAGE}`);
  } catch (e) {
    $("diff-counts").textContent = e.message;
    list.dataset.ready = "error";
    return;
  }
  if (!d.from) {
    $("diff-title").textContent = "";
    $("diff-counts").textContent = "The first snapshot stored: nothing to compare it with.";
    list.replaceChildren();
    $("diff-channels").replaceChildren();
    $("diff-pager").replaceChildren();
    Object.assign(list.dataset, {changed: 0, added: 0, removed: 0, ready: "1"});
    return;
  }
  $("diff-title").replaceChildren("against ", el("a", {href: "#/snapshot/" + d.from}, "snapshot " + d.from));
  $("diff-counts").textContent = `${d.changed} participants changed, ${d.added} added, ${d.removed} removed; ${d.channels_differ} channels' in-flight messages differ`;
  list.replaceChildren(...d.participants.map((p) => {
    if (p.change !== "changed") {
      return el("li", {class: p.change, dataset: {id: p.id}}, (p.change === "added" ? "+ " : "- ") + p.id + " (" + p.kind + ")");
    }
    return el("li", {dataset: {id: p.id}}, "~ " + p.id + ": ",
      el("span", {class: "changes"}, (p.changes || []).map((c) => c.text).join("; ") + (p.more ? "; …" : "")));
  }));
  $("diff-channels").replaceChildren(...d.channels.slice(0, PAGE).map((c) =>
    el("li", {}, `~ channel ${c.channel}: ${c.from_in_flight} → ${c.to_in_flight} in flight`)),
  d.channels_differ > PAGE ? el("li", {class: "note"}, `… ${d.channels_differ - PAGE} more channels`) : "");
  Object.assign(list.dataset, {changed: d.changed, added: d.added, removed: d.removed, ready: "1"});
  pager($("diff-pager"), d, loadDiff);
}

// ---- routing and refresh ----

function route() {
  const m = location.hash.match(/^#\/snapshot\/([^/]+)$/);
  $("list-view").hidden = !!m;
  $("snapshot-view").hidden = !m;
  if (m) {
    showSnapshot(decodeURIComponent(m[1]));
  } else {
    current = null;
    drawCharts(listRows.filter((s) => !s.damaged));
  }
}

// onNewSnapshots follows the latest snapshot when asked to, and keeps
// the links to the neighbours current.
function onNewSnapshots() {
  if (!current) return;
  const ids = listRows.filter((r) => !r.damaged).map((r) => r.id);
  if (current.arg === "latest" && ids.length && ids[ids.length - 1] !== current.id) {
    showSnapshot("latest");
    return;
  }
  renderNav();
}

$("graph-search").addEventListener("submit", (ev) => { ev.preventDefault(); loadGraph($("graph-focus").value.trim()); });
$("participant-filter").addEventListener("submit", (ev) => { ev.preventDefault(); loadParticipants(0); });
$("channel-filter").addEventListener("submit", (ev) => { ev.preventDefault(); loadChannels(0); });
window.addEventListener("hashchange", route);

route();
pollList();
setInterval(pollList, POLL_MS);
