// ragd's web page: the live overview (server-sent events of its rendered part) and a few keys.
// Everything works without this file; it only keeps the overview current and makes "/" jump to search.
"use strict";

(function () {
  function live() {
    var box = document.getElementById("live");
    if (!box || !window.EventSource) return;
    var source = new EventSource(box.getAttribute("data-live"));
    source.addEventListener("overview", function (ev) {
      var focused = document.activeElement && box.contains(document.activeElement)
        ? document.activeElement.getAttribute("href") : null;
      box.innerHTML = ev.data;
      box.setAttribute("data-updated", String(Date.now()));
      if (focused) {  // keep the keyboard where it was across an update
        var again = box.querySelector('a[href="' + CSS.escape(focused) + '"]');
        if (again) again.focus();
      }
    });
    source.onerror = function () { box.setAttribute("data-stale", "1"); };
    source.onopen = function () { box.removeAttribute("data-stale"); };
    window.addEventListener("pagehide", function () { source.close(); });
  }

  function keys() {
    document.addEventListener("keydown", function (ev) {
      if (ev.key !== "/" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      var t = ev.target;
      if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) return;
      var box = document.getElementById("q") || document.getElementById("quick-q");
      if (box) { ev.preventDefault(); box.focus(); box.select(); }
    });
  }

  function target() {  // the document view opened at a passage: move the keyboard there
    var m = /^#chunk-(\d+)$/.exec(location.hash);
    var el = m && document.getElementById("chunk-" + m[1]);
    if (el) { el.focus({ preventScroll: false }); }
  }

  document.addEventListener("DOMContentLoaded", function () { live(); keys(); target(); });
})();
