// The segments chart: one horizontal bar per segment, live bytes then dead bytes, drawn as inline
// SVG with DOM calls only (no library, no innerHTML). Bar length is relative to the largest
// segment; the label names the segment id, its generation and sealed/active.
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const ROW = 22;
  const LABEL = 210;
  const BAR = 520;

  function el(name, attrs, text) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB"];
    let v = n;
    let u = 0;
    while (v >= 1024 && u < units.length - 1) { v /= 1024; u += 1; }
    return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`;
  }

  /** Replaces the children of `host` with a chart of `segments` (StoreStats.segments). */
  function drawSegments(host, segments) {
    const width = LABEL + BAR + 280;
    const svg = el("svg", { width, height: Math.max(ROW, segments.length * ROW) + 4, role: "img", "aria-label": "live and dead bytes per segment" });
    const max = Math.max(1, ...segments.map((s) => s.bytes));
    segments.forEach((s, i) => {
      const y = i * ROW + 2;
      const g = el("g", { "data-segment": s.id, "data-testid": `segment-${s.id}` });
      const live = Math.round((Math.min(s.liveBytes, s.bytes) / max) * BAR);
      const all = Math.max(1, Math.round((s.bytes / max) * BAR));
      g.appendChild(el("text", { x: 0, y: y + 14 }, `#${s.id}  gen ${s.generation}  ${s.sealed ? "sealed" : "active"}`));
      g.appendChild(el("rect", { class: "live", x: LABEL, y, width: live, height: ROW - 6 }));
      g.appendChild(el("rect", { class: "dead", x: LABEL + live, y, width: Math.max(0, all - live), height: ROW - 6 }));
      g.appendChild(el("rect", { class: s.sealed ? "frame" : "frame active", x: LABEL, y, width: all, height: ROW - 6 }));
      const pct = s.bytes > 0 ? ((s.liveBytes / s.bytes) * 100).toFixed(0) : "0";
      g.appendChild(el("text", { x: LABEL + all + 6, y: y + 14 }, `${bytes(s.liveBytes)} live / ${bytes(s.bytes)} (${pct}%)`));
      const title = el("title", {}, `segment ${s.id}: generation ${s.generation}, ${s.sealed ? "sealed" : "active"}, ${s.records} records, ${s.tombstones} tombstones, ${s.bytes - s.liveBytes} dead bytes`);
      g.appendChild(title);
      svg.appendChild(g);
    });
    host.replaceChildren(svg);
  }

  window.EngramChart = { drawSegments, bytes };
})();
