/* Steering a running turn (issue 12 item 4): the Steer button posts the composer's text to
 * /sessions/<id>/steer/ through htmx, as a correction that lands inside the running turn
 * instead of queuing behind it. Alt+Enter in the composer presses the button: that key is
 * bound by static/composer.js (loaded before the deferred scripts, with Enter and
 * Shift+Enter, so a key pressed while the page loads is not lost). Plain Enter keeps
 * queuing the message behind the turn.
 */
(function () {
  "use strict";
  var chat = document.getElementById("chat");
  if (!chat) return;
  var DRAFT_KEY = "hermes-draft-" + chat.dataset.sessionId;

  /* Sent: clear the composer and forget the draft, as chat.js does after Send. */
  document.addEventListener("htmx:afterRequest", function (e) {
    var elt = e.detail.elt;
    if (!elt || elt.id !== "steer-button" || !e.detail.successful || e.detail.xhr.status !== 200) return;
    var text = document.getElementById("composer-text");
    if (text) { text.value = ""; text.focus(); }
    try { sessionStorage.removeItem(DRAFT_KEY); } catch (err) { /* storage disabled */ }
    var error = document.getElementById("composer-error");
    if (error) error.remove();
  });
})();
