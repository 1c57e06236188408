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

  /* "Show more" under a long message (sessions/rendering.py LONG_MESSAGE_CHARS): the body is
     drawn clipped (.collapsible) until expanded. Delegated, so socket-added messages work. */
  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest(".show-more") : null;
    if (!button) return;
    var body = document.getElementById(button.getAttribute("aria-controls"));
    if (!body) return;
    var expanded = body.classList.toggle("expanded");
    button.setAttribute("aria-expanded", expanded ? "true" : "false");
    button.textContent = expanded ? button.dataset.less : button.dataset.more;
  });
})();
