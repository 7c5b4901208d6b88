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
 *     it only runs when the socket cannot connect.
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

  function resetNodeStates() {
    document.querySelectorAll(".node-state[data-node]").forEach(function (span) {
      var node = span.getAttribute("data-node");
      span.setAttribute("data-state", "");
      span.className = "node-state node-state--idle";
      span.textContent = node + ": idle";
    });
  }

  // -- messages ----------------------------------------------------------------------------

  var stickToBottom = true;

  function beforeMessage() {
    var list = document.getElementById("run-events");
    stickToBottom = !list || list.scrollHeight - list.scrollTop - list.clientHeight < 24;
  }

  function afterMessage() {
    var list = document.getElementById("run-events");
    if (list) {
      while (list.children.length > KEEP_EVENTS) list.removeChild(list.firstElementChild);
      if (stickToBottom) list.scrollTop = list.scrollHeight;
    }
    var item = document.getElementById("event-" + lastEventId());
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
      }
    } else if (kind === "checkpoint") {
      refreshTimelineSoon();
    }
    highlight();
  }

  function skipPollWhileLive(event) {
    var source = event.detail && event.detail.elt;
    if (source && source.hasAttribute("data-fallback-poll") && socketOpen()) {
      event.preventDefault();
    }
  }

  document.addEventListener("DOMContentLoaded", highlight);
  document.addEventListener("htmx:afterSettle", highlight);
  document.addEventListener("htmx:wsConnecting", socketState("connecting"));
  document.addEventListener("htmx:wsOpen", socketState("open"));
  document.addEventListener("htmx:wsClose", socketState("closed"));
  document.addEventListener("htmx:wsBeforeMessage", beforeMessage);
  document.addEventListener("htmx:wsAfterMessage", afterMessage);
  document.addEventListener("htmx:beforeRequest", skipPollWhileLive);
})();
