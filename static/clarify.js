/* Clarify questions in the chat (templates/sessions/_clarify.html): a clarify.requested or
   clarify.answered event for this session (static/chat.js, "hermes:event") fetches the
   server-rendered card and puts it in #clarify-list (replacing the card of the same id),
   so every open tab shows the question, then its answer. */
(function () {
  "use strict";
  function show(sessionId, questionId) {
    fetch("/sessions/" + sessionId + "/clarify/" + questionId + "/", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        var list = document.getElementById("clarify-list");
        if (!html || !list) return;
        var box = document.createElement("div");
        box.innerHTML = html.trim();
        var card = box.firstElementChild;
        if (!card) return;
        var existing = document.getElementById(card.id);
        if (existing) existing.replaceWith(card); else list.appendChild(card);
        if (window.htmx) htmx.process(card);
        if (!existing) card.scrollIntoView({ block: "nearest" });
      })
      .catch(function () { /* offline: a reload shows pending questions */ });
  }
  document.addEventListener("hermes:event", function (e) {
    var frame = e.detail || {};
    if (frame.type !== "clarify.requested" && frame.type !== "clarify.answered") return;
    var chat = document.getElementById("chat");
    var question = (frame.payload || {}).question || {};
    if (!chat || String(frame.session_id) !== chat.dataset.sessionId || !question.id) return;
    show(chat.dataset.sessionId, question.id);
  });
})();
