// keylock dashboard: polls the JSON API and renders the list or lock page.
// No framework, nothing from the network; all text goes in with
// textContent, never as HTML (lock names and owners are user data).
"use strict";
(function () {
  const body = document.body;
  const cfg = {
    page: body.dataset.page,
    name: body.dataset.name,
    refresh: Number(body.dataset.refreshMs) || 1000,
    longHold: Number(body.dataset.longHoldMs) || 0,
    pageSize: Number(body.dataset.pageSize) || 100,
    forceUnlock: body.dataset.forceUnlock === "true",
  };
  const $ = (id) => document.getElementById(id);
  let paused = false, timer = 0, inflight = false;

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else e.setAttribute(k, v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
    return e;
  }

  // dur formats milliseconds for people: 850ms, 12.4s, 3m05s, 1h02m, 2d04h.
  function dur(ms) {
    if (ms < 0) return "–";
    if (ms < 1000) return ms + "ms";
    const s = ms / 1000;
    if (s < 60) return s.toFixed(1) + "s";
    const pad = (n) => String(Math.floor(n)).padStart(2, "0");
    if (s < 3600) return Math.floor(s / 60) + "m" + pad(s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h" + pad((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d" + pad((s % 86400) / 3600) + "h";
  }
  const ttl = (ms) => (ms < 0 ? "no expiry" : dur(ms));
  const kindBadge = (k) => el("span", { class: "badge kind-" + (k || "free") }, k || "free");

  function setStatus(ok, text) {
    $("live").className = "dot " + (paused ? "paused" : ok ? "ok" : "bad");
    $("updated").textContent = text;
  }
  function showError(msg) {
    const e = $("error");
    e.hidden = !msg;
    e.textContent = msg || "";
  }

  async function getJSON(url) {
    const r = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
    const j = await r.json().catch(() => ({ error: r.status + " " + r.statusText }));
    if (!r.ok) throw new Error(j.error || r.statusText);
    return j;
  }

  // poll runs fn now and then every cfg.refresh while the tab is visible
  // and not paused; one request at a time.
  function poll(fn) {
    async function tick() {
      clearTimeout(timer);
      if (paused || document.hidden || inflight) return;
      inflight = true;
      try {
        await fn();
        showError("");
        setStatus(true, "live · " + new Date().toLocaleTimeString());
      } catch (e) {
        showError("Cannot refresh: " + e.message);
        setStatus(false, "error · " + new Date().toLocaleTimeString());
      } finally {
        inflight = false;
        if (!paused && !document.hidden) timer = setTimeout(tick, cfg.refresh);
      }
    }
    document.addEventListener("visibilitychange", tick);
    $("pause").addEventListener("click", () => {
      paused = !paused;
      $("pause").textContent = paused ? "Resume" : "Pause";
      if (paused) setStatus(true, "paused");
      else tick();
    });
    tick();
    return tick;
  }

  // ---- the list of locks ----
  function listPage() {
    const params = new URLSearchParams(location.search);
    const state = {
      glob: params.get("glob") || "",
      offset: Math.max(0, Number(params.get("offset")) || 0),
      limit: Number(params.get("limit")) || cfg.pageSize,
      total: 0,
    };
    const glob = $("glob"), limit = $("limit");
    glob.value = state.glob;
    if (![...limit.options].some((o) => Number(o.value) === state.limit)) limit.append(el("option", {}, state.limit));
    limit.value = String(state.limit);
    const tbody = document.querySelector("#locks tbody");
    let refresh;

    function remember() {
      const p = new URLSearchParams();
      if (state.glob) p.set("glob", state.glob);
      if (state.offset) p.set("offset", state.offset);
      if (state.limit !== cfg.pageSize) p.set("limit", state.limit);
      const q = p.toString();
      history.replaceState(null, "", q ? "?" + q : location.pathname);
    }
    let typing = 0;
    glob.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => { state.glob = glob.value.trim(); state.offset = 0; remember(); refresh(); }, 250);
    });
    limit.addEventListener("change", () => { state.limit = Number(limit.value); state.offset = 0; remember(); refresh(); });
    $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); remember(); refresh(); });
    $("next").addEventListener("click", () => {
      if (state.offset + state.limit < state.total) { state.offset += state.limit; remember(); refresh(); }
    });

    function row(l) {
      const h = l.holders[0];
      let holder = "–";
      if (h) {
        holder = el("span", { title: h.owner }, h.client || h.owner);
        if (l.holders.length > 1) holder = el("span", {}, holder, el("span", { class: "muted" }, " +" + (l.holders.length - 1)));
      }
      const held = l.held_ms >= 0 ? el("span", { class: l.long ? "long-text" : "" }, dur(l.held_ms), l.long ? el("span", { class: "badge long" }, "long") : null) : "–";
      const permits = l.kind === "semaphore" ? l.in_use + " / " + (l.permits || "?") : "";
      const waiters = l.waiters > 0 ? el("span", { class: "badge waiting" }, l.waiters) : el("span", { class: "muted" }, "0");
      const href = "lock?name=" + encodeURIComponent(l.name);
      return el("tr", { "data-name": l.name, class: l.long ? "long" : l.held ? "" : "free" },
        el("td", { class: "mono name" }, el("a", { href }, l.name)),
        el("td", {}, kindBadge(l.kind)),
        el("td", { class: "holder" }, holder),
        el("td", { class: "num held" }, held),
        el("td", { class: "num" }, h ? ttl(h.ttl_ms) : "–"),
        el("td", { class: "num mono" }, l.token || (h && h.token) || "–"),
        el("td", { class: "num waiters" }, waiters),
        el("td", { class: "num" }, permits));
    }

    // Deadlocks: every matching lock with waiters is inspected, so every
    // fifth refresh, after the list's own request.
    let round = 0;
    async function deadlocks() {
      const j = await getJSON("api/deadlocks?" + new URLSearchParams({ glob: state.glob || "*" }));
      $("deadlocks").hidden = j.deadlocks.length === 0;
      $("cycles").replaceChildren(...j.deadlocks.map((d) => el("li", { class: "cycle" },
        d.since ? el("span", { class: "muted" }, "for at most " + dur(Date.now() - Date.parse(d.since)) + ": ") : null,
        ...d.steps.map((s, i) => el("span", { class: "step" }, i ? " · " : "",
          el("b", { title: s.owner }, s.client || s.owner), " holds ",
          el("a", { class: "mono", href: "lock?name=" + encodeURIComponent(s.holds) }, s.holds), ", waits for ",
          el("a", { class: "mono", href: "lock?name=" + encodeURIComponent(s.waits_for) }, s.waits_for))))));
    }

    refresh = poll(async () => {
      const q = new URLSearchParams({ glob: state.glob || "*", offset: state.offset, limit: state.limit });
      const j = await getJSON("api/locks?" + q);
      state.total = j.total;
      if (state.offset >= j.total && j.total > 0) { state.offset = 0; remember(); }
      tbody.replaceChildren(...j.locks.map(row));
      $("empty").hidden = j.locks.length > 0;
      const held = j.locks.filter((l) => l.held).length, waiting = j.locks.reduce((n, l) => n + l.waiters, 0);
      const long = j.locks.filter((l) => l.long).length;
      $("summary").textContent = j.total.toLocaleString() + " lock" + (j.total === 1 ? "" : "s") +
        (j.locks.length ? " · on this page: " + held + " held, " + waiting + " waiting" + (cfg.longHold ? ", " + long + " long (> " + dur(cfg.longHold) + ")" : "") : "");
      $("range").textContent = j.total ? (j.offset + 1).toLocaleString() + "–" + (j.offset + j.locks.length).toLocaleString() + " of " + j.total.toLocaleString() : "";
      $("prev").disabled = j.offset === 0;
      $("next").disabled = j.offset + j.locks.length >= j.total;
      if (round++ % 5 === 0) await deadlocks();
    });
  }

  // ---- one lock ----
  function lockPage() {
    const fact = (label, value, cls) => el("div", { class: "card " + (cls || "") }, el("div", { class: "label" }, label), el("div", { class: "value" }, value));
    const holders = document.querySelector("#holders tbody"), line = document.querySelector("#line tbody");
    const api = "api/lock?name=" + encodeURIComponent(cfg.name);

    function render(l) {
      const inUse = l.kind === "semaphore" ? [fact("Permits in use", l.in_use + " / " + (l.permits || "?"))] : [];
      $("facts").replaceChildren(
        fact("Kind", kindBadge(l.kind)),
        fact("State", l.held ? "held" : "free", l.held ? "held" : "free"),
        fact("Held for", l.held_ms >= 0 ? dur(l.held_ms) : "–", l.long ? "long" : ""),
        fact("Fencing token", l.token || "–", "token"),
        fact("Last token", l.last_token || "–", "token"),
        fact("Waiters", String(l.waiters), l.waiters > 0 ? "waiting" : ""),
        ...inUse);
      holders.replaceChildren(...(l.holders.length ? l.holders.map((h) =>
        el("tr", { class: h.long ? "long" : "" },
          el("td", { class: "mono" }, h.owner),
          el("td", {}, h.client || "–"),
          el("td", {}, h.service || "–"),
          el("td", {}, h.host || "–"),
          el("td", { class: "num" }, h.pid || "–"),
          el("td", {}, h.mode),
          el("td", { class: "num" }, h.count),
          el("td", { class: "num held" }, h.held_ms >= 0 ? el("span", { class: h.long ? "long-text" : "" }, dur(h.held_ms), h.long ? el("span", { class: "badge long" }, "long") : null) : "–"),
          el("td", { class: "num" }, ttl(h.ttl_ms)),
          el("td", { class: "num mono" }, h.token || "–"))) :
        [el("tr", {}, el("td", { colspan: 10, class: "muted" }, "Nobody holds this lock."))]));
      line.replaceChildren(...l.line.map((w, i) =>
        el("tr", {}, el("td", { class: "num" }, i + 1), el("td", { class: "mono" }, w.owner), el("td", {}, w.client || "–"),
          el("td", {}, w.mode), el("td", { class: "num" }, w.waited_ms >= 0 ? dur(w.waited_ms) : "–"),
          el("td", { class: "num" }, dur(w.ttl_ms)))));
      $("line").hidden = l.line.length === 0;
      let note = l.waiters + " waiter" + (l.waiters === 1 ? "" : "s");
      if (l.kind !== "fair" && l.waiting_clients > 0) note += " (" + l.waiting_clients + " client" + (l.waiting_clients === 1 ? "" : "s") + " subscribed to its wake-ups; each counts once however many of its callers wait)";
      if (l.line.length === 0) note += l.waiters ? "; no line is kept in Redis for this kind" : "";
      $("waitnote").textContent = note + ".";
    }
    const refresh = poll(async () => render(await getJSON(api)));

    if (!cfg.forceUnlock || !$("force")) return;
    const ask = $("force-ask"), confirm = $("force-confirm"), result = $("force-result");
    ask.addEventListener("click", () => { ask.hidden = true; confirm.hidden = false; });
    $("force-cancel").addEventListener("click", () => { ask.hidden = false; confirm.hidden = true; });
    $("force-go").addEventListener("click", async () => {
      confirm.hidden = true; ask.hidden = false;
      result.textContent = "Freeing…";
      try {
        const r = await fetch("api/force-unlock", {
          method: "POST", cache: "no-store", credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-Keylock-Dashboard": "1" },
          body: JSON.stringify({ name: cfg.name }),
        });
        const j = await r.json().catch(() => ({ error: r.status + " " + r.statusText }));
        if (!r.ok) throw new Error(j.error || r.statusText);
        let msg = j.freed ? "Freed: removed " + j.removed.holders.length + " holder(s)." : "It was not held: nothing removed.";
        if (j.woken_head) msg += " Woke the first waiter in line (" + j.woken_head + ").";
        else if (j.woken_clients) msg += " Woke " + j.woken_clients + " waiting client(s).";
        result.textContent = msg;
        result.className = "ok-text";
      } catch (e) {
        result.textContent = "Force unlock failed: " + e.message;
        result.className = "bad-text";
      }
      refresh();
    });
  }

  if (cfg.page === "lock") lockPage();
  else listPage();
})();
