/* The review queue refreshes itself. A request that arrived while an admin had this page
   open stayed invisible until a reload (a new user's finding), and a request expires
   unanswered after a few minutes. Every REFRESH_MS while the tab is visible, the server
   re-renders the queue region (approvals/views.py: the region and the header badge), unless
   the reviewer is in the middle of a decision there: focus inside the queue or a reason
   typed, which the swap would lose. */
(function () {
  "use strict";
  var REFRESH_MS = 5000;

  function busy(region) {
    var active = document.activeElement;
    if (active && active !== document.body && region.contains(active)) return true;
    var fields = region.querySelectorAll("input[type=text], textarea");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value !== fields[i].defaultValue) return true;
    }
    return false;
  }

  window.setInterval(function () {
    var region = document.getElementById("approval-queue");
    if (!region || document.hidden || !window.htmx || busy(region)) return;
    window.htmx.ajax("GET", window.location.pathname,
                     { target: "#approval-queue", swap: "outerHTML" });
  }, REFRESH_MS);
})();
