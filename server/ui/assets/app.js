// The cutkv dashboard: polls api/status (same origin, so it works over
// HTTPS as over HTTP) and redraws. Every value from the node is put in
// the page as text, never as HTML.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const MIN_POLL_MS = 500, MAX_POLL_MS = 10000, RETRY_MS = 2000, HIDDEN_POLL_MS = 10000, FETCH_TIMEOUT_MS = 20000;

function el(tag, attrs, ...children) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null && v !== false) e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function bytes(n) {
  if (n === undefined || n === null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0, v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? String(v) : v.toFixed(v < 10 ? 1 : 0)) + " " + units[i];
}

function duration(ms) {
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  return Math.floor(ms / 60000) + " m " + Math.round((ms % 60000) / 1000) + " s";
}

// Time of day in UTC with milliseconds, as kvctl prints times.
function clock(ms) {
  if (!ms) return "–";
  return new Date(ms).toISOString().slice(11, 23) + "Z";
}

function stamp(ms) {
  if (!ms) return "–";
  return new Date(ms).toISOString().replace("T", " ").slice(0, 23) + "Z";
}

function rate(v) {
  if (v === null || v === undefined) return "–";
  return v >= 100 ? Math.round(v).toLocaleString("en") : v.toFixed(1);
}

// width sizes an SVG's drawing to its box, so that text is not stretched.
function width(svg, h) {
  const w = Math.max(300, Math.round(svg.getBoundingClientRect().width) || 800);
  svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  return w;
}

function pill(text, kind) { return el("span", { class: "pill " + kind }, text); }

// showError fills a section's error line, or hides it.
function showError(section, msg) {
  const p = section.querySelector(".error");
  p.textContent = msg || "";
  p.hidden = !msg;
}

function fillBody(section, rows) {
  section.querySelector("tbody").replaceChildren(...rows);
}

function renderMembers(m) {
  const sec = document.getElementById("members");
  showError(sec, m.error);
  fillBody(sec, m.items.map((x) => {
    const gossipKind = { alive: "ok", suspect: "warn", failed: "bad", left: "none" }[x.state] || "none";
    let health;
    if (x.serving === null) health = el("span", { title: x.status_error || "" }, pill("unreachable", "bad"));
    else health = x.serving ? pill("SERVING", "ok") : pill("NOT_SERVING", "bad");
    return el("tr", { "data-member": x.id },
      el("td", { class: x.self ? "self" : null, title: "raft id " + x.raft_id + (x.version ? ", version " + x.version : "") },
        x.id, x.self ? " (this node)" : ""),
      el("td", { title: x.since_unix_ms ? "since " + stamp(x.since_unix_ms) : "" }, pill(x.state, gossipKind)),
      el("td", {}, health),
      el("td", {}, el("code", {}, x.grpc_addr || "–")),
      el("td", {}, el("code", {}, x.peer_addr || "–")),
      el("td", {}, el("code", {}, x.http_addr || "–")),
      el("td", { class: "num" }, x.serving === null ? "–" : bytes(x.wal_bytes)),
      el("td", { class: "num" }, x.disk_total_bytes ? bytes(x.disk_free_bytes) + " of " + bytes(x.disk_total_bytes) : "–"));
  }));
}

function renderPartitions(p) {
  const sec = document.getElementById("partitions");
  showError(sec, p.error || (p.truncated ? "only the first " + p.items.length + " groups are shown" : ""));
  fillBody(sec, p.items.map((g) => el("tr", { "data-partition": g.id },
    el("td", { class: "num" }, g.id === 0 ? "0 (meta)" : g.id),
    el("td", {}, g.leader ? g.leader : pill("no leader", "bad")),
    el("td", {}, ...g.replicas.map((r) => el("span", { class: "replica" + (r === g.leader ? " leader" : "") }, r))),
    el("td", { class: "num" }, g.term),
    el("td", { class: "num" }, g.commit_index),
    el("td", { class: "num" }, g.applied_index),
    el("td", { class: "num" }, g.id === 0 ? "–" : g.keys))));
}

function renderOps(o, now) {
  const sec = document.getElementById("ops");
  showError(sec, o.error);
  document.getElementById("requests-rate").textContent = rate(o.requests_per_sec);
  document.getElementById("entries-rate").textContent = rate(o.entries_per_sec);
  const svg = document.getElementById("ops-chart");
  const H = 120, pad = 4, W = width(svg, H);
  const s = o.series;
  const parts = [];
  const top = Math.max(1, ...s.map((p) => Math.max(p.requests_per_sec, p.entries_per_sec))) * 1.1;
  for (const f of [0.5, 1]) {
    parts.push(el("svg:line", { class: "grid", x1: 0, x2: W, y1: H - f * (H - pad) / 1.1, y2: H - f * (H - pad) / 1.1 }));
  }
  parts.push(el("svg:text", { x: 4, y: 12 }, rate(top / 1.1) + "/s"));
  if (s.length >= 2) {
    const t0 = s[0].t, t1 = Math.max(now, s[s.length - 1].t), span = Math.max(1, t1 - t0);
    const pts = (key) => s.map((p) => ((p.t - t0) / span * W).toFixed(1) + "," + (H - p[key] / top * (H - pad)).toFixed(1)).join(" ");
    parts.push(el("svg:polyline", { class: "requests", points: pts("requests_per_sec") }));
    parts.push(el("svg:polyline", { class: "entries", points: pts("entries_per_sec") }));
  } else {
    parts.push(el("svg:text", { x: W / 2 - 60, y: H / 2 }, "collecting samples…"));
  }
  svg.replaceChildren(...parts);
}

