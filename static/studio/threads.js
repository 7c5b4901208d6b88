/* Thread page: marks on the graph drawing, and the live Activity panel.
 *
 * Marks. The step panel (#step-panel) says which nodes to mark for the selected step in
 * data-highlight (JSON: {"ran": [...], "next": [...], "interrupted": [...], "failed": [...]});
 * the Activity panel's #node-state-NAME spans (data-node, data-state) say what each node
 * is doing in the active run (running / done / interrupted / failed). The drawing's nodes
 * are <g id="node-NAME">: they get is-<mark> and is-<state> classes. Runs on load, after
 * every htmx swap and after every WebSocket message.
 *
 * Live. #activity connects to /ws/threads/<id>/?after=<last event id> through htmx's ws
 * extension; every message is a set of out-of-band fragments (components/_run_event.html).
 * Here:
 *   - reconnects resume after the last event this page has (#last-event-id): the extension
 *     reconnects to the URL it first read, so htmx.createWebSocket (the extension's hook
 *     for making sockets) rewrites its ?after= each time a socket is made;
 *   - the timeline is refreshed (at most once a second) as checkpoints are saved, and the
 *     timeline and step panel when a run finishes (their data-refresh-url);
 *   - the timeline's 2 s polling (data-fallback-poll) is cancelled while the socket is open:
 *     it only runs when the socket cannot connect;
 *   - the conversation of a chat thread (#transcript, threads/_transcript.html): token
 *     events grow the answer being written in #transcript-stream; #transcript-settled (the
 *     checkpoint's messages and the agent's question) is refreshed as checkpoints are saved
 *     and when a run ends, and a streamed answer is dropped once its message is settled
 *     (data-stream-id), or when its run ended (the checkpoint is the truth);
 *   - the Activity list is newest first: each event arrives at its top, and a checkpoint
 *     event that arrived late (saved in the background while the next step ran) moves
 *     back to the end of its own step, as studio.services.activity.in_run_order orders the
 *     page; a reader scrolled down to older events keeps their place.
 *
 * Keyboard. On the timeline, j / k (anywhere but a form field) and ArrowDown / ArrowUp
 * (on a step's link) select the next older / newer step, Home / End the newest / oldest
 * of the page. A select marked data-autosubmit (the branch switcher) submits on change.
 *
 * Reading the page needs none of this.
 */
