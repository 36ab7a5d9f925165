// Kagzi console: live updates by Server-Sent Events, write results, theme.
// Everything from the server is inserted with textContent, never as HTML.
(function () {
  "use strict";
  function meta(n) { var m = document.querySelector('meta[name="' + n + '"]'); return m ? m.content : ""; }
  var root = document.documentElement;
  var prefix = meta("kagzi-prefix"), ns = meta("kagzi-ns"), page = meta("kagzi-page"), csrf = meta("kagzi-csrf");

  // Theme toggle.
  document.getElementById("theme").addEventListener("click", function () {
    var cur = document.documentElement.getAttribute("data-theme") ||
      (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");
    var next = cur === "dark" ? "light" : "dark";
    document.documentElement.setAttribute("data-theme", next);
    localStorage.setItem("kagzi-theme", next);
  });
  // Namespace switcher.
  var sw = document.getElementById("ns-switch");
  if (sw) sw.addEventListener("change", function () { sw.form.submit(); });

  // Every write carries the CSRF token.
  document.body.addEventListener("htmx:configRequest", function (e) { e.detail.headers["X-CSRF-Token"] = csrf; });

  var toastTimer;
  function toast(text, bad) {
    var t = document.getElementById("toast");
    t.textContent = text; t.className = bad ? "show bad" : "show";
    clearTimeout(toastTimer); toastTimer = setTimeout(function () { t.className = ""; }, 6000);
  }
  // data-busy on <html> marks a refresh pending or in flight: a click on a
  // button about to be replaced is better made after it.
  var busy = 0;
  function mark() { if (busy > 0 || pending) root.setAttribute("data-busy", ""); else root.removeAttribute("data-busy"); }
  var pending = null;
  // htmx drops a request on an element with one in flight: a refresh
  // asked for meanwhile runs after it, else its change would be lost.
  var again = false;
  function refresh() {
    if (!window.htmx) return;
    if (busy > 0) { again = true; return; }
    busy++; mark();
    var done = function () {
      busy--;
      if (again) { again = false; refresh(); }
      mark();
    };
    htmx.ajax("GET", location.href, { target: "#main", select: "#main", swap: "outerHTML" }).then(done, done);
  }
  // A write's result is read from its request, not from htmx:afterRequest:
  // a live refresh may replace the clicked button while the request is in
  // flight, and events on a detached element never reach the body.
  document.body.addEventListener("htmx:beforeRequest", function (e) {
    var xhr = e.detail.xhr, el = e.detail.elt;
    if (!xhr || !el || el.getAttribute("hx-get")) return;
    var form = el.closest("form") || el;
    root.setAttribute("data-writes", String(Number(root.getAttribute("data-writes") || 0) + 1));
    xhr.addEventListener("loadend", function () { written(xhr, el, form); });
  });
  function written(xhr, el, form) {
    if ((xhr.getResponseHeader("Content-Type") || "").indexOf("application/json") !== 0) return;
    var body = {}; try { body = JSON.parse(xhr.responseText); } catch (err) {}
    if (xhr.status >= 400) { toast("Error " + xhr.status + ": " + (body.error || xhr.statusText), true); return; }
    var res = form.getAttribute("data-result");
    if (res) { document.getElementById(res).textContent = JSON.stringify(body, null, 2); }
    if (form.getAttribute("data-goto") === "run" && body.run_id) {
      location.href = prefix + "/runs/" + encodeURIComponent(body.run_id) + "?ns=" + encodeURIComponent(ns); return;
    }
    if (form.getAttribute("data-goto") === "batch" && body.batch_id) {
      location.href = prefix + "/batches/" + encodeURIComponent(body.batch_id) + "?ns=" + encodeURIComponent(ns); return;
    }
    toast("Done: " + JSON.stringify(body).slice(0, 200));
    if (form.getAttribute("data-refresh") || el.getAttribute("data-refresh") || page === "run") refresh();
  }

  // Copy buttons: ids are shown abbreviated, and copied whole. The
  // Clipboard API exists only in secure contexts (https, localhost), so
  // elsewhere a hidden textarea is copied, and if even that is refused a
  // prompt holds the id, selected, for the person to copy.
  document.body.addEventListener("click", function (e) {
    var b = e.target.closest ? e.target.closest("button.copy[data-copy]") : null;
    if (!b) return;
    var id = b.getAttribute("data-copy");
    var ok = function () { toast("Copied " + id); };
    var fallback = function () { if (copyByTextarea(id)) ok(); else window.prompt("Copy the id:", id); };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(id).then(ok, fallback);
    else fallback();
  });
  function copyByTextarea(text) {
    var ta = document.createElement("textarea");
    ta.value = text; ta.setAttribute("readonly", ""); ta.style.position = "fixed"; ta.style.opacity = "0";
    document.body.appendChild(ta); ta.select();
    var done = false;
    try { done = document.execCommand("copy"); } catch (err) { done = false; }
    ta.remove();
    return done;
  }

  // Live updates.
  if (!window.EventSource) return;
  // A run page follows the run's state and streams on an event stream of
  // its own; the section is kept across refreshes (hx-preserve), entries
  // are appended as they are recorded.
  var prog = page === "run" ? document.getElementById("run-progress") : null;
  if (prog) {
    var pes = new EventSource(prog.getAttribute("data-progress-url"));
    var streamBox = function (name) {
      var box = document.getElementById("streams");
      var found = null;
      box.querySelectorAll("div.stream").forEach(function (d) { if (d.getAttribute("data-stream") === name) found = d; });
      if (found) return found;
      var empty = box.querySelector(".empty"); if (empty) empty.remove();
      var d = document.createElement("div"); d.className = "stream"; d.setAttribute("data-stream", name);
      var h = document.createElement("h3"); h.textContent = name; d.appendChild(h);
      var list = document.createElement("ol"); list.className = "entries"; d.appendChild(list);
      box.appendChild(d);
      return d;
    };
    pes.addEventListener("state", function (e) {
      var vals = JSON.parse(e.data), body = document.getElementById("state-body");
      if (!vals.length) return;
      body.textContent = "";
      vals.forEach(function (v) {
        var tr = document.createElement("tr"); tr.setAttribute("data-key", v.key);
        [v.key, String(v.version), JSON.stringify(v.value)].forEach(function (t) {
          var td = document.createElement("td"); td.textContent = t; tr.appendChild(td);
        });
        body.appendChild(tr);
      });
    });
    pes.addEventListener("entry", function (e) {
      var en = JSON.parse(e.data), list = streamBox(en.stream).querySelector("ol.entries");
      if (list.querySelector('li[data-index="' + en.index + '"]')) return;
      var li = document.createElement("li"); li.setAttribute("data-index", String(en.index)); li.value = en.index;
      li.textContent = JSON.stringify(en.value);
      list.appendChild(li);
    });
    pes.addEventListener("end", function (e) {
      var d = streamBox(JSON.parse(e.data).stream);
      if (!d.querySelector(".badge")) { var b = document.createElement("span"); b.className = "badge"; b.textContent = "closed"; d.querySelector("h3").appendChild(b); }
    });
    pes.addEventListener("done", function () { pes.close(); });
  }
  var live = document.getElementById("live");
  var es = new EventSource(prefix + "/api/v1/stream?ns=" + encodeURIComponent(ns));
  es.onopen = function () { live.textContent = "● live"; live.className = "live on"; };
  es.onerror = function () { live.textContent = "○ reconnecting"; live.className = "live off"; };
  function refreshSoon() { if (!pending) { pending = setTimeout(function () { pending = null; refresh(); }, 150); mark(); } }

  // The queues view's tables and Limits panel (#queues-live, not its
  // forms, whose input a swap would lose) follow the counts events: a
  // changed count means a run was claimed or left RUNNING, so the RUNNING
  // runs per type and key and a rate key's claims may have moved. At most
  // one read every 2 s, none while nothing changes; the first counts event
  // of a stream is its opening state, which the page was rendered from.
  var liveTimer = null, countsSeen = false;
  function refreshQueues() {
    if (liveTimer || !window.htmx || !document.getElementById("queues-live")) return;
    liveTimer = setTimeout(function () {
      liveTimer = null;
      if (busy > 0 || !document.getElementById("queues-live")) return;
      htmx.ajax("GET", location.href, { target: "#queues-live", select: "#queues-live", swap: "outerHTML" });
    }, 2000);
  }
  es.addEventListener("counts", function (e) {
    var c = JSON.parse(e.data);
    document.querySelectorAll("[data-count]").forEach(function (el) {
      var k = el.getAttribute("data-count"); if (k in c) el.textContent = c[k];
    });
    if (page === "queues" && countsSeen) refreshQueues();
    countsSeen = true;
  });
  // The batches page's table (#batches-live, not its form) and a batch's
  // page (#batch-live) follow the stream's batch events: a batch moved or
  // recorded outcomes. At most one read a second per page, none while no
  // batch changes.
  var batchTimer = null;
  function refreshBatch(target) {
    if (batchTimer || !window.htmx) return;
    batchTimer = setTimeout(function () {
      batchTimer = null;
      if (busy > 0 || !document.getElementById(target)) return;
      htmx.ajax("GET", location.href, { target: "#" + target, select: "#" + target, swap: "outerHTML" });
    }, 1000);
  }
  es.addEventListener("batch", function (e) {
    var b = JSON.parse(e.data);
    if (page === "batches") { refreshBatch("batches-live"); return; }
    var d = document.getElementById("batch-detail");
    if (page === "batch" && d && d.getAttribute("data-batch-id") === b.batch_id) refreshBatch("batch-live");
  });
  es.addEventListener("resync", function () { refreshSoon(); });
  es.addEventListener("schedule", function () { if (page === "schedules") refreshSoon(); });
  es.addEventListener("run", function (e) {
    var r = JSON.parse(e.data);
    if (page === "run") {
      var d = document.getElementById("run-detail");
      if (d && d.getAttribute("data-run-id") === r.run_id) refreshSoon();
      return;
    }
    if (page !== "runs") return;
    var table = document.getElementById("runs-table");
    if (!table) return;
    var row = table.querySelector('tr[data-run-id="' + r.run_id + '"]');
    if (!row) {
      if (table.getAttribute("data-first-page") !== "true" || table.getAttribute("data-filter-other")) return;
      var fs = table.getAttribute("data-filter-status"), ft = table.getAttribute("data-filter-type"), fq = table.getAttribute("data-filter-queue");
      if ((fs && fs !== r.status) || (ft && ft !== r.type) || (fq && fq !== r.queue)) return;
      row = document.getElementById("run-row").content.firstElementChild.cloneNode(true);
      row.setAttribute("data-run-id", r.run_id);
      var body = document.getElementById("runs-body");
      var empty = body.querySelector("tr.empty"); if (empty) empty.remove();
      body.insertBefore(row, body.firstChild);
      row.classList.add("fresh");
    }
    function set(f, v) { var el = row.querySelector('[data-field="' + f + '"]'); if (el) el.textContent = v; return el; }
    // As the server's "short": the last digits, the random ones of a UUID v7.
    var link = set("link", "\u2026" + r.run_id.slice(-8));
    link.setAttribute("href", prefix + "/runs/" + encodeURIComponent(r.run_id) + "?ns=" + encodeURIComponent(ns));
    link.setAttribute("title", r.run_id);
    var cp = row.querySelector("button.copy");
    if (cp) { cp.setAttribute("data-copy", r.run_id); cp.setAttribute("title", "copy " + r.run_id); cp.setAttribute("aria-label", "copy " + r.run_id); }
    set("type", r.type); set("queue", r.queue); set("attempts", r.attempts);
    set("external_id", r.external_id || ""); set("error", (r.error || "").slice(0, 80));
    if (!row.querySelector('[data-field="created"]').textContent) set("created", "just now");
    var st = set("status", r.status); st.className = "st s-" + r.status.toLowerCase();
    row.classList.add("flash"); setTimeout(function () { row.classList.remove("flash"); }, 600);
  });
})();
