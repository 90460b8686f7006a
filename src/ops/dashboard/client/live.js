/*
 * The dashboard's one script, served from `<base>/assets/live.js` (the page's
 * Content-Security-Policy allows only the dashboard's own scripts, 'self':
 * nothing inline, nothing from elsewhere; scripts/dashboard-assets.mjs builds this
 * file's text into clientAssets.ts). It makes pages live and nothing else: every page
 * works without it (forms post, links navigate, and pages without the script
 * refresh themselves through a <noscript> meta tag).
 *
 * On every page it first rewrites each timestamp (<time datetime>, and a
 * chart's <text data-datetime>) from the UTC text the server wrote to the
 * browser's own time zone, named (Intl.DateTimeFormat), keeping the UTC text
 * in the title; without the script the UTC text stays. Markup it swaps in
 * later (a refreshed <main>, reloaded charts, the workers table) is rewritten too.
 *
 * It subscribes to `<base>/events` and patches what the page shows: queue
 * counts, a job's status and attempts, the workers table. Where a change
 * needs new markup (a job changed state, a new queue, new jobs on the first
 * page of a list) it fetches the page again and swaps its <main>, at most
 * once a second, and never while a bulk selection is being made. Charts are
 * reloaded from <base>/charts every 30 s (the server shares them for 15 s). Everything
 * it writes goes through textContent or the server's own escaped markup.
 */
