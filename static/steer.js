/* Steering a running turn (issue 12 item 4): Alt+Enter in the composer sends the text as a
 * correction, exactly like the Steer button (it posts to /sessions/<id>/steer/ through
 * htmx). Plain Enter keeps queuing the message behind the turn (static/chat.js).
 *
 * The key handler runs in the capture phase on document and stops the event there, so
 * chat.js's Enter handler never also sends the text as an ordinary message.
 */
(function () {
  "use strict";
  var chat = document.getElementById("chat");
  if (!chat) return;
  var DRAFT_KEY = "hermes-draft-" + chat.dataset.sessionId;

  document.addEventListener("keydown", function (e) {
    if (e.target.id !== "composer-text" || e.key !== "Enter" || !e.altKey || e.shiftKey ||
        e.isComposing) return;
    e.preventDefault();
    e.stopPropagation();
    var button = document.getElementById("steer-button");
    if (button && e.target.value.trim()) button.click();
  }, true);

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
