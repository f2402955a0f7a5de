// asof account site: plain JavaScript, same-origin requests only, no third-party code.
"use strict";

const $ = (id) => document.getElementById(id);

function text(tag, value) {
  const el = document.createElement(tag);
  el.textContent = value == null ? "—" : String(value);
  return el;
}

async function api(method, path, body) {
  const init = { method, headers: { accept: "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  let json = null;
  try { json = await res.json(); } catch (_) { /* not JSON */ }
  return { status: res.status, json };
}

// A first-party, cookie-less page-view count: the path only, nothing about the visitor.
// The pages the beacon counts (the confirmation page of a sign-in link is not one).
const COUNTED = ["/", "/sign-in", "/account", "/explore"];

function beacon() {
  if (!COUNTED.includes(location.pathname)) return;
  try {
    const data = JSON.stringify({ path: location.pathname });
    if (!navigator.sendBeacon("/site/beacon", new Blob([data], { type: "application/json" }))) {
      fetch("/site/beacon", { method: "POST", headers: { "content-type": "application/json" }, body: data, credentials: "omit", keepalive: true });
    }
  } catch (_) { /* counting never breaks a page */ }
}

async function home() {
  const { status, json } = await api("GET", "/v1/sample/news");
  const rows = $("example-rows");
  rows.replaceChildren();
  if (status !== 200 || !json) {
    const tr = document.createElement("tr");
    const td = text("td", "The sample could not be loaded just now.");
    td.colSpan = 4;
    tr.append(td);
    rows.append(tr);
    return;
  }
  for (const r of json.results.slice(0, 5)) {
    const tr = document.createElement("tr");
    // Columns every certified sample row fills (its available_at is null: never imputed).
    tr.append(text("td", r.id), text("td", r.form), text("td", date(r.published_at)), text("td", date(r.committed_at)));
    rows.append(tr);
  }
  $("example-version").textContent = `as of ${json.as_of || "now"}, corpus_version ${json.corpus_version}`;
}

function signIn() {
  const form = $("email-form");
  if (!form) return;
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const out = $("email-result");
    const button = form.querySelector("button");
    button.disabled = true;
    const { status, json } = await api("POST", "/v1/auth/email/start", { email: $("email").value });
    button.disabled = false;
    out.hidden = false;
    if (status === 200) {
      out.className = "notice ok";
      out.textContent = "Check your inbox: a sign-in link is on its way. It works once, within 15 minutes.";
    } else {
      out.className = "notice error";
      out.textContent = (json && json.error && json.error.message) || `Sign-in failed (${status}).`;
    }
    out.focus();
  });
}

function date(v) {
  return v ? v.replace("T", " ").replace(/\.\d+Z$|Z$/, " UTC") : null;
}

async function loadKeys() {
  const { status, json } = await api("GET", "/v1/keys");
  if (status === 401) { location.assign("/sign-in?error=session_ended"); return; }
  const body = $("keys");
  body.replaceChildren();
  for (const k of json.results) {
    const tr = document.createElement("tr");
    const state = k.revoked_at ? `revoked ${date(k.revoked_at)}` : date(k.expires_at) || "never";
    tr.append(text("td", k.name), text("td", k.prefix + "…"), text("td", date(k.created_at)), text("td", state), text("td", date(k.last_used_at) || "never"));
    const td = document.createElement("td");
    if (!k.revoked_at) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "danger";
      b.textContent = "Revoke";
      b.setAttribute("aria-label", `Revoke key ${k.name}`);
      b.addEventListener("click", async () => {
        if (!confirm(`Revoke the key "${k.name}"? Programs using it stop working within seconds.`)) return;
        const r = await api("DELETE", `/v1/keys/${encodeURIComponent(k.id)}`);
        if (r.status !== 200) showError("key-error", r);
        await loadKeys();
      });
      td.append(b);
    }
    tr.append(td);
    body.append(tr);
  }
}

// Shows a refused request's message (the envelope's error.message) in the alert `id`.
function showError(id, r) {
  const p = $(id);
  p.hidden = false;
  p.textContent = (r.json && r.json.error && r.json.error.message) || `Failed (${r.status}).`;
}

async function loadUsage() {
  const { status, json } = await api("GET", "/v1/billing/usage");
  const chart = $("usage");
  chart.replaceChildren();
  if (status !== 200 || !json) { $("usage-total").textContent = "Usage is not available just now."; return; }
  const days = new Map();
  for (const r of json.results) days.set(r.date, (days.get(r.date) || 0) + r.requests);
  const today = new Date();
  const series = [];
  for (let i = 29; i >= 0; i--) {
    const d = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - i)).toISOString().slice(0, 10);
    series.push([d, days.get(d) || 0]);
  }
  const max = Math.max(1, ...series.map(([, n]) => n));
  let total = 0;
  for (const [d, n] of series) {
    total += n;
    const bar = document.createElement("span");
    bar.style.height = `${(100 * n) / max}%`;
    bar.title = `${d}: ${n} requests`;
    chart.append(bar);
  }
  chart.setAttribute("aria-label", `Requests per day over the last 30 days: ${total} in all, at most ${max} in a day.`);
  $("usage-total").textContent = `${total} requests in the last 30 days.`;
}

async function account() {
  const me = await api("GET", "/v1/me");
  if (me.status === 401) { location.assign("/sign-in?error=session_ended"); return; }
  const u = me.json.results[0];
  $("who").textContent = `Signed in as ${u.email}, ${u.plan} plan: ${u.requests_per_minute} requests a minute, up to ${u.max_live_keys} live keys.`;
  await loadKeys();
  await loadUsage();
  $("create-key").addEventListener("submit", async (e) => {
    e.preventDefault();
    $("key-error").hidden = true;
    const body = { name: $("key-name").value };
    if ($("key-expiry").value) body.expires_at = `${$("key-expiry").value}T00:00:00Z`;
    const r = await api("POST", "/v1/keys", body);
    if (r.status !== 200) { showError("key-error", r); return; }
    $("new-secret").textContent = r.json.results[0].secret;
    $("new-key").hidden = false;
    $("copied").textContent = "";
    $("key-name").value = "";
    $("copy-secret").focus();
    await loadKeys();
  });
  $("copy-secret").addEventListener("click", async () => {
    const secret = $("new-secret").textContent;
    try {
      await navigator.clipboard.writeText(secret);
      $("copied").textContent = "Copied.";
    } catch (_) {
      const range = document.createRange();
      range.selectNodeContents($("new-secret"));
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      $("copied").textContent = "Selected: press Ctrl+C (or ⌘C) to copy.";
    }
  });
  const checkout = $("checkout");
  if (checkout) {
    checkout.addEventListener("submit", async (e) => {
      e.preventDefault();
      $("billing-error").hidden = true;
      const plan = checkout.querySelector("input[name=plan]:checked").value;
      const r = await api("POST", "/v1/billing/checkout", { plan_id: plan, attestation: $("attestation").checked });
      if (r.status === 200) { location.assign(r.json.results[0].url); return; }
      showError("billing-error", r);
    });
    $("manage-billing").addEventListener("click", async () => {
      $("billing-error").hidden = true;
      const r = await api("POST", "/v1/billing/portal");
      if (r.status === 200) { location.assign(r.json.results[0].url); return; }
      showError("billing-error", r);
    });
  }
  $("sign-out").addEventListener("click", async () => {
    await api("POST", "/v1/auth/logout");
    location.assign("/");
  });
}

document.addEventListener("DOMContentLoaded", () => {
  beacon();
  const page = document.body.dataset.page;
  if (page === "home") home();
  if (page === "sign-in") signIn();
  if (page === "account") account();
});