(function () {
  "use strict";

  var MARKS = ["ran", "next", "interrupted", "failed"];
  var STATES = ["running", "done", "interrupted", "failed"];
  var CLASSES = MARKS.concat(STATES).filter(function (name, i, all) {
    return all.indexOf(name) === i;
  }).map(function (name) {
    return "is-" + name;
  });
  var KEEP_EVENTS = 200;
  var REFRESH_GAP_MS = 1000;

  // -- marks on the drawing ------------------------------------------------------------

  function marks(panel) {
    try {
      return JSON.parse(panel.getAttribute("data-highlight") || "{}") || {};
    } catch (error) {
      return {};
    }
  }

  function mark(drawing, name, cls) {
    var node = document.getElementById("node-" + name);
    if (node && drawing.contains(node)) node.classList.add(cls);
  }

  function highlight() {
    var panel = document.getElementById("step-panel");
    var drawing = document.getElementById("graph-drawing");
    if (drawing) {
      CLASSES.forEach(function (cls) {
        drawing.querySelectorAll("." + cls).forEach(function (node) {
          node.classList.remove(cls);
        });
      });
      if (panel) {
        var wanted = marks(panel);
        MARKS.forEach(function (name) {
          (wanted[name] || []).forEach(function (node) {
            mark(drawing, node, "is-" + name);
          });
        });
      }
      document.querySelectorAll(".node-state[data-node]").forEach(function (span) {
        var state = span.getAttribute("data-state");
        if (STATES.indexOf(state) >= 0) {
          mark(drawing, span.getAttribute("data-node"), "is-" + state);
        }
      });
    }
    if (!panel) return;
    var selected = panel.getAttribute("data-checkpoint");
    document.querySelectorAll("#timeline [data-checkpoint]").forEach(function (row) {
      if (selected && row.getAttribute("data-checkpoint") === selected) {
        row.setAttribute("aria-current", "step");
      } else {
        row.removeAttribute("aria-current");
      }
    });
  }

  // -- the socket ------------------------------------------------------------------------

  function lastEventId() {
    var holder = document.getElementById("last-event-id");
    return holder ? parseInt(holder.getAttribute("data-last-event"), 10) || 0 : 0;
  }

  /* The thread socket's URL with ?after= moved on to the last event this page has. */
  function resumeUrl(url) {
    var parsed;
    try {
      parsed = new URL(url, window.location.href);
    } catch (error) {
      return url;
    }
    if (parsed.pathname.indexOf("/ws/threads/") !== 0) return url;
    var seen = lastEventId();
    if (seen > (parseInt(parsed.searchParams.get("after"), 10) || 0)) {
      parsed.searchParams.set("after", String(seen));
    }
    return parsed.toString();
  }

  if (window.htmx) {
    window.htmx.createWebSocket = function (url) {
      var socket = new WebSocket(resumeUrl(url), []);
      socket.binaryType = window.htmx.config.wsBinaryType;
      return socket;
    };
  }

  function activity() {
    return document.getElementById("activity");
  }

  function socketOpen() {
    var panel = activity();
    return !!panel && panel.getAttribute("data-socket") === "open";
  }

  function socketState(state) {
    return function (event) {
      var panel = activity();
      if (panel && event.target === panel) panel.setAttribute("data-socket", state);
    };
  }

  // -- refreshing the timeline and the step panel ----------------------------------------

  function refresh(id) {
    var element = document.getElementById(id);
    var url = element && element.getAttribute("data-refresh-url");
    if (!url || element.classList.contains("step-panel--fork")) return;
    window.htmx.ajax("GET", url, { source: element, target: element, swap: "outerHTML" });
  }

  var timelineTimer = null;
  var timelineAt = 0;

  function refreshTimelineSoon() {
    if (timelineTimer !== null) return;
    var wait = Math.max(0, timelineAt + REFRESH_GAP_MS - Date.now());
    timelineTimer = window.setTimeout(function () {
      timelineTimer = null;
      timelineAt = Date.now();
      refresh("timeline");
    }, wait);
  }

  var transcriptTimer = null;
  var transcriptAt = 0;
  var endedRuns = {};

  function refreshTranscriptSoon() {
    if (transcriptTimer !== null || !document.getElementById("transcript-settled")) return;
    var wait = Math.max(0, transcriptAt + REFRESH_GAP_MS - Date.now());
    transcriptTimer = window.setTimeout(function () {
      transcriptTimer = null;
      transcriptAt = Date.now();
      refresh("transcript-settled");
    }, wait);
  }

  /* Drop streamed answers that the checkpoint now holds, and those of runs that ended
     (what they wrote is in the refreshed messages, or was never saved). */
  function settleStream(dropEnded) {
    var stream = document.getElementById("transcript-stream");
    var settled = document.getElementById("transcript-settled");
    if (!stream || !settled) return;
    var have = {};
    settled.querySelectorAll("[data-stream-id]").forEach(function (item) {
      have[item.getAttribute("data-stream-id")] = true;
    });
    Array.prototype.slice.call(stream.children).forEach(function (item) {
      if (have[item.id] || (dropEnded && endedRuns[item.getAttribute("data-run")])) {
        stream.removeChild(item);
      }
    });
  }

  function resetNodeStates() {
    document.querySelectorAll(".node-state[data-node]").forEach(function (span) {
      var node = span.getAttribute("data-node");
      span.setAttribute("data-state", "");
      span.className = "node-state node-state--idle";
      span.textContent = node + ": idle";
    });
  }

  // -- messages ----------------------------------------------------------------------------

  var kept = { top: 0, height: 0 };

  function beforeMessage() {
    var list = document.getElementById("run-events");
    kept = list ? { top: list.scrollTop, height: list.scrollHeight } : { top: 0, height: 0 };
  }

  function stepOf(item, name) {
    var value = parseInt(item.getAttribute(name), 10);
    return isNaN(value) ? null : value;
  }

  /* A new event at the top of the list (newest first): say which step it belongs to (its
     own, or that of the event before it in its run), and move a root checkpoint event
     that arrived late below the events of its run that belong to later steps, as the
     server orders the list (studio.services.activity.in_run_order). */
  function placeNewEvent(item) {
    var run = item.getAttribute("data-run");
    var kind = item.getAttribute("data-kind");
    var step = stepOf(item, "data-step");
    var older = item.nextElementSibling;
    if (kind === "checkpoint" && step !== null) {
      var after = item;
      while (older && older.getAttribute("data-run") === run &&
             older.getAttribute("data-kind") !== "run.status") {
        var other = stepOf(older, "data-at-step");
        if (other === null || other <= step) break;
        after = older;
        older = older.nextElementSibling;
      }
      if (after !== item) after.insertAdjacentElement("afterend", item);
      item.setAttribute("data-at-step", String(step));
      return;
    }
    if (kind === "run.status" || item.hasAttribute("data-at-step")) return;
    var belongs = step;
    if (belongs === null && older && older.getAttribute("data-run") === run &&
        older.getAttribute("data-kind") !== "run.status") {
      belongs = stepOf(older, "data-at-step");
    }
    if (belongs !== null) item.setAttribute("data-at-step", String(belongs));
  }

  function afterMessage() {
    var list = document.getElementById("run-events");
    var item = document.getElementById("event-" + lastEventId());
    if (list) {
      if (item && item.parentNode === list) placeNewEvent(item);
      while (list.children.length > KEEP_EVENTS) list.removeChild(list.lastElementChild);
      if (kept.top > 0) list.scrollTop = kept.top + (list.scrollHeight - kept.height);
    }
    var kind = item ? item.getAttribute("data-kind") : "";
    if (kind === "run.status") {
      // A run started or ended: the previous run's node states no longer apply.
      resetNodeStates();
      var status = document.getElementById("run-status");
      if (status && status.getAttribute("data-finished") === "true") {
        window.clearTimeout(timelineTimer);
        timelineTimer = null;
        timelineAt = Date.now();
        refresh("timeline");
        refresh("step-panel");
        endedRuns[item.getAttribute("data-run")] = true;
        window.clearTimeout(transcriptTimer);
        transcriptTimer = null;
        transcriptAt = Date.now();
        refresh("transcript-settled");
      }
    } else if (kind === "checkpoint") {
      refreshTimelineSoon();
      refreshTranscriptSoon();
    }
    settleStream(false);
    highlight();
  }

  // -- keyboard ----------------------------------------------------------------------------

  function typing(element) {
    if (!element || !(element instanceof Element)) return false;
    return !!element.closest("input, textarea, select, [contenteditable=''], [contenteditable='true'], dialog[open]");
  }

  function timelineLinks() {
    return Array.prototype.slice.call(document.querySelectorAll("#timeline .timeline__row > .timeline__link"));
  }

  /* Select the step `offset` rows from the current one (+1: older), or the first/last. */
  function selectStep(offset, edge) {
    var links = timelineLinks();
    if (!links.length) return false;
    var at = links.indexOf(document.activeElement);
    if (at < 0) {
      links.forEach(function (link, i) {
        if (link.parentNode.getAttribute("aria-current") === "step") at = i;
      });
    }
    var to;
    if (edge === "first") to = 0;
    else if (edge === "last") to = links.length - 1;
    else to = at < 0 ? 0 : Math.min(links.length - 1, Math.max(0, at + offset));
    var link = links[to];
    link.focus();
    if (to !== at || link.parentNode.getAttribute("aria-current") !== "step") link.click();
    return true;
  }

  function onKey(event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    var onLink = document.activeElement && document.activeElement.classList &&
      document.activeElement.classList.contains("timeline__link");
    var handled = false;
    if ((event.key === "j" || event.key === "k") && !typing(event.target)) {
      handled = selectStep(event.key === "j" ? 1 : -1);
    } else if (onLink && (event.key === "ArrowDown" || event.key === "ArrowUp")) {
      handled = selectStep(event.key === "ArrowDown" ? 1 : -1);
    } else if (onLink && (event.key === "Home" || event.key === "End")) {
      handled = selectStep(0, event.key === "Home" ? "first" : "last");
    }
    if (handled) event.preventDefault();
  }

  function autosubmit(event) {
    var select = event.target;
    if (select instanceof HTMLSelectElement && select.hasAttribute("data-autosubmit") && select.form) {
      select.form.requestSubmit ? select.form.requestSubmit() : select.form.submit();
    }
  }

  function skipPollWhileLive(event) {
    var source = event.detail && event.detail.elt;
    if (source && source.hasAttribute("data-fallback-poll") && socketOpen()) {
      event.preventDefault();
    }
  }

  /* With JavaScript the branch switcher submits on change: its button is not needed. */
  function hideAutosubmitButtons() {
    document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
      var button = select.form && select.form.querySelector(".branch-switcher__go");
      if (button) button.hidden = true;
    });
  }

  document.addEventListener("DOMContentLoaded", highlight);
  document.addEventListener("DOMContentLoaded", hideAutosubmitButtons);
  document.addEventListener("htmx:afterSettle", hideAutosubmitButtons);
  document.addEventListener("htmx:afterSettle", highlight);
  document.addEventListener("htmx:afterSettle", function (event) {
    if (event.target && event.target.id === "transcript-settled") settleStream(true);
  });
  document.addEventListener("htmx:wsConnecting", socketState("connecting"));
  document.addEventListener("htmx:wsOpen", socketState("open"));
  document.addEventListener("htmx:wsClose", socketState("closed"));
  document.addEventListener("htmx:wsBeforeMessage", beforeMessage);
  document.addEventListener("htmx:wsAfterMessage", afterMessage);
  document.addEventListener("htmx:beforeRequest", skipPollWhileLive);
  document.addEventListener("keydown", onKey);
  document.addEventListener("change", autosubmit);
})();
