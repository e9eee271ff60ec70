// The telemetry service's page's script (index.html loads it as index.js from
// the same server, so the page's Content-Security-Policy can be
// script-src 'self': no inline script runs). It reads the JSON API and
// renders runs, series, the chart, sweeps and the selected run's details;
// index.html's comment lists the API, the URL hash and the test hooks.
"use strict";
(function () {
  const REFRESH_MS = 5000;
  const DEFAULT_BUCKETS = 200;
  const COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed",
                  "#0891b2", "#db2777", "#65a30d", "#4b5563", "#b45309"];
  const SVG_NS = "http://www.w3.org/2000/svg";
  const W = 900, H = 420;
  const M = {left: 78, right: 24, top: 16, bottom: 58};
  // The series a run opens on, the first present (else the first by name).
  const PREFERRED = ["learner/mean_return", "actor/episode_return",
                     "learner/steps_per_second"];
  // The run whose steps are Unix seconds (coordinator_process.cc).
  const SYSTEM_RUN = "system";

  const $ = (id) => document.getElementById(id);
  const view = {run: "", metric: "", aggregate: "", buckets: DEFAULT_BUCKETS,
                compare: [], sweep: ""};
  let sweeps = [];          // the coordinator's, with their trials
  let sweepScores = {};     // run -> last learner/mean_return (telemetry's)
  let runDetails = null;    // the coordinator's view of view.run, or null
  let runs = [];
  let series = [];        // of view.run
  let seriesRun = null;   // run whose series `series` holds
  let chartData = null;   // {key, series: [...]}
  let loading = false;
  let generation = 0;     // bumped when the view changes; stale replies are dropped
  const errors = {};      // source -> message

  // ---- helpers --------------------------------------------------------------

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function isNum(v) { return typeof v === "number" && isFinite(v); }

  // The API speaks the proto3 JSON mapping: int64 fields arrive as decimal
  // strings and non-finite doubles as "NaN", "Infinity" or "-Infinity".
  // Number() turns both into numbers; non-finite ones are gaps in a curve.
  function numbers(obj, keys) {
    for (const k of keys) obj[k] = Number(obj[k] ?? 0);
    return obj;
  }

  function fmtNum(v) {
    if (!isNum(v)) return "n/a";
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(2);
    if (Number.isInteger(v)) return String(v);
    return String(Number(v.toPrecision(4)));
  }

  function fmtStep(v) {
    const a = Math.abs(v);
    if (a >= 1e9) return String(Number((v / 1e9).toPrecision(3))) + "G";
    if (a >= 1e6) return String(Number((v / 1e6).toPrecision(3))) + "M";
    if (a >= 1e4) return String(Number((v / 1e3).toPrecision(3))) + "k";
    return String(Math.round(v * 1000) / 1000);
  }

  function fmtTime(ns) {
    if (!isNum(ns) || ns <= 0) return "";
    return new Date(ns / 1e6).toLocaleString();
  }

  // Runs newest first: by the number in their ids, highest first
  // (run-000010 before run-000009), the system run last.
  function newestFirst(a, b) {
    if ((a.run_id === SYSTEM_RUN) !== (b.run_id === SYSTEM_RUN)) {
      return a.run_id === SYSTEM_RUN ? 1 : -1;
    }
    return b.run_id.localeCompare(a.run_id, "en", {numeric: true});
  }

  // A step that is a wall-clock time, not env steps: Unix milliseconds
  // (coordinator/queue_wait_seconds, stored with each run's metrics; no env
  // step count gets there).
  function isClockStep(step) { return step >= 1e12 && step < 1e14; }

  // The env steps a run has reached, or null when not known: the
  // coordinator's count for the selected run, else the last step of its
  // series that are not at wall-clock times, else the run's last step
  // unless that is a wall-clock time (the runs list has only the largest
  // step over all its series, which a queue-wait point makes a time).
  function envStepOf(r) {
    if (r.run_id === SYSTEM_RUN) return null;
    if (runDetails && runDetails.run_id === r.run_id && runDetails.progress) {
      const steps = Number(runDetails.progress.env_steps);
      if (isNum(steps) && steps > 0) return steps;
    }
    if (seriesRun === r.run_id) {
      const steps = series.map((s) => s.last_step).filter((v) => isNum(v) && !isClockStep(v));
      if (steps.length) return Math.max(...steps);
    }
    return isNum(r.last_step) && !isClockStep(r.last_step) ? r.last_step : null;
  }

  // A RunState as people say it: "QUEUED"; the unset state a run's first
  // change comes from is its submission.
  function stateLabel(state) {
    if (state === undefined || state === null || state === "" || state === 0 ||
        state === "RUN_STATE_UNSPECIFIED") {
      return "submitted";
    }
    return String(state).replace(/^RUN_STATE_/, "");
  }

  function labelText(labels) {
    const keys = Object.keys(labels || {}).sort();
    return keys.map((k) => k + "=" + labels[k]).join(", ");
  }

  function setError(source, message) {
    if (message) errors[source] = message; else delete errors[source];
    const text = Object.keys(errors).map((k) => errors[k]).join("\n");
    const box = $("error");
    box.textContent = text;
    box.classList.toggle("visible", text !== "");
    document.body.setAttribute("data-state", text ? "error" : (loading ? "loading" : "ready"));
  }

  // With tokens on, the API needs one: opened as ...#token=<user token>,
  // the page keeps it for this tab and takes it out of the address bar.
  const TOKEN_KEY = "rl-token";
  (function takeToken() {
    const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
    if (!match) return;
    try { sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1])); } catch (e) {}
    // The rest of the hash (#token=...&run=run-000007) still says what to show.
    const rest = new URLSearchParams(location.hash.replace(/^#/, ""));
    rest.delete("token");
    const hash = rest.toString();
    history.replaceState(null, "", location.pathname + location.search +
                         (hash ? "#" + hash.replace(/%2F/gi, "/") : ""));
  })();
  function authHeaders() {
    let token = null;
    try { token = sessionStorage.getItem(TOKEN_KEY); } catch (e) {}
    return token ? {"Authorization": "Bearer " + token} : {};
  }

  async function getJSON(path) {
    let resp;
    try {
      resp = await fetch(path, {cache: "no-store", headers: authHeaders()});
    } catch (e) {
      throw new Error("cannot reach the telemetry service (" + e.message + ")");
    }
    const body = await resp.text();
    let data = null;
    try { data = body ? JSON.parse(body) : null; } catch (e) { data = null; }
    if (!resp.ok) {
      let msg = data && data.error ? data.error : (body || resp.statusText);
      if (resp.status === 401) {
        msg += " (open this page as " + location.origin + "/#token=<your user " +
               "token>; the embedded system's is in runs/auth/user.token)";
      }
      const err = new Error("HTTP " + resp.status + ": " + msg);
      err.status = resp.status;
      throw err;
    }
    if (data === null || typeof data !== "object") {
      throw new Error("bad JSON from " + path.split("?")[0]);
    }
    return data;
  }

  // ---- URL hash <-> view ------------------------------------------------------

  function readHash() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ""));
    const b = parseInt(p.get("buckets") || "", 10);
    // A link may name the run in the query instead (?run=run-000007).
    view.run = p.get("run") || new URLSearchParams(location.search).get("run") || "";
    view.metric = p.get("metric") || "";
    view.aggregate = p.get("aggregate") || "";
    view.buckets = b > 0 && b <= 10000 ? b : DEFAULT_BUCKETS;
    view.compare = (p.get("compare") || "").split(",")
        .filter((r) => r && r !== view.run).slice(0, COLORS.length);
    view.sweep = p.get("sweep") || "";
  }

  function hashOf(v) {
    const p = new URLSearchParams();
    if (v.run) p.set("run", v.run);
    if (v.metric) p.set("metric", v.metric);
    if (v.aggregate) p.set("aggregate", v.aggregate);
    if (v.buckets !== DEFAULT_BUCKETS) p.set("buckets", String(v.buckets));
    if (v.compare && v.compare.length) p.set("compare", v.compare.join(","));
    if (v.sweep) p.set("sweep", v.sweep);
    // Keep '/' readable in metric names.
    return "#" + p.toString().replace(/%2F/gi, "/");
  }

  function navigate(changes, replace) {
    const next = Object.assign({}, view, changes);
    const h = hashOf(next);
    if (h === location.hash) return;
    if (replace) {
      history.replaceState(null, "", h);
      onHashChange();
    } else {
      location.hash = h;  // fires hashchange
    }
  }

  function onHashChange() {
    const before = view.run;
    readHash();
    generation++;
    if (view.run !== before) { series = []; seriesRun = null; }
    chartData = null;
    if (view.run !== before) { overview = []; runDetails = null; }
    renderOverview();
    renderSweeps();
    renderRunDetails();
    renderRuns();
    renderSeries();
    renderControls();
    renderChart();
    refresh();
  }

  // ---- data -------------------------------------------------------------------

  async function refresh() {
    if (loading) { refresh.again = true; return; }
    loading = true;
    refresh.again = false;
    const gen = generation;
    document.body.setAttribute("data-state", "loading");
    try {
      await loadRuns();
      if (gen === generation) await loadSeries(gen);
      if (gen === generation) await loadChart(gen);
      if (gen === generation) await loadOverview(gen);
      if (gen === generation) await loadSweeps(gen);
      if (gen === generation) await loadRunDetails(gen);
      $("status").textContent = "updated " + new Date().toLocaleTimeString();
    } finally {
      loading = false;
      const failed = Object.keys(errors).length > 0;
      document.body.setAttribute("data-state", failed ? "error" : "ready");
      if (refresh.again || gen !== generation) refresh();
    }
  }

  async function loadRuns() {
    try {
      const data = await getJSON("api/runs");
      runs = (Array.isArray(data.runs) ? data.runs : []).map((r) =>
          numbers(r, ["num_series", "num_points", "last_step", "last_wall_time_ns"]));
      runs.sort(newestFirst);
      setError("runs", "");
    } catch (e) {
      setError("runs", "Could not load runs: " + e.message);
    }
    renderRuns();
    // No run chosen yet: show the newest (the one just trained), not the
    // system run's census.
    const newest = runs.find((r) => r.run_id !== SYSTEM_RUN) || runs[0];
    if (!view.run && newest) navigate({run: newest.run_id}, true);
  }

  async function loadSeries(gen) {
    if (!view.run) { series = []; seriesRun = null; renderSeries(); return; }
    try {
      const data = await getJSON("api/series?run=" + encodeURIComponent(view.run));
      if (gen !== generation) return;
      series = (Array.isArray(data.series) ? data.series : []).map((s) =>
          numbers(s, ["num_points", "last_step"]));
      seriesRun = view.run;
      setError("series", "");
    } catch (e) {
      if (gen !== generation) return;
      series = [];
      const known = runs.find((r) => r.run_id === view.run);
      if (e.status === 404 && known && !known.num_series) {
        seriesRun = view.run;  // a run without metrics yet: not an error
        setError("series", "");
      } else {
        seriesRun = null;
        setError("series", "Could not load series of run " + view.run + ": " + e.message);
      }
    }
    // No metric chosen yet: the return, else the speed, else the first
    // (one at env steps rather than the queue wait's single wall-clock point).
    if (!view.metric && series.length > 0) {
      const names = seriesNames();
      const preferred = PREFERRED.find((p) => names.some((n) => n.name === p));
      const first = names.find((n) => !isClockStep(n.lastStep)) || names[0];
      navigate({metric: preferred || first.name}, true);
      return;
    }
    renderSeries();
    renderControls();
    renderRuns();  // the selected run's env step, from its series
  }

  async function loadChart(gen) {
    if (!view.run || !view.metric || seriesRun !== view.run) {
      chartData = null; setError("query", ""); renderChart(); return;
    }
    const pathOf = (run) => {
      let path = "api/query?run=" + encodeURIComponent(run) +
          "&name=" + encodeURIComponent(view.metric) + "&buckets=" + view.buckets;
      if (view.aggregate) path += "&aggregate=" + encodeURIComponent(view.aggregate);
      return path;
    };
    const curvesOf = (run, data) => {
      const curves = Array.isArray(data.series) ? data.series : [];
      for (const s of curves) {
        s.run = run;
        s.buckets = (Array.isArray(s.buckets) ? s.buckets : []).map((b) =>
            numbers(b, ["min_step", "max_step", "count", "min", "max", "mean", "last"]));
      }
      return curves;
    };
    try {
      const data = await getJSON(pathOf(view.run));
      // Runs overlaid for comparison: one without this metric is named in
      // the legend, not an error of the view.
      const others = await Promise.all(view.compare.map((run) =>
          getJSON(pathOf(run)).then((d) => curvesOf(run, d), () => null)));
      if (gen !== generation) return;
      let curves = curvesOf(view.run, data);
      const missing = [];
      view.compare.forEach((run, i) => {
        if (others[i] && others[i].length) curves = curves.concat(others[i]);
        else missing.push(run);
      });
      chartData = {series: curves, missing: missing};
      setError("query", "");
    } catch (e) {
      if (gen !== generation) return;
      chartData = null;
      setError("query", "Could not query " + view.metric + ": " + e.message);
    }
    renderChart();
  }

  // The run at a glance: a small curve and the last value of each series
  // people look for (PREFERRED) that the run has, several at once. A series
  // labelled by policy (a run of several policies) gets a card per policy,
  // the mean over its other labels (actor); any other, one curve: the mean
  // over its one label key where it has one (actor/episode_return per
  // actor), else its first label set.
  // [{name, aggregate (what a click charts), policy (null: not by policy),
  //   points: [[step, mean]], last}]
  let overview = [];
  async function loadOverview(gen) {
    const entries = seriesRun === view.run ? seriesNames() : [];
    const wanted = PREFERRED.filter((p) => entries.some((n) => n.name === p));
    const merged = wanted.map((name) => {
      const keys = Array.from(entries.find((n) => n.name === name).labelKeys);
      if (keys.includes("policy")) return {byPolicy: true, keys: keys.filter((k) => k !== "policy")};
      return {byPolicy: false, keys: keys.length === 1 ? keys : []};
    });
    const got = await Promise.all(wanted.map((name, i) =>
      getJSON("api/query?run=" + encodeURIComponent(view.run) + "&name=" +
              encodeURIComponent(name) + "&buckets=60" +
              (merged[i].keys.length ? "&aggregate=" + encodeURIComponent(merged[i].keys.join(",")) : ""))
          .catch(() => null)));
    if (gen !== generation) return;
    overview = [];
    wanted.forEach((name, i) => {
      const all = got[i] && Array.isArray(got[i].series) ? got[i].series : [];
      const curves = merged[i].byPolicy ? all : all.slice(0, 1);
      for (const curve of curves) {
        if (!curve || !Array.isArray(curve.buckets)) continue;
        const buckets = curve.buckets.map((b) =>
            numbers(b, ["min_step", "max_step", "count", "min", "max", "mean", "last"]));
        const points = buckets.filter((b) => isNum(b.mean))
            .map((b) => [(b.min_step + b.max_step) / 2, b.mean]);
        const lastBucket = buckets[buckets.length - 1];
        overview.push({name: name, aggregate: merged[i].byPolicy ? merged[i].keys.join(",") : "",
                       policy: merged[i].byPolicy ? String((curve.labels || {}).policy || "") : null,
                       points: points, last: lastBucket ? lastBucket.last : NaN});
      }
    });
    renderOverview();
  }

  function renderOverview() {
    const box = $("overview");
    box.textContent = "";
    for (const o of overview) {
      const card = el("div", {"class": "glance", "data-name": o.name});
      const charted = o.name === view.metric && o.aggregate === view.aggregate;
      if (charted) card.classList.add("selected");
      card.appendChild(el("div", {"class": "glance-name"}, o.name));
      if (o.policy !== null) {
        card.setAttribute("data-policy", o.policy);
        card.appendChild(el("div", {"class": "glance-policy"},
                            o.policy ? "policy " + o.policy : "no policy label"));
      }
      card.appendChild(el("div", {"class": "glance-value"}, fmtNum(o.last)));
      const spark = svg("svg", {viewBox: "0 0 200 40", preserveAspectRatio: "none"});
      if (o.points.length > 0) {
        const xs = o.points.map((p) => p[0]), ys = o.points.map((p) => p[1]);
        const xa = Math.min(...xs), xb = Math.max(...xs);
        const ya = Math.min(...ys), yb = Math.max(...ys);
        const sx = (x) => xb > xa ? (x - xa) / (xb - xa) * 196 + 2 : 100;
        const sy = (y) => yb > ya ? 38 - (y - ya) / (yb - ya) * 36 : 20;
        spark.appendChild(svg("path", {"class": "glance-line", "data-points": String(o.points.length),
            d: o.points.map((p, i) => (i ? "L" : "M") + sx(p[0]).toFixed(1) + " " +
                                      sy(p[1]).toFixed(1)).join("")}));
      }
      card.appendChild(spark);
      card.addEventListener("click", () => {
        if (!charted) navigate({metric: o.name, aggregate: o.aggregate});
      });
      box.appendChild(card);
    }
  }

  // Unique metric names of the selected run, with their label sets.
  function seriesNames() {
    const byName = new Map();
    for (const s of series) {
      let e = byName.get(s.name);
      if (!e) { e = {name: s.name, sets: 0, points: 0, lastStep: 0, labelKeys: new Set()}; byName.set(s.name, e); }
      e.sets++;
      e.points += s.num_points || 0;
      e.lastStep = Math.max(e.lastStep, s.last_step || 0);
      for (const k of Object.keys(s.labels || {})) e.labelKeys.add(k);
    }
    return Array.from(byName.values()).sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  }

  // ---- sweeps and the coordinator's run ------------------------------------------

  function sweepOf(id) { return sweeps.find((w) => w.sweep_id === id) || null; }

  async function loadSweeps(gen) {
    try {
      const data = await getJSON("api/sweeps");
      if (gen !== generation) return;
      sweeps = Array.isArray(data.sweeps) ? data.sweeps : [];
      for (const w of sweeps) {
        w.trials = (Array.isArray(w.trials) ? w.trials : []).map((t) =>
            numbers(t, ["index", "config", "env_steps", "score"]));
      }
      setError("sweeps", "");
    } catch (e) {
      if (gen !== generation) return;
      sweeps = [];
      setError("sweeps", "Could not load sweeps: " + e.message);
    }
    // Trials without a score from the coordinator: their last mean return.
    const sweep = sweepOf(view.sweep);
    if (sweep) {
      const unscored = sweep.trials.filter((t) => t.run_id && !isNum(t.score));
      const got = await Promise.all(unscored.map((t) =>
          getJSON("api/query?run=" + encodeURIComponent(t.run_id) +
                  "&name=learner/mean_return&buckets=1").catch(() => null)));
      if (gen !== generation) return;
      unscored.forEach((t, i) => {
        const curve = got[i] && Array.isArray(got[i].series) ? got[i].series[0] : null;
        const b = curve && Array.isArray(curve.buckets) ? curve.buckets[curve.buckets.length - 1] : null;
        if (b) sweepScores[t.run_id] = Number(b.last);
      });
    }
    renderSweeps();
  }

  async function loadRunDetails(gen) {
    if (!view.run || view.run === SYSTEM_RUN) { runDetails = null; renderRunDetails(); return; }
    try {
      const data = await getJSON("api/run?run=" + encodeURIComponent(view.run));
      if (gen !== generation) return;
      runDetails = data;
    } catch (e) {
      if (gen !== generation) return;
      runDetails = null;  // no coordinator, or not its run: nothing to show
    }
    renderRunDetails();
    renderRuns();  // the selected run's env step, the coordinator's count
  }

  // A trial's score: the coordinator's, else its last learner/mean_return.
  function trialScore(t) {
    if (isNum(t.score)) return t.score;
    const v = sweepScores[t.run_id];
    return isNum(v) ? v : NaN;
  }

  function paramText(v) { return typeof v === "string" ? v : JSON.stringify(v); }

  function renderSweeps() {
    const ul = $("sweeps");
    ul.textContent = "";
    if (sweeps.length === 0) ul.appendChild(el("li", {"class": "empty"}, "none"));
    for (const w of sweeps) {
      const li = el("li", {"class": "sweep", "data-sweep": w.sweep_id});
      if (w.sweep_id === view.sweep) li.classList.add("selected");
      li.appendChild(el("span", {"class": "run-id"}, w.sweep_id));
      li.appendChild(el("span", {"class": "state state-" + (w.state || "UNKNOWN")}, w.state || ""));
      const done = w.trials.filter((t) => ["SUCCEEDED", "FAILED", "CANCELLED"].includes(t.state)).length;
      li.appendChild(el("div", {"class": "meta"},
          ((w.spec && w.spec.name) || "") + " · " + done + "/" + w.trials.length + " trials"));
      li.addEventListener("click", () => openSweep(w));
      ul.appendChild(li);
    }
    renderSweepView();
  }

  // A sweep opens on its best trial (else its first), the others' curves of
  // the mean return overlaid.
  function openSweep(w) {
    const runsOf = w.trials.filter((t) => t.run_id).map((t) => t.run_id);
    const first = w.best_run_id || runsOf[0] || view.run;
    navigate({sweep: w.sweep_id, run: first, metric: "learner/mean_return", aggregate: "",
              compare: runsOf.filter((r) => r !== first).slice(0, COLORS.length - 1)});
  }

  function isPbt(w) { return !!(w.spec && w.spec.method === "pbt"); }

  // "population-based training: round 2 of 8" (int64s come as strings).
  function pbtText(w) {
    if (!isPbt(w)) return "";
    const interval = Number((w.spec.pbt && w.spec.pbt.interval_steps) || 0);
    const budget = Number((w.spec.base && w.spec.base.total_env_steps) || 0);
    const rounds = interval > 0 ? Math.ceil(budget / interval) : 0;
    const ended = ["SUCCEEDED", "FAILED", "CANCELLED"].includes(w.state);
    return "population-based training: " + (ended ? "ended in round " : "round ") +
        (Number(w.pbt_round || 0) + 1) + " of " + rounds;
  }

  // A pbt trial's runs, round by round, then its weights' history.
  function lineageCell(t) {
    const td = el("td", {"class": "lineage"});
    td.appendChild(el("div", {"class": "rounds"}, "runs " + ((t.round_run_ids || []).join(" ") || "-")));
    for (const line of t.lineage || []) td.appendChild(el("div", {"class": "copy"}, line));
    return td;
  }

  function renderSweepView() {
    const box = $("sweep-view");
    const w = sweepOf(view.sweep);
    box.classList.toggle("visible", !!w);
    if (!w) return;
    const goalMin = w.spec && w.spec.metric && w.spec.metric.goal === "min";
    $("sweep-title").textContent = w.sweep_id + " · " + ((w.spec && w.spec.name) || "") +
        " · " + w.state + (w.best_run_id ? " · best " + w.best_run_id : "") +
        (pbtText(w) ? " · " + pbtText(w) : "") + (w.reason ? " · " + w.reason : "");
    // The parameter picker: every parameter of the sweep.
    const params = Object.keys((w.spec && w.spec.parameters) || {}).sort();
    const select = $("sweep-param");
    const chosen = params.includes(select.value) ? select.value : params[0] || "";
    select.textContent = "";
    for (const p of params) select.appendChild(el("option", {value: p}, p));
    select.value = chosen;
    // Scatter: the parameter against the score (categorical values spread).
    const chart = $("sweep-scatter");
    chart.textContent = "";
    const pts = [];
    for (const t of w.trials) {
      const v = (t.parameters || {})[chosen];
      const y = trialScore(t);
      if (v === undefined || !isNum(y)) continue;
      pts.push({t: t, v: v, y: y});
    }
    const numeric = pts.every((p) => typeof p.v === "number");
    const cats = numeric ? [] : Array.from(new Set(pts.map((p) => paramText(p.v)))).sort();
    const logX = numeric && w.spec.parameters[chosen] &&
        w.spec.parameters[chosen].distribution === "log_uniform" && pts.every((p) => p.v > 0);
    const xOf = (p) => numeric ? (logX ? Math.log10(p.v) : p.v) : cats.indexOf(paramText(p.v));
    const L = 60, R = 500, T = 12, B = 220;
    chart.appendChild(svg("line", {x1: L, y1: B, x2: R, y2: B}));
    chart.appendChild(svg("line", {x1: L, y1: T, x2: L, y2: B}));
    chart.appendChild(svg("text", {x: (L + R) / 2, y: 252, "text-anchor": "middle"},
        chosen + (logX ? " (log)" : "")));
    if (pts.length === 0) {
      chart.appendChild(svg("text", {x: (L + R) / 2, y: 120, "text-anchor": "middle"}, "no scores yet"));
    } else {
      const xs = pts.map(xOf), ys = pts.map((p) => p.y);
      const xa = Math.min(...xs), xb = Math.max(...xs), ya = Math.min(...ys), yb = Math.max(...ys);
      const sx = (x) => xb > xa ? L + 10 + (x - xa) / (xb - xa) * (R - L - 20) : (L + R) / 2;
      const sy = (y) => yb > ya ? B - 10 - (y - ya) / (yb - ya) * (B - T - 20) : (T + B) / 2;
      chart.appendChild(svg("text", {x: L - 6, y: sy(yb) + 4, "text-anchor": "end"}, fmtNum(yb)));
      chart.appendChild(svg("text", {x: L - 6, y: sy(ya) + 4, "text-anchor": "end"}, fmtNum(ya)));
      chart.appendChild(svg("text", {x: sx(xa), y: B + 16, "text-anchor": "middle"},
          numeric ? fmtNum(pts[xs.indexOf(xa)].v) : cats[0]));
      if (xb > xa) chart.appendChild(svg("text", {x: sx(xb), y: B + 16, "text-anchor": "middle"},
          numeric ? fmtNum(pts[xs.indexOf(xb)].v) : cats[cats.length - 1]));
      for (const p of pts) {
        const c = svg("circle", {"class": "point", r: 5, cx: sx(xOf(p)).toFixed(1), cy: sy(p.y).toFixed(1),
            "data-run": p.t.run_id, "data-x": paramText(p.v), "data-y": String(p.y)});
        if (p.t.run_id === w.best_run_id) c.classList.add("best");
        if ((p.t.reason || "").includes("stopped early")) c.classList.add("stopped");
        c.appendChild(svg("title", {}, p.t.run_id + ": " + chosen + "=" + paramText(p.v) +
            ", score " + fmtNum(p.y)));
        c.addEventListener("click", () => navigate({run: p.t.run_id, metric: "learner/mean_return"}));
        chart.appendChild(c);
      }
    }
    // The trials, best first.
    const table = $("sweep-trials");
    table.textContent = "";
    const head = el("tr");
    const headers = ["trial", "run", "state", "env steps", "score", "parameters", "reason"];
    if (isPbt(w)) headers.push("lineage");
    for (const h of headers) head.appendChild(el("th", {}, h));
    table.appendChild(head);
    const sorted = w.trials.slice().sort((a, b) => {
      const x = trialScore(a), y = trialScore(b);
      if (!isNum(x) || !isNum(y)) return isNum(x) ? -1 : isNum(y) ? 1 : a.index - b.index;
      return goalMin ? x - y : y - x;
    });
    for (const t of sorted) {
      const tr = el("tr", {"class": "trial", "data-run": t.run_id || "", "data-index": String(t.index)});
      const params = Object.keys(t.parameters || {}).sort()
          .map((k) => k + "=" + paramText(t.parameters[k])).join(" ");
      for (const cell of [String(t.index), t.run_id || "-", t.state, String(t.env_steps),
                          fmtNum(trialScore(t)), params, t.reason || ""]) {
        tr.appendChild(el("td", {}, cell));
      }
      if (isPbt(w)) tr.appendChild(lineageCell(t));
      if (t.run_id) tr.addEventListener("click", () => navigate({run: t.run_id}));
      table.appendChild(tr);
    }
  }

  // The coordinator's view of the selected run: state, why it ended, its
  // state changes and its run file.
  function renderRunDetails() {
    const box = $("run-details");
    box.textContent = "";
    const r = runDetails;
    if (!r || r.run_id !== view.run) return;
    box.setAttribute("data-state", r.state || "");
    box.appendChild(el("h3", {}, "Run " + r.run_id));
    const line = el("div");
    const state = String(r.state || "").replace(/^RUN_STATE_/, "");
    line.appendChild(el("span", {"class": "state state-" + (state || "UNKNOWN")}, state));
    line.appendChild(document.createTextNode(" owner " + (r.owner || "-") +
        (r.checkpoint_dir ? " · checkpoints " + r.checkpoint_dir : "")));
    box.appendChild(line);
    if (r.failure_reason) box.appendChild(el("div", {"class": "reason"}, r.failure_reason));
    const history = Array.isArray(r.history) ? r.history : [];
    if (history.length) {
      box.appendChild(el("h3", {}, "History"));
      const ul = el("ul", {"class": "history"});
      for (const h of history) {
        const from = stateLabel(h.from_state), to = stateLabel(h.to_state);
        // "submitted → QUEUED", not "submitted → QUEUED: submitted".
        const reason = h.reason && !(from === "submitted" && h.reason === "submitted")
            ? ": " + h.reason : "";
        ul.appendChild(el("li", {"data-from": from, "data-to": to},
            (h.time ? new Date(h.time).toLocaleString() + " " : "") +
            from + " → " + to + reason));
      }
      box.appendChild(ul);
    }
    if (r.spec) {
      box.appendChild(el("h3", {}, "Run file"));
      box.appendChild(el("pre", {"class": "run-file"}, JSON.stringify(r.spec, null, 2)));
    }
  }

  // ---- rendering ----------------------------------------------------------------

  function renderRuns() {
    const ul = $("runs");
    ul.textContent = "";
    if (runs.length === 0) {
      ul.appendChild(el("li", {"class": "empty"}, errors.runs ? "unavailable" : "no runs yet"));
      return;
    }
    for (const r of runs) {
      const state = r.state || "";
      const li = el("li", {"class": "run", "data-run": r.run_id, "data-state": state});
      if (r.run_id === view.run) li.classList.add("selected");
      li.appendChild(el("span", {"class": "run-id"}, r.run_id));
      const badge = el("span", {"class": "state state-" + (state || "UNKNOWN")}, state || "unknown");
      li.appendChild(badge);
      const meta = el("div", {"class": "meta"},
          (r.num_series || 0) + " series · " + (r.num_points || 0) + " points");
      const steps = envStepOf(r);
      if (steps !== null) {
        meta.appendChild(el("span", {"class": "run-step", "data-step": String(steps)},
                            " · step " + fmtStep(steps)));
      }
      li.appendChild(meta);
      const t = fmtTime(r.last_wall_time_ns);
      if (t) li.appendChild(el("div", {"class": "meta"}, "last " + t));
      if (r.run_id !== view.run) {
        // Overlay this run's curves of the metric shown, for comparison.
        const label = el("label", {"class": "meta overlay"});
        const box = el("input", {type: "checkbox", "class": "overlay-toggle", "data-run": r.run_id});
        box.checked = view.compare.includes(r.run_id);
        label.appendChild(box);
        label.appendChild(document.createTextNode(" compare"));
        label.addEventListener("click", (ev) => ev.stopPropagation());
        box.addEventListener("change", () => {
          const compare = view.compare.filter((c) => c !== r.run_id);
          if (box.checked) compare.push(r.run_id);
          navigate({compare: compare});
        });
        li.appendChild(label);
      }
      li.addEventListener("click", () => {
        if (r.run_id !== view.run) navigate({run: r.run_id, metric: "", aggregate: ""});
      });
      ul.appendChild(li);
    }
  }

  function renderSeries() {
    const ul = $("series");
    ul.textContent = "";
    $("series-run").textContent = view.run ? "of " + view.run : "";
    if (!view.run) { ul.appendChild(el("li", {"class": "empty"}, "select a run")); return; }
    if (seriesRun !== view.run) {
      ul.appendChild(el("li", {"class": "empty"}, errors.series ? "unavailable" : "loading…"));
      return;
    }
    const names = seriesNames();
    if (names.length === 0) { ul.appendChild(el("li", {"class": "empty"}, "no series")); return; }
    for (const n of names) {
      const li = el("li", {"class": "series", "data-name": n.name, "data-label-sets": String(n.sets)});
      if (n.name === view.metric) li.classList.add("selected");
      li.appendChild(el("div", {"class": "series-name"}, n.name));
      let meta = n.points + " points";
      if (isClockStep(n.lastStep)) meta += " · at " + new Date(n.lastStep).toLocaleString();
      else if (view.run !== SYSTEM_RUN) meta += " · step " + fmtStep(n.lastStep);
      if (n.sets > 1) meta += " · " + n.sets + " label sets";
      li.appendChild(el("div", {"class": "meta"}, meta));
      li.addEventListener("click", () => {
        if (n.name !== view.metric) navigate({metric: n.name, aggregate: ""});
      });
      ul.appendChild(li);
    }
  }

  function renderControls() {
    const sel = $("aggregate");
    const entry = seriesNames().find((n) => n.name === view.metric);
    const keys = new Set(entry ? Array.from(entry.labelKeys) : []);
    if (view.aggregate) keys.add(view.aggregate);
    while (sel.options.length > 1) sel.remove(1);
    for (const k of Array.from(keys).sort()) sel.add(new Option(k, k));
    sel.value = view.aggregate;
    const b = $("buckets");
    if (!Array.from(b.options).some((o) => o.value === String(view.buckets))) {
      b.add(new Option(String(view.buckets), String(view.buckets)));
    }
    b.value = String(view.buckets);
  }

  // Round tick values, about `n` of them, covering [lo, hi].
  function ticks(lo, hi, n) {
    if (!(hi > lo)) return [lo];
    const raw = (hi - lo) / n;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
      out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    }
    return out;
  }

  function placeholder(chart, text) {
    chart.appendChild(svg("text", {"class": "placeholder", x: W / 2, y: H / 2, "text-anchor": "middle"}, text));
  }

  function renderChart() {
    const chart = $("chart");
    chart.textContent = "";
    $("legend").textContent = "";
    $("readout").textContent = "";
    $("chart-title").textContent = view.metric
        ? view.metric + (view.aggregate ? " (mean over " + view.aggregate + ")" : "")
        : "no metric selected";
    chart.setAttribute("data-series", "0");
    if (!view.metric) { placeholder(chart, view.run ? "select a metric" : "select a run"); return; }
    if (!chartData) { placeholder(chart, errors.query || errors.series ? "no data" : "loading…"); return; }
    const list = chartData.series.filter((s) => Array.isArray(s.buckets) && s.buckets.length > 0);
    chart.setAttribute("data-series", String(list.length));
    if (list.length === 0) { placeholder(chart, "no points"); return; }

    // Ranges over every finite value shown.
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    const showBand = $("show-band").checked, showLast = $("show-last").checked;
    for (const s of list) {
      for (const b of s.buckets) {
        x0 = Math.min(x0, b.min_step); x1 = Math.max(x1, b.max_step);
        const vals = [b.mean];
        if (showBand) vals.push(b.min, b.max);
        if (showLast) vals.push(b.last);
        for (const v of vals) if (isNum(v)) { y0 = Math.min(y0, v); y1 = Math.max(y1, v); }
      }
    }
    if (!isFinite(y0)) { y0 = 0; y1 = 1; }
    if (y1 === y0) { const d = Math.abs(y0) * 0.1 || 1; y0 -= d; y1 += d; }
    else { const pad = (y1 - y0) * 0.05; y0 -= pad; y1 += pad; }
    if (x1 === x0) { x0 -= 1; x1 += 1; }

    // Wall-clock steps: Unix milliseconds (no env step count gets there),
    // or the system run's Unix seconds. Their ticks are clock times.
    const msPerStep = x0 >= 1e12 && x1 < 1e14 ? 1
        : (view.run === SYSTEM_RUN && x0 >= 1e9 && x1 < 1e11 ? 1000 : 0);
    chart.setAttribute("data-x-axis", msPerStep ? "time" : "step");
    const fmtX = (v) => {
      if (!msPerStep) return fmtStep(v);
      const d = new Date(v * msPerStep);
      return (x1 - x0) * msPerStep > 2 * 86400e3
          ? d.toLocaleDateString([], {month: "short", day: "numeric"})
          : d.toLocaleTimeString([], {hour: "2-digit", minute: "2-digit",
                                      second: (x1 - x0) * msPerStep < 600e3 ? "2-digit" : undefined});
    };

    const px = (x) => M.left + (x - x0) / (x1 - x0) * (W - M.left - M.right);
    const py = (y) => H - M.bottom - (y - y0) / (y1 - y0) * (H - M.top - M.bottom);
    const mid = (b) => (b.min_step + b.max_step) / 2;
    const f = (v) => v.toFixed(1);

    // Grid and axes.
    const grid = svg("g", {"class": "grid"});
    const xAxis = svg("g", {"class": "axis x-axis"});
    const yAxis = svg("g", {"class": "axis y-axis"});
    for (const t of ticks(x0, x1, 8)) {
      const x = px(t);
      grid.appendChild(svg("line", {x1: f(x), x2: f(x), y1: M.top, y2: H - M.bottom}));
      xAxis.appendChild(svg("line", {x1: f(x), x2: f(x), y1: H - M.bottom, y2: H - M.bottom + 5}));
      xAxis.appendChild(svg("text", {"class": "tick", x: f(x), y: H - M.bottom + 18, "text-anchor": "middle"}, fmtX(t)));
    }
    for (const t of ticks(y0, y1, 6)) {
      const y = py(t);
      grid.appendChild(svg("line", {x1: M.left, x2: W - M.right, y1: f(y), y2: f(y)}));
      yAxis.appendChild(svg("line", {x1: M.left - 5, x2: M.left, y1: f(y), y2: f(y)}));
      yAxis.appendChild(svg("text", {"class": "tick", x: M.left - 8, y: f(y + 4), "text-anchor": "end"}, fmtNum(t)));
    }
    xAxis.appendChild(svg("path", {d: "M" + M.left + " " + (H - M.bottom) + "H" + (W - M.right)}));
    yAxis.appendChild(svg("path", {d: "M" + M.left + " " + M.top + "V" + (H - M.bottom)}));
    xAxis.appendChild(svg("text", {"class": "axis-label x-label", x: (M.left + W - M.right) / 2, y: H - 10, "text-anchor": "middle"},
        msPerStep ? "time (wall clock)" : "step"));
    yAxis.appendChild(svg("text", {"class": "axis-label y-label", x: 0, y: 0, "text-anchor": "middle",
        transform: "translate(16 " + ((M.top + H - M.bottom) / 2) + ") rotate(-90)"}, "value"));
    chart.appendChild(grid);
    chart.appendChild(xAxis);
    chart.appendChild(yAxis);

    // A polyline through the finite values, broken where they are not.
    function linePath(buckets, key, xOf) {
      let d = "", pen = false, n = 0;
      for (const b of buckets) {
        const v = b[key];
        if (!isNum(v)) { pen = false; continue; }
        d += (pen ? "L" : "M") + f(xOf(b)) + " " + f(py(v));
        pen = true; n++;
      }
      return {d: d, n: n};
    }
    // Closed min/max areas, one per run of finite buckets.
    function bandPath(buckets) {
      let d = "", run = [];
      const flush = () => {
        if (run.length === 0) return;
        const xs = run.length === 1
            ? [[run[0].min_step, run[0]], [run[0].max_step, run[0]]]
            : run.map((b) => [mid(b), b]);
        d += "M" + xs.map(([x, b]) => f(px(x)) + " " + f(py(b.max))).join("L");
        d += "L" + xs.reverse().map(([x, b]) => f(px(x)) + " " + f(py(b.min))).join("L") + "Z";
        run = [];
      };
      for (const b of buckets) {
        if (isNum(b.min) && isNum(b.max)) run.push(b); else flush();
      }
      flush();
      return d;
    }

    const plot = svg("g", {"class": "plot"});
    // A curve of an overlaid run is named by its run.
    const nameOf = (s) => {
      const lbl = labelText(s.labels);
      if (s.run === view.run) return lbl;
      return s.run + (lbl ? ": " + lbl : "");
    };
    list.forEach((s, i) => {
      const color = COLORS[i % COLORS.length];
      const lbl = nameOf(s);
      const g = svg("g", {"class": "series", "data-index": String(i), "data-labels": lbl,
                          "data-run": s.run});
      if (showBand) {
        g.appendChild(svg("path", {"class": "band", d: bandPath(s.buckets), fill: color,
            "fill-opacity": list.length > 1 ? "0.08" : "0.18"}));
      }
      const mean = linePath(s.buckets, "mean", (b) => px(mid(b)));
      g.appendChild(svg("path", {"class": "mean-line", d: mean.d, stroke: color,
          "data-points": String(mean.n), "data-buckets": String(s.buckets.length)}));
      if (showLast) {
        const last = linePath(s.buckets, "last", (b) => px(b.max_step));
        g.appendChild(svg("path", {"class": "last-line", d: last.d, stroke: color,
            "data-points": String(last.n)}));
      }
      plot.appendChild(g);
      const item = el("span", {"class": "legend-item"});
      item.appendChild(el("span", {"class": "swatch", style: "background:" + color}));
      item.appendChild(document.createTextNode((lbl || s.name) + " (" + s.buckets.length + " buckets)"));
      $("legend").appendChild(item);
    });
    chart.appendChild(plot);
    for (const run of chartData.missing || []) {
      $("legend").appendChild(el("span", {"class": "legend-item missing", "data-run": run},
          run + ": no " + view.metric));
    }

    // Hover read-out of the nearest bucket of each series.
    const cursor = svg("line", {"class": "cursor", y1: M.top, y2: H - M.bottom, visibility: "hidden"});
    chart.appendChild(cursor);
    const overlay = svg("rect", {x: M.left, y: M.top, width: W - M.left - M.right,
        height: H - M.top - M.bottom, fill: "transparent"});
    overlay.addEventListener("mousemove", (ev) => {
      const pt = chart.createSVGPoint();
      pt.x = ev.clientX; pt.y = ev.clientY;
      const loc = pt.matrixTransform(chart.getScreenCTM().inverse());
      const step = x0 + (loc.x - M.left) / (W - M.left - M.right) * (x1 - x0);
      const lines = [];
      let cx = null;
      for (const s of list) {
        let best = s.buckets[0];
        for (const b of s.buckets) if (Math.abs(mid(b) - step) < Math.abs(mid(best) - step)) best = b;
        if (cx === null) cx = px(mid(best));
        lines.push((nameOf(s) || s.name) + "  steps " + best.min_step + "–" + best.max_step +
            "  n=" + best.count + "  min " + fmtNum(best.min) + "  mean " + fmtNum(best.mean) +
            "  max " + fmtNum(best.max) + "  last " + fmtNum(best.last));
      }
      cursor.setAttribute("x1", f(cx)); cursor.setAttribute("x2", f(cx));
      cursor.setAttribute("visibility", "visible");
      $("readout").textContent = lines.join("\n");
    });
    overlay.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); });
    chart.appendChild(overlay);
  }

  // ---- wiring ---------------------------------------------------------------------

  $("aggregate").addEventListener("change", (e) => navigate({aggregate: e.target.value}));
  $("buckets").addEventListener("change", (e) => navigate({buckets: parseInt(e.target.value, 10)}));
  $("show-last").addEventListener("change", renderChart);
  $("show-band").addEventListener("change", renderChart);
  $("sweep-param").addEventListener("change", renderSweepView);
  window.addEventListener("hashchange", onHashChange);
  setInterval(() => {
    if ($("auto-refresh").checked && !document.hidden) refresh();
  }, REFRESH_MS);

  readHash();
  renderSeries();
  renderControls();
  renderChart();
  refresh();
})();