// biome-ignore lint/suspicious/noRedundantUseStrict: a classic script (<script src defer>), not a module: not strict without it
"use strict";
(() => {
  var body = document.body;
  var base = body.getAttribute("data-base") || "";
  var live = (body.getAttribute("data-live") || "").split(",").filter(Boolean);

  // Local times: "2026-01-31 10:00:00 GMT+1" for the server's "2026-01-31 09:00:00Z", which moves to the title.
  var fmt = null;
  try {
    fmt = new Intl.DateTimeFormat(undefined, {
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      hourCycle: "h23",
      timeZoneName: "short",
    });
  } catch {
    fmt = null;
  }
  function localTimes(root) {
    if (!fmt?.formatToParts || !root) return;
    var els = root.querySelectorAll("time[datetime]:not([data-local]), text[data-datetime]:not([data-local])");
    Array.prototype.forEach.call(els, (el) => {
      var d = new Date(el.getAttribute("datetime") || el.getAttribute("data-datetime"));
      if (Number.isNaN(d.getTime())) return;
      var p = {};
      fmt.formatToParts(d).forEach((x) => {
        p[x.type] = x.value;
      });
      var utc = el.textContent;
      if (el.tagName.toLowerCase() === "text") {
        // A chart's axis label: as short as the server's ("09:14Z" or "01-31 09:14Z").
        el.textContent = `${utc.indexOf("-") >= 0 ? `${p.month}-${p.day} ` : ""}${p.hour}:${p.minute} ${p.timeZoneName}`;
      } else {
        el.textContent = `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second} ${p.timeZoneName}`;
        const was = el.getAttribute("title");
        el.setAttribute("title", utc + (was ? ` · ${was}` : ""));
      }
      el.setAttribute("data-local", "");
    });
  }
  localTimes(document);

  if (!window.EventSource || live.length === 0) return;
  var badge = document.getElementById("live");
  var es = null;
  var watching = "";
  function watchedIds() {
    return Array.prototype.map
      .call(document.querySelectorAll("[data-watch-job]"), (el) => el.getAttribute("data-watch-job"))
      .slice(0, 200)
      .join(",");
  }
  function state(text, ok) {
    if (!badge) return;
    badge.textContent = text;
    badge.className = ok ? "live on" : "live off";
  }
  function connect() {
    if (es) es.close();
    var params = new URLSearchParams();
    params.set("topics", live.join(","));
    watching = watchedIds();
    if (watching) params.set("jobs", watching);
    es = new EventSource(`${base}/events?${params.toString()}`);
    es.onopen = () => {
      state("live", true);
    };
    es.onerror = () => {
      state("reconnecting", false);
    };
    es.addEventListener("queues", onQueues);
    es.addEventListener("job", onJob);
    es.addEventListener("enqueued", onEnqueued);
    es.addEventListener("workers", onWorkers);
  }

  var pending = null;
  var lastSwap = 0;
  function selecting() {
    var a = document.activeElement;
    return (
      document.querySelector("input[name=ids]:checked") !== null ||
      (a && a.closest && a.closest("main form[method=post]") !== null && a.tagName !== "BUTTON")
    );
  }
  // Fetches this page again and swaps its <main>: at most once a second.
  function refresh() {
    if (pending) return;
    var wait = Math.max(0, 1000 - (Date.now() - lastSwap));
    pending = setTimeout(() => {
      if (selecting()) {
        pending = null;
        notice();
        return;
      }
      fetch(location.href, { credentials: "same-origin", headers: { "x-skipq-live": "1" } })
        .then((r) => (r.ok ? r.text() : null))
        .then((text) => {
          pending = null;
          lastSwap = Date.now();
          if (!text) return;
          var doc = new DOMParser().parseFromString(text, "text/html");
          var next = doc.querySelector("main");
          var here = document.querySelector("main");
          if (!next || !here) return;
          var focusId = document.activeElement?.id;
          // The outcome of the action that led here stays on the page (its cookie is gone from the new one).
          var flash = here.querySelector("[role=status]");
          var heading = next.querySelector("h1");
          if (flash && !next.querySelector("[role=status]") && heading) heading.after(flash);
          here.replaceWith(document.adoptNode(next));
          localTimes(next);
          if (focusId) {
            const f = document.getElementById(focusId);
            if (f) f.focus();
          }
          if (watchedIds() !== watching) connect();
        })
        .catch(() => {
          pending = null;
        });
    }, wait);
  }
  function notice() {
    var n = document.getElementById("live-notice");
    if (n) n.hidden = false;
  }
  function set(scope, field, value) {
    var el = scope.querySelector(`[data-f=${field}]`);
    if (el && el.textContent !== String(value)) el.textContent = String(value);
  }
  function cell(tr, text) {
    var td = document.createElement("td");
    if (text !== undefined) td.textContent = text;
    tr.appendChild(td);
    return td;
  }
  function when(iso) {
    return iso
      ? String(iso)
          .replace("T", " ")
          .replace(/\.\d+Z$/, "Z")
      : "—";
  }

  function onQueues(e) {
    var rows = JSON.parse(e.data);
    var table = document.getElementById("queues");
    if (!table) return;
    // The overview lists every queue (a new one needs new rows); a queue's page shows its own row only.
    var all = table.hasAttribute("data-all");
    if (all && table.querySelectorAll("tr[data-queue]").length !== rows.length) {
      refresh();
      return;
    }
    rows.forEach((q) => {
      var tr = table.querySelector(`tr[data-queue="${CSS.escape(q.queue)}"]`);
      if (!tr) {
        if (all) refresh();
        return;
      }
      set(tr, "pending", q.pending);
      set(tr, "scheduled", q.scheduled);
      set(tr, "running", q.running);
      set(tr, "completed", q.completedLastHour);
      if (
        (tr.getAttribute("data-dead") || "0") !== String(q.dead) ||
        (tr.getAttribute("data-paused") === "true") !== q.paused
      )
        refresh();
    });
  }

  function onJob(e) {
    var job = JSON.parse(e.data);
    var els = document.querySelectorAll(`[data-watch-job="${job.id}"]`);
    Array.prototype.forEach.call(els, (el) => {
      if (job.gone || el.getAttribute("data-status") !== job.status) {
        refresh();
        return;
      }
      set(el, "attempts", `${job.attempts}/${job.max_attempts}`);
      set(el, "locked_by", job.locked_by || "—");
    });
  }

  function onEnqueued(e) {
    var list = document.querySelector("[data-live-list]");
    if (!list) return;
    var queue = list.getAttribute("data-live-list");
    if (queue && queue !== JSON.parse(e.data).queue) return;
    refresh();
  }

  // The workers table is drawn here from the event (no request of its own).
  function onWorkers(e) {
    var tbody = document.querySelector("#workers tbody");
    if (!tbody) {
      if (document.getElementById("no-workers")) refresh();
      return;
    }
    var workers = JSON.parse(e.data);
    if (workers.length === 0) {
      refresh();
      return;
    }
    var rows = workers.map((w) => {
      var tr = document.createElement("tr");
      tr.setAttribute("data-worker", w.id);
      cell(tr, w.id);
      cell(tr, (w.hostname || "—") + (w.pid ? ` · ${w.pid}` : ""));
      cell(tr, w.queues.join(", "));
      cell(tr, w.kinds.join(", "));
      var inflight = cell(tr);
      inflight.setAttribute("data-f", "inflight");
      if (w.inFlight.length === 0) inflight.textContent = "idle";
      w.inFlight.forEach((j, i) => {
        if (i > 0) inflight.appendChild(document.createTextNode(", "));
        var a = document.createElement("a");
        a.href = `${base}/jobs/${j.id}`;
        a.textContent = `${j.kind} #${j.id}`;
        inflight.appendChild(a);
      });
      var seen = cell(tr);
      if (w.last_seen_at) {
        const t = document.createElement("time");
        t.setAttribute("datetime", w.last_seen_at);
        t.textContent = when(w.last_seen_at);
        seen.appendChild(t);
      } else seen.textContent = "—";
      return tr;
    });
    tbody.replaceChildren.apply(tbody, rows);
    localTimes(tbody);
  }

  // Charts come from the maintainer's per-minute rollup: reloaded every 30 s while the tab is visible.
  setInterval(() => {
    if (document.visibilityState !== "visible") return;
    Array.prototype.forEach.call(document.querySelectorAll("[data-charts]"), (el) => {
      fetch(`${base}/charts?${el.getAttribute("data-charts")}`, { credentials: "same-origin" })
        .then((r) => (r.ok ? r.text() : null))
        .then((text) => {
          if (!text) return;
          var next = new DOMParser().parseFromString(text, "text/html").querySelector("[data-charts]");
          if (next) {
            el.replaceWith(document.adoptNode(next));
            localTimes(next);
          }
        })
        .catch(() => {});
    });
  }, 30000);

  connect();
  addEventListener("pagehide", () => {
    if (es) es.close();
  });
})();
