/* Behaviour every page needs, kept out of the HTML so the Content-Security-Policy can forbid
 * inline script and handlers (issue 8, finding 10; hermes_web/settings.py).
 *
 * data-confirm="question" on a form, or on the submit button that sends it, asks before the
 * form is sent (plain or htmx); "Cancel" stops it before htmx sees the submit event. */
(function () {
  "use strict";
  document.addEventListener("submit", function (e) {
    var source = (e.submitter && e.submitter.dataset.confirm) ? e.submitter : e.target;
    var question = source && source.dataset ? source.dataset.confirm : null;
    if (question && !window.confirm(question)) {
      e.preventDefault();
      e.stopImmediatePropagation();
    }
  }, true);
})();
