/* The composer's keys: Enter sends, Shift+Enter adds a line, Alt+Enter sends the text as a
 * correction to the running turn (the Steer button). Nothing happens while an IME is
 * composing, and Enter in a blank box does nothing.
 *
 * This file is loaded WITHOUT defer in the session page's <head> (templates/sessions/
 * detail.html), so its handler exists before the composer is drawn. htmx, chat.js and
 * steer.js are deferred: a key pressed before they ran used to add a newline and send
 * nothing (a tester's finding). Now such a key is remembered instead: the box turns read-only
 * and dims (the form is aria-busy) and the message goes out through htmx as soon as the
 * page's scripts have run, exactly as if the key had been pressed a moment later. Should htmx
 * never load, the form is submitted natively (the same view answers with a redirect back to
 * the session; Steer through the button's formaction).
 *
 * A plain external file (no inline script): the Content-Security-Policy forbids inline code.
 */
(function () {
  "use strict";
  var ready = document.readyState !== "loading";
  var pending = null;  /* "send" or "steer", when a key was pressed before the page was ready */

  function box() { return document.getElementById("composer-text"); }

  function go(kind) {
    var text = box();
    var form = text && text.form;
    if (!form || !text.value.trim()) return;
    if (kind === "steer") {
      /* A click, not requestSubmit: htmx posts the button's own hx-post (/steer/); without
         htmx the button's formaction does the same natively. */
      var steer = document.getElementById("steer-button");
      if (steer) steer.click();
    } else if (form.requestSubmit) {
      form.requestSubmit();
    } else {
      form.submit();
    }
  }

  function flush() {
    ready = true;
    var kind = pending;
    pending = null;
    var text = box();
    if (text) {
      text.readOnly = false;
      if (text.form) text.form.removeAttribute("aria-busy");
    }
    if (kind) go(kind);
  }

  document.addEventListener("keydown", function (e) {
    if (e.key !== "Enter" || !e.target || e.target.id !== "composer-text") return;
    if (e.shiftKey || e.isComposing || e.keyCode === 229) return;  /* a new line; an IME's Enter */
    e.preventDefault();
    if (pending || !e.target.value.trim()) return;
    var kind = e.altKey ? "steer" : "send";
    if (ready) { go(kind); return; }
    pending = kind;
    e.target.readOnly = true;  /* what is sent is what the box shows */
    if (e.target.form) e.target.form.setAttribute("aria-busy", "true");
  });

  if (!ready) {
    /* htmx binds the forms in its own DOMContentLoaded listener, registered after this one
       (its script is deferred): send on the next task, once that has run. */
    document.addEventListener("DOMContentLoaded", function () { setTimeout(flush, 0); });
  }
})();
