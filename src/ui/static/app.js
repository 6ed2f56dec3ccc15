// The inspector page. Plain browser JS, no build step. Every value from the store reaches the
// DOM through textContent (never innerHTML), every request carries the per-run token in a header,
// and every state change is a JSON POST that the user confirmed first.
"use strict";
(function () {
  const TOKEN = new URLSearchParams(location.search).get("token") || "";
  const POLL_MS = 1000;
  const $ = (id) => document.getElementById(id);
  const state = { scope: "global", key: null, signature: "", busy: false };

  function text(tag, value, cls) {
    const node = document.createElement(tag);
    node.textContent = value === null || value === undefined ? "-" : String(value);
    if (cls) node.className = cls;
    return node;
  }

  /** GETs a JSON API path; throws {code, message} on a refusal. */
  async function get(path, params) {
    const q = new URLSearchParams(params || {});
    const res = await fetch(`${path}?${q}`, { headers: { "X-Engram-Token": TOKEN }, cache: "no-store" });
    const body = await res.json();
    if (!res.ok) throw { code: body.error, message: body.message };
    return body;
  }

  /** POSTs an action; resolves to its result or throws {code, message}. */
  async function post(action, body) {
    const res = await fetch(`/api/${action}`, {
      method: "POST",
      headers: { "X-Engram-Token": TOKEN, "Content-Type": "application/json" },
      body: JSON.stringify(body || {}),
    });
    const reply = await res.json();
    if (!res.ok || reply.ok !== true) throw { code: reply.error, message: reply.message };
    return reply.result;
  }

  function showError(err) {
    const unreachable = err instanceof TypeError; // fetch itself failed: no answer at all
    $("error-code").textContent = unreachable ? "NO_ANSWER" : err && err.code ? err.code : "ERROR";
    $("error-message").textContent = unreachable ? "the inspector does not answer: was `engram ui` stopped?" : err && err.message ? err.message : String(err);
    $("error").hidden = false;
  }

  function showNotice(message) {
    $("notice").textContent = message;
    $("notice").hidden = false;
  }

  /** Asks for confirmation in the page's own dialog; resolves true on Confirm. */
  function confirmStep(message) {
    return new Promise((resolve) => {
      $("confirm-text").textContent = message;
      $("confirm").hidden = false;
      const done = (answer) => {
        $("confirm").hidden = true;
        $("confirm-yes").onclick = null;
        $("confirm-no").onclick = null;
        resolve(answer);
      };
      $("confirm-yes").onclick = () => done(true);
      $("confirm-no").onclick = () => done(false);
      $("confirm").onkeydown = (e) => e.key === "Escape" && done(false);
      $("confirm-no").focus();
    });
  }

  /** Runs a confirmed action, shows its result or its refusal, then refreshes everything. */
  async function act(message, action, body, describe) {
    if (!(await confirmStep(message))) return;
    $("error").hidden = true;
    try {
      const result = await post(action, body);
      showNotice(describe(result));
    } catch (err) {
      showError(err);
    }
    await refreshAll();
  }

  function buildTree(rows) {
    const children = new Map();
    for (const r of rows) {
      const list = children.get(r.parent) || [];
      list.push(r);
      children.set(r.parent, list);
    }
    const render = (parent) => {
      const ul = document.createElement("ul");
      for (const r of children.get(parent) || []) {
        const li = document.createElement("li");
        const b = document.createElement("button");
        b.type = "button";
        b.dataset.scope = r.scope;
        b.setAttribute("data-testid", `scope:${r.scope}`);
        const name = r.parent === null ? r.scope : r.scope.slice(r.parent === "global" ? 0 : r.parent.length + 1);
        b.appendChild(text("span", name));
        b.appendChild(document.createTextNode(" "));
        b.appendChild(text("span", `${r.liveKeys} live`, "count"));
        if (r.scope === state.scope) b.classList.add("selected");
        b.onclick = () => selectScope(r.scope);
        li.appendChild(b);
        if (children.has(r.scope)) li.appendChild(render(r.scope));
        ul.appendChild(li);
      }
      return ul;
    };
    const tree = render(null);
    $("scope-tree").replaceChildren(...tree.childNodes);
  }

  async function refreshTree() {
    const tree = await get("/api/scopes");
    buildTree(tree.scopes);
    $("tree-note").hidden = tree.enumerable && !tree.truncated;
    $("tree-note").textContent = tree.enumerable ? "More scopes than shown: use \"go to scope\"." : "This store cannot list its scopes here: use \"go to scope\".";
  }

  async function refreshKeys() {
    const { keys } = await get("/api/keys", { scope: state.scope });
    $("selected-scope").textContent = state.scope;
    const body = $("keys-body");
    const rows = keys.map((k) => {
      const tr = document.createElement("tr");
      tr.setAttribute("data-testid", `key:${k.origin}:${k.key}`);
      tr.appendChild(text("td", k.key, "key"));
      const st = document.createElement("td");
      st.appendChild(text("span", k.state, `state ${k.state}`));
      tr.appendChild(st);
      tr.appendChild(text("td", k.version));
      tr.appendChild(text("td", k.inherited ? `inherited from ${k.origin}` : "this scope", k.inherited ? "inherited" : ""));
      if (state.key && state.key.key === k.key && state.key.origin === k.origin) tr.classList.add("selected");
      tr.onclick = () => selectKey(k.key, k.origin);
      return tr;
    });
    body.replaceChildren(...rows);
    $("keys-empty").hidden = keys.length > 0;
  }

  function renderValue(v) {
    const fmt = $("bytes-format");
    $("key-value").hidden = v === null;
    if (v === null) {
      $("key-value").textContent = "";
      $("value-meta").textContent = "no readable value";
      fmt.hidden = true;
      return;
    }
    const cut = v.truncated ? ", first 64 KiB shown" : "";
    if (v.kind === "text") {
      fmt.hidden = true;
      $("value-meta").textContent = `text, ${v.bytes} bytes${cut}`;
      $("key-value").textContent = v.text;
    } else {
      fmt.hidden = false;
      $("value-meta").textContent = `bytes, ${v.bytes} bytes${cut}`;
      $("key-value").textContent = fmt.value === "base64" ? v.base64 : v.hex;
    }
  }

  async function refreshKey() {
    if (state.key === null) {
      $("key-detail").hidden = true;
      $("key-none").hidden = false;
      return;
    }
    const d = await get("/api/key", { scope: state.scope, origin: state.key.origin, key: state.key.key });
    state.key.detail = d;
    $("key-none").hidden = true;
    $("key-detail").hidden = false;
    $("key-name").textContent = d.key;
    $("key-origin").textContent = d.origin;
    $("key-read-from").textContent = d.readError ? `${d.readError.code}: ${d.readError.message}` : d.readFrom === null ? "NOT_FOUND" : d.readFrom;
    $("key-state").textContent = d.probe.state;
    $("key-state").className = `state ${d.probe.state}`;
    $("key-explanation").textContent = d.explanation;
    $("key-version").textContent = d.probe.version ?? "-";
    $("key-generation").textContent = d.probe.generation ?? "-";
    $("key-tombstone").textContent = d.probe.tombstoneSeq ?? "-";
    $("key-value-present").textContent = d.probe.valuePresent ? "present" : "absent";
    $("key-retention-present").textContent = d.probe.retentionPresent ? "present" : "absent";
    $("key-physical").textContent = String(d.probe.physicalRecords);
    $("key-expires").textContent = d.probe.expiresAt === null ? "never" : new Date(d.probe.expiresAt).toISOString();
    renderValue(d.value);
  }

  function renderSummary(s) {
    $("store-dir").textContent = s.dir;
    $("store-role").textContent = s.role;
    window.EngramChart.drawSegments($("segments-chart"), s.segments);
    const t = s.totals;
    const b = window.EngramChart.bytes;
    const pairs = [
      ["segments", s.segments.length + (s.segmentsTruncated ? "+" : "")], ["total", b(t.totalBytes)], ["live", b(t.liveBytes)],
      ["dead", b(t.deadBytes)], ["slots", `${t.slots} (${t.liveSlots} live)`], ["tombstones", t.tombstones],
      ["scopes", t.scopes], ["sequence", t.sequence], ["pending GC", `${t.pendingGcSegments} segments`], ["compactions", t.compactions],
    ];
    $("totals").replaceChildren(...pairs.flatMap(([k, v]) => [text("dt", k), text("dd", v)]));
  }

  async function refreshAll() {
    const s = await get("/api/summary");
    state.signature = s.signature;
    renderSummary(s);
    await refreshTree();
    await refreshKeys();
    await refreshKey();
    $("refreshed").textContent = `seq ${s.totals.sequence}, refreshed ${new Date().toLocaleTimeString()}`;
  }

  /** Polls the summary; reloads the views when the store's signature changed. */
  async function poll() {
    if (!state.busy) {
      state.busy = true;
      try {
        const s = await get("/api/summary");
        if (s.signature !== state.signature) await refreshAll();
      } catch (err) {
        showError(err);
      } finally {
        state.busy = false;
      }
    }
    setTimeout(poll, POLL_MS);
  }

  /** Shows `scope`; when the server refuses it (a bad name), shows why and goes back. */
  function selectScope(scope) {
    const previous = state.scope;
    state.scope = scope;
    state.key = null;
    refreshAll().catch((err) => {
      showError(err);
      if (previous === scope) return;
      state.scope = previous;
      refreshAll().catch(showError);
    });
  }

  function selectKey(key, origin) {
    state.key = { key, origin };
    Promise.all([refreshKeys(), refreshKey()]).catch(showError);
  }

  function wire() {
    $("error-close").onclick = () => { $("error").hidden = true; };
    $("bytes-format").onchange = () => state.key && state.key.detail && renderValue(state.key.detail.value);
    $("goto-form").onsubmit = (e) => {
      e.preventDefault();
      const s = $("goto-scope").value.trim();
      if (s !== "") selectScope(s);
    };
    $("forget-key-button").onclick = () => {
      if (state.key === null) return;
      const { key, origin } = state.key;
      act(`Forget key "${key}" in scope ${origin}? Reads stop returning it at once; its bytes are reclaimed later.`, "forget", { key, scope: origin },
        (r) => (r.tombstoneSeq === null ? `nothing live to forget: ${key}` : `forgot ${key} in ${origin}: tombstone seq ${r.tombstoneSeq}`));
    };
    $("forget-scope-button").onclick = () => {
      const scope = state.scope;
      const reclaim = $("reclaim-mode").value;
      act(`Forget scope ${scope} and every scope below it (${reclaim})?`, "forget-scope", { scope, reclaim },
        (r) => `erased ${scope}: ${r.slots} slots, seq ${r.tombstoneSeq}${r.reclaimedBytes === undefined ? "" : `, ${r.reclaimedBytes} bytes reclaimed`}`);
    };
    $("gc-button").onclick = () => act("Run gc now (reclaim by retention policy)?", "gc", {},
      (r) => `gc: ${r.segments.length} segments, ${r.recordsDropped} records dropped, ${r.retentionRecordsDropped} retention records dropped`);
    $("compact-button").onclick = () => {
      const mode = $("compact-mode").value;
      act(`Compact sealed segments now${mode ? ` (${mode})` : ""}?`, "compact", mode ? { mode } : {},
        (r) => `compact (${r.mode}): ${r.segments.length} segments, ${r.bytesBefore} -> ${r.bytesAfter} bytes`);
    };
  }

  wire();
  refreshAll().catch(showError).finally(() => setTimeout(poll, POLL_MS));
})();
