/* Behaviour every page needs, kept out of the HTML so the Content-Security-Policy can forbid
 * inline script and handlers (issue 8, finding 10; hermes_web/settings.py).
 *
 * data-confirm="question" on a form, or on the submit button that sends it, asks before the
 * form is sent (plain or htmx); "Cancel" stops it before htmx sees the submit event.
 * Also: the sidebar (collapsible column, phone drawer), keyboard shortcuts, the gauge bar,
 * copy buttons. */
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

  /* The upload form's hidden "name": the chosen file's name as the browser has it. Django
     keeps only its last part, so the view compares the two to say when the file was saved
     under another name (sessions/views.py file_upload_view). Delegated: the panel is
     re-drawn by htmx. */
  document.addEventListener("change", function (e) {
    if (e.target.id !== "upload-file") return;
    var name = document.getElementById("upload-name");
    if (name) name.value = e.target.files.length ? e.target.files[0].name : "";
  });

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
      if (!pre.hasAttribute("tabindex")) pre.tabIndex = 0;  /* scrolls sideways: keyboard too */
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
  /* "Copy as Markdown" under a reply: the text as written (GET raw/?message=id). */
  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest(".copy-reply") : null;
    if (!button) return;
    fetch(button.dataset.source, { credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.text(); })
      .then(copyText)
      .then(function () { button.textContent = "Copied"; },
            function () { button.textContent = "Copy failed"; });
    setTimeout(function () { button.textContent = "Copy as Markdown"; }, 2000);
  });

  /* The context gauge's bar: widths come from data-width (percent); set here because the
     Content-Security-Policy forbids inline style attributes. */
  function drawGauges(root) {
    if (!root.querySelectorAll) return;
    Array.prototype.forEach.call(root.querySelectorAll("[data-width]"), function (el) {
      el.style.width = Math.max(0, Math.min(100, Number(el.dataset.width) || 0)) + "%";
    });
  }

  /* The session sidebar: a column that collapses on desktop (remembered), a drawer on
     phones (closed by default, by Esc, by the close button or a click outside it). */
  var PHONE = window.matchMedia("(max-width: 760px)");
  function sidebarOpen() { return !document.body.classList.contains(PHONE.matches ? "drawer-closed" : "sidebar-collapsed"); }
  function setSidebar(open) {
    var toggle = document.getElementById("sidebar-toggle");
    if (PHONE.matches) {
      document.body.classList.toggle("drawer-closed", !open);
      document.body.classList.toggle("drawer-open", open);
    } else {
      document.body.classList.toggle("sidebar-collapsed", !open);
      try { localStorage.setItem("hermes-sidebar", open ? "open" : "collapsed"); } catch (err) { /* none */ }
    }
    if (toggle) toggle.setAttribute("aria-expanded", open ? "true" : "false");
  }
  function initSidebar() {
    if (!document.getElementById("sidebar")) return;
    var stored = null;
    try { stored = localStorage.getItem("hermes-sidebar"); } catch (err) { /* none */ }
    document.body.classList.toggle("sidebar-collapsed", stored === "collapsed");
    document.body.classList.add("drawer-closed");
    var toggle = document.getElementById("sidebar-toggle");
    if (toggle) {
      toggle.setAttribute("aria-expanded", sidebarOpen() ? "true" : "false");
      toggle.addEventListener("click", function () { setSidebar(!sidebarOpen()); });
    }
    var close = document.getElementById("sidebar-close");
    if (close) close.addEventListener("click", function () { setSidebar(false); if (toggle) toggle.focus(); });
    PHONE.addEventListener("change", function () {
      if (toggle) toggle.setAttribute("aria-expanded", sidebarOpen() ? "true" : "false");
    });
    document.addEventListener("click", function (e) {
      if (!PHONE.matches || !document.body.classList.contains("drawer-open")) return;
      if (e.target.closest("#sidebar") || e.target.closest("#sidebar-toggle")) return;
      setSidebar(false);
    });
  }

  /* Keyboard shortcuts (listed in the "?" dialog, base.html): Ctrl/Cmd+K focuses the
     session search, "?" opens the list, Alt+N starts a session, Esc closes the drawer
     (static/chat.js also stops a running turn on Esc). */
  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }
  /* Alt+N presses the New session button in sight: the page's own (the session list), the
     sidebar's or the header's (only one shows at a time: static/app.css). Any of them posts
     the same form, so a hidden one is still pressed when none shows. */
  function newSessionButton() {
    var ids = ["new-session", "sidebar-new-session", "header-new-session"];
    for (var i = 0; i < ids.length; i++) {
      var el = document.getElementById(ids[i]);
      if (el && el.getClientRects().length && getComputedStyle(el).visibility === "visible") return el;
    }
    return document.getElementById("header-new-session");
  }
  function showShortcuts() {
    var dialog = document.getElementById("shortcuts");
    if (dialog && !dialog.open) dialog.showModal();
  }
  document.addEventListener("click", function (e) {
    if (e.target.closest && e.target.closest("[data-shortcuts]")) showShortcuts();
  });
  document.addEventListener("keydown", function (e) {
    if ((e.ctrlKey || e.metaKey) && !e.altKey && (e.key === "k" || e.key === "K")) {
      var search = document.getElementById("sidebar-q");
      if (!search) return;
      e.preventDefault();
      if (!sidebarOpen()) setSidebar(true);
      search.focus(); search.select();
      return;
    }
    if (e.altKey && !e.ctrlKey && !e.metaKey && (e.key === "n" || e.key === "N" || e.code === "KeyN")) {
      var button = newSessionButton();
      if (button) { e.preventDefault(); button.click(); }
      return;
    }
    if (e.key === "?" && !typing(e.target) && !e.ctrlKey && !e.metaKey) {
      e.preventDefault(); showShortcuts(); return;
    }
    if (e.key === "Escape" && PHONE.matches && document.body.classList.contains("drawer-open")) {
      setSidebar(false);
    }
  });

  function start() {
    initSidebar();
    drawGauges(document.body);
    addCopyButtons(document.body);
    new MutationObserver(function (records) {
      records.forEach(function (r) {
        Array.prototype.forEach.call(r.addedNodes, function (n) {
          if (n.nodeType === 1) { addCopyButtons(n); drawGauges(n); }
        });
      });
    }).observe(document.body, { childList: true, subtree: true });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
