// The run viewer's script: follows a run's event stream, appends trace rows (built with
// textContent only, never parsed as HTML) and refreshes the parts of the page the server
// renders (graph statuses, steps, human steps, costs) when the run moves.
"use strict";
(function () {
  var body = document.body;
  var runId = body.dataset.run;
  if (!runId || body.dataset.live !== "1" || !window.EventSource) {
    return;
  }
  var MAX_ROWS = 1000;
  var VALUE_CHARS = 600;
  var base = "/ui/runs/" + encodeURIComponent(runId);
  var since = parseInt(body.dataset.since || "0", 10) || 0;

  function clip(text) {
    var chars = Array.from(text);
    return chars.length > VALUE_CHARS ? chars.slice(0, VALUE_CHARS).join("") + "\u2026" : text;
  }

  // The same text the server writes in a row's detail cell.
  function detail(payload) {
    var lines = [];
    var call = payload && payload.call;
    if (call && typeof call === "object") {
      lines.push((call.inputTokens || 0) + " in / " + (call.outputTokens || 0) +
        " out tokens, $" + (call.costUsd || 0));
    }
    [["in", "inputJson"], ["out", "outputJson"], ["error", "error"]].forEach(function (pair) {
      var value = payload ? payload[pair[1]] : null;
      if (value === undefined || value === null) { return; }
      lines.push(pair[0] + ": " + clip(typeof value === "string" ? value : JSON.stringify(value)));
    });
    if (lines.length === 0) { lines.push(clip(JSON.stringify(payload))); }
    return lines.join("\n");
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function when(ms) {
    var d = new Date(ms);
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " +
      pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds());
  }

  function appendTrace(trace) {
    var rows = document.getElementById("trace-rows");
    if (!rows || typeof trace.seq !== "number" || trace.seq <= since) { return; }
    since = trace.seq;
    var payload = trace.payload || {};
    var agent = (payload.node && payload.node.agentKey) || trace.nodeId || trace.activity || "";
    var tool = payload.toolName || trace.model || "";
    var tr = document.createElement("tr");
    tr.className = "trace fresh";
    tr.classList.add("kind-" + String(trace.kind).replace(/[^a-z_]/g, ""));
    tr.dataset.seq = String(trace.seq);
    [String(trace.seq), when(trace.createdAt), agent, trace.kind, tool].forEach(function (text) {
      var td = document.createElement("td");
      td.textContent = String(text);
      tr.appendChild(td);
    });
    var cell = document.createElement("td");
    var pre = document.createElement("pre");
    pre.textContent = detail(payload);
    cell.appendChild(pre);
    tr.appendChild(cell);
    rows.appendChild(tr);
    while (rows.children.length > MAX_ROWS) { rows.removeChild(rows.firstElementChild); }
  }

  // Takes the server's own rendering of the parts that change and puts it in place.
  var refreshing = false;
  var again = false;
  function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    fetch(base, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html");
        ["human-steps", "steps", "costs", "agents"].forEach(function (id) {
          var now = document.getElementById(id);
          var next = fresh.getElementById(id);
          if (now && next) { now.replaceWith(document.importNode(next, true)); }
        });
        var status = fresh.getElementById("run-status");
        var shown = document.getElementById("run-status");
        if (status && shown) {
          shown.className = status.className;
          shown.textContent = status.textContent;
        }
        var classes = {};
        fresh.querySelectorAll("svg.dag g.node").forEach(function (g) {
          classes[g.getAttribute("data-node")] = g.getAttribute("class");
        });
        document.querySelectorAll("svg.dag g.node").forEach(function (g) {
          var next = classes[g.getAttribute("data-node")];
          if (next) { g.setAttribute("class", next); }
        });
        body.dataset.refreshed = String((parseInt(body.dataset.refreshed || "0", 10) || 0) + 1);
      })
      .catch(function () { /* the next event tries again */ })
      .then(function () {
        refreshing = false;
        if (again) { again = false; setTimeout(refresh, 300); }
      });
  }
  var timer = null;
  function soon() {
    if (timer) { return; }
    timer = setTimeout(function () { timer = null; refresh(); }, 400);
  }

  var source = new EventSource(base + "/events?since=" + since);
  source.addEventListener("trace", function (event) {
    try { appendTrace(JSON.parse(event.data)); } catch (e) { return; }
    soon();
  });
  source.addEventListener("status", function () { soon(); });
  source.onerror = function () {
    // The stream ends after the run's final status; the browser would reconnect, but the
    // page already shows the end.
    if (source.readyState === EventSource.CLOSED) { return; }
    var status = document.getElementById("run-status");
    if (status && /status-(success|failed|cancelled|timed_out)/.test(status.className)) {
      source.close();
    }
  };
})();
