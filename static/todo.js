/* The todo side panel (templates/sessions/_todo_panel.html): when the chat's event stream
   (static/chat.js, "hermes:event") carries todo.updated for this session, fetch the
   server-rendered panel and swap it in. No HTML is built here (the server escapes). */
(function () {
  "use strict";
  function refresh(sessionId) {
    fetch("/sessions/" + sessionId + "/todo/", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        var panel = document.getElementById("todo-panel");
        if (!html || !panel) return;
        var box = document.createElement("div");
        box.innerHTML = html.trim();
        if (box.firstElementChild) panel.replaceWith(box.firstElementChild);
      })
      .catch(function () { /* offline: the next event or a reload refreshes it */ });
  }
  document.addEventListener("hermes:event", function (e) {
    var frame = e.detail || {};
    var panel = document.getElementById("todo-panel");
    if (frame.type !== "todo.updated" || !panel) return;
    if (String(frame.session_id) !== panel.dataset.sessionId) return;
    refresh(panel.dataset.sessionId);
  });
})();
