// specsize web UI: what-if re-plans (debounced), the burst simulation job, copy buttons, the live view.
// Every request goes to this app's own origin; the CSRF token comes from the page's <meta>.
"use strict";

function csrf() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

async function post(url, body) {
  const response = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf()},
    body: JSON.stringify(body),
  });
  const data = await response.json();
  if (!response.ok) {
    const e = data.error || {};
    throw new Error((e.field ? e.field + ": " : "") + (e.problem || response.status) + (e.accepted ? " (accepted: " + e.accepted + ")" : ""));
  }
  return data;
}

function percent(x) { return x === null || x === undefined ? "-" : (100 * x).toFixed(1) + "%"; }

function setVerdict(element, verdict) {
  element.textContent = verdict;
  element.className = "verdict big " + verdict;
}

function whatIf(app) {
  const form = document.getElementById("whatif");
  if (!form) return;
  const name = app.dataset.name, version = Number(app.dataset.version);
  const changes = {};
  let timer = null, sequence = 0;
  const error = document.getElementById("whatif-error");

  async function replan() {
    const mine = ++sequence;
    try {
      const data = await post("/ui/whatif/" + encodeURIComponent(name), {version: version, changes: changes});
      if (mine !== sequence) return;  // a newer move already asked
      error.hidden = true;
      setVerdict(document.getElementById("verdict"), data.verdict);
      document.getElementById("headroom").textContent = "worst-case headroom " + data.headroom_text;
      document.getElementById("breaks-first").textContent = data.breaks_first;
      document.getElementById("elapsed").textContent = "re-planned in " + data.elapsed_ms + " ms" + (data.note ? ": " + data.note : "");
      const reasons = document.getElementById("reasons");
      reasons.replaceChildren(...data.reasons.map((r) => { const li = document.createElement("li"); li.textContent = r; return li; }));
      for (const [key, svg] of Object.entries(data.figures)) {
        const figure = document.getElementById("fig-" + key);
        if (figure) figure.innerHTML = svg;  // server-drawn SVG: no script, nothing external
      }
      document.getElementById("changes").value = JSON.stringify(changes);
    } catch (err) {
      if (mine !== sequence) return;
      error.textContent = err.message;
      error.hidden = false;
    }
  }

  form.addEventListener("input", (event) => {
    const input = event.target;
    if (!input.name) return;
    const output = document.getElementById("o-" + input.name);
    if (output) output.textContent = input.value;
    if (input.value === "") changes[input.name] = null;
    else if (input.type === "range" || input.name === "tp") changes[input.name] = Number(input.value);
    else changes[input.name] = input.value;
    clearTimeout(timer);
    timer = setTimeout(replan, 150);
  });
  form.addEventListener("submit", (event) => event.preventDefault());

  const simulate = document.getElementById("simulate");
  if (simulate) simulate.addEventListener("click", async () => {
    const figure = document.getElementById("fig-timeline");
    simulate.disabled = true;
    try {
      const request = await post("/ui/simulate/" + encodeURIComponent(name), {version: version, changes: changes});
      for (;;) {
        await new Promise((resolve) => setTimeout(resolve, 500));
        const response = await fetch(request.href, {credentials: "same-origin"});
        const job = await response.json();
        if (job.status === "done") { figure.innerHTML = job.timeline_svg; break; }
        if (job.status !== "queued" && job.status !== "running") { throw new Error((job.error || {}).problem || job.status); }
      }
    } catch (err) {
      error.textContent = err.message;
      error.hidden = false;
    } finally {
      simulate.disabled = false;
    }
  });
}

function copyButtons() {
  for (const button of document.querySelectorAll("button.copy")) {
    button.addEventListener("click", async () => {
      const text = document.getElementById(button.dataset.target).textContent;
      try { await navigator.clipboard.writeText(text); button.textContent = "Copied"; }
      catch (err) { window.getSelection().selectAllChildren(document.getElementById(button.dataset.target)); button.textContent = "Selected: press Ctrl+C"; }
    });
  }
}

function live(element) {
  const name = element.dataset.name, endpoint = element.dataset.endpoint;
  const status = document.getElementById("live-status");
  async function poll() {
    try {
      const response = await fetch("/ui/live/" + encodeURIComponent(name) + "?endpoint=" + encodeURIComponent(endpoint), {credentials: "same-origin"});
      const data = await response.json();
      if (!response.ok) throw new Error((data.error || {}).problem || response.status);
      document.getElementById("fig-live").innerHTML = data.figure;
      const o = data.check.observed;
      const facts = [["KV usage", percent(o.kv_usage_fraction)], ["preemptions", o.preemptions], ["acceptance rate", o.acceptance_rate],
                     ["verdict planned / now", data.check.planned_verdict + " / " + data.check.verdict_now]];
      document.getElementById("live-facts").replaceChildren(...facts.map(([k, v]) => { const li = document.createElement("li"); li.textContent = k + ": " + (v === null || v === undefined ? "not reported" : v); return li; }));
      document.getElementById("live-violations").replaceChildren(...data.check.violations.map((v) => { const li = document.createElement("li"); li.textContent = v; return li; }));
      status.textContent = data.diverges ? "Reality diverges from the plan." : "Reality agrees with the plan.";
      status.className = data.diverges ? "error" : "note";
    } catch (err) {
      status.textContent = "Cannot read the endpoint: " + err.message;
      status.className = "error";
    }
    setTimeout(poll, 5000);
  }
  poll();
}

document.addEventListener("DOMContentLoaded", () => {
  const app = document.getElementById("app");
  if (app) whatIf(app);
  copyButtons();
  const liveElement = document.getElementById("live");
  if (liveElement) live(liveElement);
});