function renderCuts(c, now) {
  const sec = document.getElementById("cuts");
  showError(sec, c.error);
  const svg = document.getElementById("cuts-timeline");
  const H = 90, axisY = 70, barY = 30, barH = 28, W = width(svg, H);
  const parts = [el("svg:line", { class: "grid", x1: 0, x2: W, y1: axisY, y2: axisY })];
  const cuts = c.items.slice().reverse(); // oldest first
  if (cuts.length === 0) {
    parts.push(el("svg:text", { x: W / 2 - 40, y: H / 2 }, c.error ? "" : "no cuts yet"));
  } else {
    const t0 = cuts[0].started_unix_ms, t1 = Math.max(now, ...cuts.map((x) => x.started_unix_ms + x.duration_ms));
    const span = Math.max(1000, t1 - t0);
    const x = (t) => 10 + (t - t0) / span * (W - 20);
    for (let i = 0; i <= 4; i++) {
      const t = t0 + span * i / 4;
      parts.push(el("svg:line", { class: "grid", x1: x(t), x2: x(t), y1: axisY, y2: axisY + 4 }));
      parts.push(el("svg:text", { x: Math.min(x(t), W - 80), y: axisY + 16 }, clock(t)));
    }
    let lastLabel = -Infinity;
    for (const cut of cuts) {
      const x0 = x(cut.started_unix_ms), w = Math.max(2, cut.duration_ms / span * (W - 20));
      const g = el("svg:g", { "data-cut-version": cut.version });
      g.append(el("svg:rect", { class: "cut " + cut.state, x: x0.toFixed(1), y: barY, width: w.toFixed(1), height: barH, rx: 1 },
        el("svg:title", {}, "cut " + cut.version + ": " + cut.state + ", " + duration(cut.duration_ms) + ", started " + stamp(cut.started_unix_ms) +
          (cut.error ? "\n" + cut.error : ""))));
      if (x0 - lastLabel >= 28) {
        g.append(el("svg:text", { class: "cut-label", x: x0.toFixed(1), y: barY - 6 }, String(cut.version)));
        lastLabel = x0;
      }
      parts.push(g);
    }
  }
  svg.replaceChildren(...parts);
  const kind = { completed: "ok", running: "warn", failed: "bad" };
  fillBody(sec, c.items.slice(0, 10).map((cut) => el("tr", { "data-cut-version": cut.version },
    el("td", { class: "num" }, cut.version),
    el("td", {}, pill(cut.state, kind[cut.state] || "none")),
    el("td", {}, stamp(cut.started_unix_ms)),
    el("td", { class: "num" }, duration(cut.duration_ms)),
    el("td", { class: "num" }, cut.partitions),
    el("td", {}, cut.error || ""))));
}

function renderSnapshots(s) {
  const sec = document.getElementById("snapshots");
  showError(sec, s.error);
  document.getElementById("snapshot-store").textContent = s.store
    ? "store " + s.store + ", read " + clock(s.updated_unix_ms) + (s.items.length ? "" : ": no snapshots yet")
    : "";
  const chain = s.items.slice(-12);
  const boxes = [];
  chain.forEach((x, i) => {
    if (i > 0) boxes.push(el("span", { class: "arrow" }, "→"));
    boxes.push(el("div", { class: "snap", "data-snapshot": x.id, title: x.id + (x.parent ? ", parent " + x.parent : "") },
      el("div", { class: "title" }, "cut " + x.cut_version),
      el("div", { class: "sub" }, bytes(x.total_bytes) + (x.new_bytes !== null ? ", +" + bytes(x.new_bytes) + " new" : ""))));
  });
  document.getElementById("snapshot-chain").replaceChildren(...boxes);
  fillBody(sec, s.items.slice().reverse().map((x) => el("tr", { "data-snapshot": x.id },
    el("td", {}, el("code", {}, x.id)),
    el("td", { class: "num" }, x.cut_version),
    el("td", {}, stamp(x.time_unix_ms)),
    el("td", { class: "num" }, x.partitions),
    el("td", { class: "num" }, x.objects),
    el("td", { class: "num" }, bytes(x.total_bytes)),
    el("td", { title: x.detail_error || (x.parent ? "parent " + x.parent : "the first of the chain") },
      x.new_objects === null ? "–" : x.new_objects + " objects, " + bytes(x.new_bytes) + " (" + x.shared_objects + " shared)"))));
}

function render(s) {
  document.getElementById("cluster-id").textContent = s.cluster_id || "?";
  document.getElementById("node-id").textContent = s.node;
  document.getElementById("updated").textContent = clock(s.time_unix_ms);
  renderOps(s.ops, s.time_unix_ms);
  renderMembers(s.members);
  renderPartitions(s.partitions);
  renderCuts(s.cuts, s.time_unix_ms);
  renderSnapshots(s.snapshots);
}

// timer is the pending poll; null while one is in flight.
let timer = null;

async function poll() {
  timer = null;
  const banner = document.getElementById("conn-error");
  let next = RETRY_MS;
  try {
    const resp = await fetch("api/status", { cache: "no-store", signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    if (!resp.ok) throw new Error("api/status answered " + resp.status + ": " + (await resp.text()).trim());
    const s = await resp.json();
    render(s);
    banner.hidden = true;
    next = Math.min(MAX_POLL_MS, Math.max(MIN_POLL_MS, s.refresh_ms || 1000));
  } catch (e) {
    banner.textContent = "cannot read the node's status (showing the last answer): " + e.message;
    banner.hidden = false;
  }
  // A tab nobody looks at asks seldom; it catches up when shown again.
  if (document.hidden) next = Math.max(next, HIDDEN_POLL_MS);
  timer = setTimeout(poll, next);
}

document.addEventListener("visibilitychange", () => {
  if (!document.hidden && timer !== null) {
    clearTimeout(timer);
    timer = null;
    poll();
  }
});

poll();
