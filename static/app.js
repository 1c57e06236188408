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

  /* A "Copy" button on every fenced code block of a rendered message (the server highlights
     them, sessions/highlight.py). Blocks arriving over the socket get one too (observer). */
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    var area = document.createElement("textarea");
    area.value = text; area.setAttribute("readonly", ""); area.className = "visually-hidden";
    document.body.appendChild(area); area.select();
    var ok = document.execCommand("copy");
    area.remove();
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }
  function addCopyButtons(root) {
    if (!root.querySelectorAll) return;
    var blocks = root.matches && root.matches(".markdown pre") ? [root] : [];
    blocks = blocks.concat(Array.prototype.slice.call(root.querySelectorAll(".markdown pre")));
    blocks.forEach(function (pre) {
      if (pre.parentNode.classList.contains("code-block")) return;
      var wrap = document.createElement("div");
      wrap.className = "code-block";
      pre.parentNode.insertBefore(wrap, pre);
      wrap.appendChild(pre);
      var button = document.createElement("button");
      button.type = "button"; button.className = "copy-code"; button.textContent = "Copy";
      button.setAttribute("aria-label", "Copy this code");
      button.addEventListener("click", function () {
        copyText(pre.innerText.replace(/\n$/, "")).then(function () {
          button.textContent = "Copied";
        }, function () { button.textContent = "Copy failed"; });
        setTimeout(function () { button.textContent = "Copy"; }, 2000);
      });
      wrap.insertBefore(button, pre);
    });
  }
  function start() {
    addCopyButtons(document.body);
    new MutationObserver(function (records) {
      records.forEach(function (r) {
        Array.prototype.forEach.call(r.addedNodes, function (n) { if (n.nodeType === 1) addCopyButtons(n); });
      });
    }).observe(document.body, { childList: true, subtree: true });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
