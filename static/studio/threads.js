/* Thread page: mark the selected step's nodes on the graph drawing and its timeline row.
 *
 * The step panel (#step-panel) says which nodes to mark in data-highlight (JSON:
 * {"ran": [...], "next": [...], "interrupted": [...], "failed": [...]}); the drawing's nodes are
 * <g id="node-NAME">. Runs on load and after every htmx swap. Reading the page
 * needs none of this: it only adds classes.
 */
(function () {
  "use strict";

  var MARKS = ["ran", "next", "interrupted", "failed"];

  function marks(panel) {
    try {
      return JSON.parse(panel.getAttribute("data-highlight") || "{}") || {};
    } catch (error) {
      return {};
    }
  }

  function highlight() {
    var panel = document.getElementById("step-panel");
    var drawing = document.getElementById("graph-drawing");
    if (!panel) return;
    if (drawing) {
      MARKS.forEach(function (mark) {
        drawing.querySelectorAll(".is-" + mark).forEach(function (node) {
          node.classList.remove("is-" + mark);
        });
      });
      var wanted = marks(panel);
      MARKS.forEach(function (mark) {
        (wanted[mark] || []).forEach(function (name) {
          var node = document.getElementById("node-" + name);
          if (node && drawing.contains(node)) node.classList.add("is-" + mark);
        });
      });
    }
    var selected = panel.getAttribute("data-checkpoint");
    document.querySelectorAll("#timeline [data-checkpoint]").forEach(function (row) {
      if (selected && row.getAttribute("data-checkpoint") === selected) {
        row.setAttribute("aria-current", "step");
      } else {
        row.removeAttribute("aria-current");
      }
    });
  }

  document.addEventListener("DOMContentLoaded", highlight);
  document.addEventListener("htmx:afterSettle", highlight);
})();
