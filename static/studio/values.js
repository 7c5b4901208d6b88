/* Values: open a state value whole, as pretty JSON, in the value dialog, and copy it.
 *
 * templates/threads/_value.html renders each value as text with a hidden button
 * (data-value-open, data-path: its JSONPath); this file shows the buttons, fills
 * components/_value_dialog.html with the value's text (textContent: never markup)
 * pretty-printed when it is JSON, and copies it. Without JavaScript the long values
 * still open in place (<details>).
 */
(function () {
  "use strict";

  function dialog() {
    return document.getElementById("value-dialog");
  }

  function reveal(root) {
    (root && root.querySelectorAll ? root : document)
      .querySelectorAll("[data-value-open][hidden]")
      .forEach(function (button) {
        button.hidden = false;
      });
  }

  /* The value's whole text: the folded full text when it is long, else the short one. */
  function textOf(button) {
    var box = button.closest(".value-box");
    if (!box) return "";
    var full = box.querySelector(".value__full");
    var short = box.querySelector("code");
    return (full || short || box).textContent;
  }

  function pretty(text) {
    try {
      return JSON.stringify(JSON.parse(text), null, 2);
    } catch (error) {
      return text;
    }
  }

  function setStatus(text) {
    var status = document.getElementById("value-dialog-status");
    if (status) status.textContent = text;
  }

  function open(button) {
    var box = dialog();
    if (!box || typeof box.showModal !== "function") return;
    var path = button.getAttribute("data-path") || "";
    document.getElementById("value-dialog-text").textContent = pretty(textOf(button));
    document.getElementById("value-dialog-path").textContent = path;
    document.getElementById("value-dialog-title").textContent = path ? "Value at" : "Value";
    setStatus("");
    box.showModal();
    document.getElementById("value-dialog-text").focus();
  }

  function copied(ok) {
    setStatus(ok ? "Copied." : "Select the text and copy it (Ctrl+C).");
  }

  function copy() {
    var text = document.getElementById("value-dialog-text");
    if (!text) return;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text.textContent).then(
        function () {
          copied(true);
        },
        function () {
          copied(selectAndCopy(text));
        }
      );
    } else {
      copied(selectAndCopy(text));
    }
  }

  /* Where the clipboard API is missing (plain HTTP on another host): select, copy. */
  function selectAndCopy(element) {
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    try {
      return document.execCommand("copy");
    } catch (error) {
      return false;
    }
  }

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (!(target instanceof Element)) return;
    var opener = target.closest("[data-value-open]");
    if (opener) {
      event.preventDefault();
      open(opener);
      return;
    }
    if (target.closest("[data-value-copy]")) {
      copy();
      return;
    }
    var box = dialog();
    if (box && target === box) box.close(); // a click on the backdrop
  });

  document.addEventListener("DOMContentLoaded", function () {
    reveal(document);
  });
  document.addEventListener("htmx:load", function (event) {
    reveal(event.target);
  });
})();
