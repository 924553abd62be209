// The live board: polls the monitor's JSON routes and redraws in place (no reload).
// The token comes from the URL fragment (#token=…, never sent to the server) or the form,
// stays in this tab's session storage, and is sent only as a bearer header to this origin.
"use strict";
(() => {
  const POLL_MS = 2000;
  const KEY = "llm-monitor-token";
  const $ = (id) => document.getElementById(id);
  const state = { bench: "", since: 0, changes: [], scored: null, at: null, rate: null };

  const frag = new URLSearchParams(location.hash.slice(1));
  let token = frag.get("token") || sessionStorage.getItem(KEY) || "";
  if (frag.has("token")) {
    sessionStorage.setItem(KEY, token);
    frag.delete("token");  // out of the address bar and the history
    const rest = frag.toString();
    history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  }
  state.bench = frag.get("b") || "";

  class Unauthorized extends Error {}

  async function get(path, as = "json") {
    const headers = token ? { Authorization: "Bearer " + token } : {};
    const r = await fetch(path, { headers, cache: "no-store", credentials: "omit" });
    if (r.status === 401) throw new Unauthorized("the token is missing or wrong");
    if (!r.ok) {  // the route's own reason when it gives one ({"error", "detail"})
      const why = await r.json().then((b) => b.detail || b.error, () => null);
      throw new Error(path.split("?")[0] + ": HTTP " + r.status + (why ? ": " + why : ""));
    }
    return as === "json" ? r.json() : as === "blob" ? r.blob() : r.text();
  }

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k.startsWith("data-")) e.setAttribute(k, v);
      else if (k === "title") e.title = v; else e[k] = v;
    }
    for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    return e;
  }

  const fmt = (x, d = 3) => (x === null || x === undefined) ? "–"
    : (typeof x === "number" && !isFinite(x)) ? "∞" : Number(x).toFixed(d);
  const sci = (x) => (x === null || x === undefined) ? "–" : (typeof x === "string") ? x
    : Math.abs(x) >= 1e4 || (x !== 0 && Math.abs(x) < 1e-2) ? x.toExponential(1) : x.toPrecision(3);
  const eNum = (x) => (typeof x === "string" || x === null) ? Infinity : x;

  function meter(fraction, label, done) {
    const f = Math.max(0, Math.min(1, isFinite(fraction) ? fraction : 1));
    const m = el("div", { class: "meter" + (done ? " done" : ""), title: label },
      el("i"), el("span", {}, label));
    m.firstChild.style.width = (100 * f).toFixed(1) + "%";
    m.setAttribute("role", "meter");
    m.setAttribute("aria-valuenow", f.toFixed(3));
    return m;
  }

  function card(label, value) { return el("div", { class: "card" }, label, el("b", {}, value)); }

  function showLogin(message) {
    const form = $("login");
    form.hidden = false;
    $("status").textContent = message;
  }

  // The verdict of a pair as the ranking route gives it: "resolved:<model>", "unresolved",
  // "undecidable", or any verdict the monitor adds; the kind is the word before the colon.
  const kindOf = (p) => p.verdict.split(":")[0];

  function renderSummary(rk) {
    const counts = {};
    for (const p of rk.pairs) counts[kindOf(p)] = (counts[kindOf(p)] || 0) + 1;
    const cards = [
      card("models", rk.models.length),
      card("adjacent pairs resolved (decided, final)", (counts.resolved || 0) + " / " + rk.pairs.length)];
    for (const [kind, n] of Object.entries(counts)) {
      if (kind !== "resolved" && kind !== "unresolved") cards.push(card("adjacent pairs " + kind, n));
    }
    const read = rk.models.filter((m) => m.standing);
    if (read.length) {
      cards.push(card("models settled (stop evaluating)",
        read.filter((m) => m.standing.settled).length + " / " + read.length));
    }
    cards.push(card("tiers", rk.tiers), card("design", rk.design || "items"),
      card("ranking", rk.resolved ? "resolved" : "unresolved"),
      card("scores in / s (this benchmark)", state.rate === null ? "…" : state.rate.toFixed(0)));
    $("summary").replaceChildren(...cards);
    const thr = rk.pairs.map((p) => p.e_threshold).filter((x) => typeof x === "number");
    const lo = Math.min(...thr), hi = Math.max(...thr);
    const thrText = !thr.length ? "–" : lo === hi ? sci(lo) : sci(lo) + "–" + sci(hi);
    $("legend").textContent = "A pair is resolved the first time its e-value E reaches its "
      + "threshold 1/γ = " + thrText + " (each pair's fixed share γ of α = " + rk.anytime.alpha
      + ", planned for " + rk.anytime.planned_models + " models; design " + (rk.design || "items")
      + "): decided at that paired item, and final — E dipping later does not undo it. "
      + "Rank sets and tiers follow from these decisions. Bars: q_AV and, for open pairs, "
      + "log E / log threshold, full at 1 (the right edge). †: δ̂ on the items both models have "
      + "is below 0; A stays above B by its mean over all its own items, or by the decisions taken.";
  }

  // A model's stop signal as the monitor words it (the same sentence as the HTML report):
  // "settled at item n of N (x% saved)", or what is still open; – below the top it reads.
  function standingCell(st) {
    if (!st) return el("td", { class: "name standing", title: "not read: below the top of the ranking the monitor follows" }, "–");
    return el("td", { class: "name standing" + (st.settled ? " settled" : ""), title: st.reason,
      "data-settled": st.settled ? "1" : "0" }, st.text);
  }

  function renderRanking(rk) {
    const rows = rk.models.map((m) => el("tr", { "data-model": m.model, class: m.tier % 2 ? "" : "tier-even" },
      el("td", {}, m.rank), el("td", { class: "name" }, m.model), el("td", {}, fmt(m.mean, 4)),
      el("td", {}, m.n.toLocaleString("en")), el("td", {}, "[" + m.rank_low + ", " + m.rank_high + "]"),
      el("td", {}, m.tier), standingCell(m.standing)));
    $("ranking").tBodies[0].replaceChildren(...rows);
    $("ranking-note").textContent = rk.top_resolved ? "the leader is resolved above every other model"
      : "no sole leader yet";
  }

  function verdictText(p) {
    const kind = kindOf(p);
    if (kind === "resolved") return "resolved: " + p.verdict.slice("resolved:".length);
    if (kind === "unresolved") return "open";
    return p.verdict;
  }

  function renderPairs(rk) {
    const rows = rk.pairs.map((p, i) => {
      const kind = kindOf(p);
      const decided = p.decided && p.decided.n ? p.decided : null;
      const e = eNum(p.e_value), thr = p.e_threshold;
      const evidence = decided ? 1 : e === Infinity ? 1 : Math.log(Math.max(e, 1)) / Math.log(thr);
      const bar = decided ? "decided: E " + sci(decided.e_value) + " ≥ " + sci(thr) + ", final"
        : kind === "undecidable" ? "no decision under this design"
        : "E " + sci(p.e_value) + " / " + sci(thr);
      const mark = p.delta < 0 ? " †" : "";
      return el("tr", { "data-pair": p.model_a + "|" + p.model_b, "data-verdict": p.verdict },
        el("td", {}, i + 1),
        el("td", { class: "name" }, p.model_a + " vs " + p.model_b),
        el("td", {}, p.n.toLocaleString("en")),
        el("td", { title: "cs [" + fmt(p.cs_low) + ", " + fmt(p.cs_high) + "]" }, (p.delta >= 0 ? "+" : "") + fmt(p.delta, 4) + mark),
        el("td", { class: "verdict " + (decided ? "resolved" : "unresolved"), title: p.undecidable || "" }, verdictText(p)),
        el("td", { class: "decided" }, decided ? "n=" + decided.n.toLocaleString("en") + ", final" : "–"),
        el("td", { class: "bar" }, meter(p.q_anytime, "q_AV " + fmt(p.q_anytime, 2), p.q_anytime >= 1)),
        el("td", { class: "bar" }, meter(evidence, bar, decided !== null)));
    });
    $("pairs").tBodies[0].replaceChildren(...rows);
  }

  function describe(c) {
    if (c.kind === "ranking") {
      return "ranking: " + (c.resolved ? "resolved" : c.unresolved_pairs + " adjacent pairs unresolved")
        + (c.tiers ? ", " + Math.max(...c.tiers) + " tiers" : "") + "; leader " + (c.models[0] || "–");
    }
    return c.model_a + " vs " + c.model_b + ": " + c.previous + " → " + c.verdict + " at n=" + c.n;
  }

  function renderChanges() {
    const items = state.changes.slice(-50).reverse().map((c) =>
      el("li", { value: c.change_id }, new Date(c.ts).toISOString().slice(11, 19) + " · " + describe(c)));
    $("changes").replaceChildren(...items);
  }

  // The ingest rate from the ranking already fetched: the scores its models hold (Σ n), per
  // second between two polls. (Reading /metrics for a counter cost megabytes and a second of
  // the server's CPU per poll on a board of many benchmarks.)
  function updateRate(rk) {
    const scored = rk.models.reduce((s, m) => s + m.n, 0);
    const now = performance.now();
    if (state.scored !== null && now > state.at) {
      state.rate = Math.max(0, (scored - state.scored) / ((now - state.at) / 1000));
    }
    state.scored = scored; state.at = now;
  }

  async function poll() {
    const { benchmarks } = await get("/v1/benchmarks");
    const sel = $("bench");
    if (sel.options.length !== benchmarks.length) {
      sel.replaceChildren(...benchmarks.map((b) => el("option", { value: b }, b)));
    }
    if (!benchmarks.includes(state.bench)) state.bench = benchmarks[0] || "";
    sel.value = state.bench;
    if (!state.bench) { $("status").textContent = "no results yet: POST /v1/results"; return; }
    const b = encodeURIComponent(state.bench);
    const [rk, ch] = await Promise.all([
      get("/v1/benchmarks/" + b + "/ranking"),
      get("/v1/changes?limit=1000&since=" + state.since + "&benchmark=" + b)]);
    state.changes.push(...ch.changes);
    state.changes = state.changes.slice(-200);
    state.since = ch.next_since;
    updateRate(rk);
    renderSummary(rk); renderRanking(rk); renderPairs(rk); renderChanges();
    document.body.dataset.models = String(rk.models.length);
    $("status").textContent = "updated " + new Date().toISOString().slice(11, 19) + " UTC";
  }

  async function loop() {
    try {
      await poll();
      $("login").hidden = true;
    } catch (err) {
      if (err instanceof Unauthorized) { showLogin("this monitor needs its token"); return; }
      $("status").textContent = "cannot reach the monitor (" + err.message + "); retrying";
    }
    setTimeout(loop, POLL_MS);
  }

  async function openReport() {
    if (!state.bench) return;
    $("status").textContent = "building the report of the live state…";
    try {
      const blob = await get("/v1/benchmarks/" + encodeURIComponent(state.bench) + "/report.html", "blob");
      const url = URL.createObjectURL(new Blob([blob], { type: "text/html" }));
      // A new tab where pop-ups are allowed, else this one (Back returns to the board).
      if (!window.open(url, "_blank")) location.assign(url);
      $("status").textContent = "report opened";
    } catch (err) {
      $("status").textContent = "report failed: " + err.message;
    }
  }

  $("bench").addEventListener("change", (ev) => {
    state.bench = ev.target.value; state.since = 0; state.changes = []; state.scored = null;
    state.rate = null;
    history.replaceState(null, "", "#b=" + encodeURIComponent(state.bench));
  });
  $("report").addEventListener("click", openReport);
  $("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("token").value;
    $("token").value = "";
    sessionStorage.setItem(KEY, token);
    $("login").hidden = true;
    loop();
  });
  loop();
})();
