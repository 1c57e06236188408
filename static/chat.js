/* Hermes chat page: the websocket client (docs/protocol.md). No framework; htmx handles forms.
 *
 * The server renders the transcript and embeds the seq it read first (data-last-seq). This
 * script connects, says {"type":"hello","last_seq":N} and applies every frame once, in seq
 * order: frames with seq <= lastSeq are ignored, and HTML fragments replace the element with
 * the same id or are appended, so a replayed event never duplicates anything. While the
 * socket is down an honest "Reconnecting…" banner shows, the page polls the events endpoint,
 * and the socket is retried with jittered exponential backoff.
 */
(function () {
  "use strict";
  var chat = document.getElementById("chat");
  if (!chat) return;
  var sessionId = Number(chat.dataset.sessionId);
  var lastSeq = Number(chat.dataset.lastSeq) || 0;
  var transcript = document.getElementById("transcript");
  var banner = document.getElementById("banner");
  var socket = null, attempts = 0, pollTimer = null, retryTimer = null, closedForGood = false;
  var FINAL_CLOSE = { 4401: "You are signed out. Log in again to continue.",
                      4403: "You no longer have access to this session.",
                      4404: "This session is not available." };

  function showBanner(text, kind) {
    banner.textContent = text;
    banner.dataset.kind = kind || "warn";
    banner.hidden = false;
  }
  function hideBanner() { banner.hidden = true; banner.textContent = ""; }

  function nearBottom() {
    var el = document.scrollingElement;
    return el.scrollHeight - el.scrollTop - el.clientHeight < 160;
  }
  function toBottom() { var el = document.scrollingElement; el.scrollTop = el.scrollHeight; }

  function fragment(html) {
    var template = document.createElement("template");
    template.innerHTML = html;
    return Array.prototype.slice.call(template.content.children);
  }

  /* Put one rendered element in place: replace the element with the same id (merging only
     the parts listed in data-merge, so a finished tool card keeps its arguments), else
     append it to the transcript (before a streaming bubble, which always stays last). */
  function place(el) {
    var existing = el.id ? document.getElementById(el.id) : null;
    /* A turn's usage line comes with its end. A turn stopped by a budget and resumed ends
       twice: its final line belongs after the resumed reply, where a reload draws it
       (sessions/rendering.py _turn_footers), not where the stop left the first one. */
    if (existing && el.classList.contains("usage")) {
      existing.remove();
      existing = null;
    }
    if (existing) {
      /* Finished states (sessions/tool_cards.py FINISHED_STATUSES): never back to running,
         nor to queued (a reply's card before its call started). */
      var done = ["done", "error", "failed", "stopped", "cancelled", "denied", "expired"]
        .indexOf(existing.dataset.status) >= 0;
      if (done && (el.dataset.status === "running" || el.dataset.status === "queued")) return;
      var merge = (existing.dataset.merge || "").split(" ").filter(Boolean);
      /* A call whose approval was decided never ran: its result (an error that says so)
         brings the text, not a new state ("denied" used to turn into "error"). */
      var decided = ["cancelled", "denied", "expired"].indexOf(existing.dataset.status) >= 0;
      if (decided && (el.dataset.status === "error" || el.dataset.status === "denied")) {
        merge = merge.filter(function (cls) { return cls !== "tool-status"; });
        el.dataset.status = existing.dataset.status;
      }
      if (merge.length && existing.tagName === el.tagName && el.dataset.status !== "running") {
        merge.forEach(function (cls) {
          var from = el.querySelector("." + cls), to = existing.querySelector("." + cls);
          if (from && to) to.replaceWith(from);
        });
        Object.keys(el.dataset).forEach(function (k) { existing.dataset[k] = el.dataset[k]; });
        if (window.htmx) htmx.process(existing);
        return;
      }
      existing.replaceWith(el);
    } else {
      var empty = document.getElementById("empty-chat");
      if (empty) empty.remove();
      var streaming = document.getElementById("streaming");
      transcript.insertBefore(el, streaming && el !== streaming ? streaming : null);
    }
    if (window.htmx) htmx.process(el);
  }

  /* Text a model, a tool or a user wrote, as DOM nodes: each hidden or control character
     (bidi overrides, zero-width...) becomes a marked <span class="ctl">⟨U+202E⟩</span>, as
     the server draws it, so streamed text cannot read differently from what it is
     ("Trojan Source"). Which characters, and their names, come from sessions/visible.py
     through #chat's data-visible (one list, not a copy here); right-to-left letters stay. */
  var VISIBLE = JSON.parse(chat.dataset.visible || '{"pattern":"[]","names":{}}');
  function visibleNodes(text) {
    var out = document.createDocumentFragment(), hidden = new RegExp(VISIBLE.pattern, "gu");
    var end = 0, match;
    while ((match = hidden.exec(text)) !== null) {
      if (match.index > end) out.appendChild(document.createTextNode(text.slice(end, match.index)));
      var code = match[0].codePointAt(0), mark = document.createElement("span");
      mark.className = "ctl"; mark.title = "hidden character";
      mark.textContent = "⟨" + (VISIBLE.names[code] ||
        "U+" + code.toString(16).toUpperCase().padStart(4, "0")) + "⟩";
      out.appendChild(mark);
      end = hidden.lastIndex;
    }
    if (end < text.length) out.appendChild(document.createTextNode(text.slice(end)));
    return out;
  }

  function appendDelta(payload) {
    var bubble = document.getElementById("streaming");
    if (!bubble) {
      bubble = fragment('<article class="msg msg-assistant streaming" id="streaming">' +
        '<div class="msg-meta">Hermes</div><div class="msg-body stream-text"></div></article>')[0];
      var empty = document.getElementById("empty-chat");
      if (empty) empty.remove();
      transcript.appendChild(bubble);
    }
    bubble.querySelector(".stream-text").appendChild(visibleNodes(payload.text || ""));
  }

  /* The header badge: the server pushes {"type":"approval.badge","count":n} to each
     reviewer's user group whenever a request of theirs is created or decided; n is the
     authoritative count, so the badge is set, never counted up or down here. */
  function setBadge(count) {
    var link = document.getElementById("approvals-link");
    if (!link || typeof count !== "number") return;
    var badge = document.getElementById("approvals-badge");
    if (!badge) {
      badge = document.createElement("span");
      badge.id = "approvals-badge"; badge.className = "badge"; badge.title = "pending approvals";
      link.appendChild(document.createTextNode(" ")); link.appendChild(badge);
    }
    badge.textContent = String(count);
    badge.hidden = count === 0;
    badge.style.display = count === 0 ? "none" : "";  /* .badge's display beats [hidden] */
  }

  /* Set when this tab sent an action that answers with a redirect (edit, regenerate, fork,
     model switch), so the rewind event it causes does not reload the page a second time. */
  var leaving = false;
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail.elt;
    if (elt && elt.closest && (elt.closest(".msg-actions") || elt.closest(".chat-actions"))) leaving = true;
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    if (!e.detail.successful) leaving = false;
  });

  /* The header's session cost (#session-cost): each "usage" event is one provider call
     (sessions/sink.py), carrying its cost as a decimal string, or null when unknown. Summed
     in billionths of a dollar (static/money.js), never as floats, and written by the same
     formatter as the server's, so the live header reads what a reload would. */
  function addCallCost(payload) {
    var head = document.getElementById("session-cost");
    if (!head) return;
    var money = window.hermesMoney;
    var unknown = Number(head.dataset.unknown) || 0;
    if (payload.cost_usd === null || payload.cost_usd === undefined) {
      unknown += 1;
    } else {
      head.dataset.usd = money.fromNanos(money.nanos(head.dataset.usd || "0") +
                                         money.nanos(payload.cost_usd));
    }
    head.dataset.unknown = String(unknown);
    head.textContent = money.usd(head.dataset.usd || "0") +
      (unknown ? " + " + unknown + " unknown" : "");
    head.hidden = false;
  }

  function signal(name) { document.body.dispatchEvent(new CustomEvent(name)); }

  /* Notifications while the tab is hidden: a count in the title, and a browser
     notification when the user has allowed them (asked once, on the first message sent). */
  var LONG_TURN_MS = 15000, turnStartedAt = 0, unseen = 0, baseTitle = document.title;
  function attention(title, body) {
    if (!document.hidden) return;
    unseen += 1;
    document.title = "(" + unseen + ") " + baseTitle;
    if (window.Notification && Notification.permission === "granted") {
      try { new Notification(title, { body: body, tag: "hermes-" + sessionId }); } catch (err) { /* unsupported */ }
    }
  }
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && unseen) { unseen = 0; document.title = baseTitle; }
  });
  document.addEventListener("htmx:beforeRequest", function (e) {
    if (e.detail.elt && e.detail.elt.id === "composer" && window.Notification &&
        Notification.permission === "default") {
      try { Notification.requestPermission(); } catch (err) { /* unsupported */ }
    }
  });

  /* Esc stops the running turn (when no dialog, menu or edit box has the key). */
  document.addEventListener("keydown", function (e) {
    if (e.key !== "Escape" || e.defaultPrevented) return;
    if (document.querySelector("dialog[open]") || document.body.classList.contains("drawer-open")) return;
    var stop = document.getElementById("stop-button");
    if (stop) { e.preventDefault(); stop.click(); }
  });

  function apply(frame) {
    if (frame.type === "approval.badge") { setBadge(frame.count); return; }
    if (frame.session_id !== sessionId) return;
    if (typeof frame.seq !== "number" || frame.seq <= lastSeq) return;
    lastSeq = frame.seq;
    document.dispatchEvent(new CustomEvent("hermes:event", { detail: frame }));  /* todo.js, clarify.js */
    var follow = nearBottom();
    var payload = frame.payload || {};
    if (frame.type === "text.delta") {
      appendDelta(payload);
    } else if (frame.type === "usage") {
      addCallCost(payload);
    } else if (frame.type === "session.updated" && payload.title) {
      var heading = document.getElementById("session-title");
      heading.textContent = payload.title;
      heading.title = payload.title;
      document.title = baseTitle = payload.title + " · Hermes Web";
      /* The sidebar names the session too: it kept "New session" until a reload. */
      var entry = document.querySelector("#sidebar-session-" + sessionId + " > a");
      if (entry) { entry.textContent = payload.title; entry.title = payload.title; }
    } else if (frame.type === "session.updated" && payload.rewound_from) {
      /* An edit or regenerate from this tab already navigates (HX-Redirect): one load only. */
      if (!leaving) window.location.reload();
      return;
    }
    if (frame.html) {
      var message = payload.message || {};
      if (frame.type === "message.added" && message.role === "user" && payload.turn_id) {
        /* A correction that landed inside a running turn names its own queued bubble. */
        var queued = document.getElementById("queued-" + (payload.steer_turn_id || payload.turn_id));
        if (queued) queued.remove();
      }
      var streaming = document.getElementById("streaming");
      var replacesStream = frame.type === "message.added" && message.role === "assistant";
      fragment(frame.html).forEach(place);
      if (replacesStream && streaming) streaming.remove();
    }
    if (frame.type === "tool.result" || frame.type === "workspace.changed") signal("hermes:workspace");
    if (frame.type === "compaction" || frame.type === "prune") signal("hermes:turn-ended");
    if (frame.type === "turn.started") turnStartedAt = Date.now();
    /* A turn resumed after its worker died asks the model again for the reply being
       streamed: drop the dead worker's partial text, or the reply shows twice
       (sessions/rendering.py streaming_text does the same on a reload). */
    if (frame.type === "turn.recovered") {
      var cut = document.getElementById("streaming");
      if (cut) cut.remove();
    }
    /* A queued bubble goes when its turn stores the user message (above). A /compact or
       /prune turn stores none, and a turn stopped before it ran never will: once the turn
       starts as such a command, or ends, nothing is queued any more (a reload shows the same). */
    if ((frame.type === "turn.started" && payload.command) ||
        /^turn\.(finished|failed|cancelled)$/.test(frame.type)) {
      var pending = payload.turn_id && document.getElementById("queued-" + payload.turn_id);
      if (pending) pending.remove();
    }
    if (frame.type === "turn.awaiting_approval") {
      attention("An approval is waiting", "A tool call in “" + document.getElementById("session-title").textContent + "” needs your decision.");
    }
    if (/^turn\.(finished|failed|cancelled)$/.test(frame.type)) {
      signal("hermes:turn-ended");
      if (turnStartedAt && Date.now() - turnStartedAt > LONG_TURN_MS) {
        attention("The turn finished", "“" + document.getElementById("session-title").textContent + "”: " + frame.type.slice(5) + ".");
      }
      turnStartedAt = 0;
      var leftover = document.getElementById("streaming");
      if (leftover) leftover.classList.add("stream-ended");
      if (leftover) leftover.id = "";
    }
    if (follow) toBottom();
  }

  function poll() {
    fetch("/sessions/" + sessionId + "/events/?after=" + lastSeq, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) { if (data) data.events.forEach(apply); })
      .catch(function () { /* still offline; the banner says so */ });
  }
  function startPolling() { if (!pollTimer) pollTimer = setInterval(poll, 3000); }
  function stopPolling() { clearInterval(pollTimer); pollTimer = null; }

  function connect() {
    retryTimer = null;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + "/ws/sessions/" + sessionId + "/");
    socket.onopen = function () {
      attempts = 0;
      socket.send(JSON.stringify({ type: "hello", last_seq: lastSeq }));
      hideBanner();
      stopPolling();
    };
    socket.onmessage = function (e) {
      var frame;
      try { frame = JSON.parse(e.data); } catch (err) { return; }
      if (frame.type === "error" && typeof frame.seq !== "number") {
        showBanner(frame.payload && frame.payload.reason || "The server reported an error.", "error");
        return;
      }
      apply(frame);
    };
    socket.onclose = function (e) {
      socket = null;
      if (FINAL_CLOSE[e.code]) { closedForGood = true; stopPolling(); showBanner(FINAL_CLOSE[e.code], "error"); return; }
      attempts += 1;
      var delay = Math.min(30000, 500 * Math.pow(2, attempts)) * (0.5 + Math.random() / 2);
      showBanner("Reconnecting… (live updates paused; checking for new events every few seconds)");
      startPolling();
      retryTimer = setTimeout(connect, delay);
    };
  }

  /* The composer's text is kept in sessionStorage until it is sent, so nothing typed is
     lost when a send finds the login gone (hermes_web/middleware.py answers with
     HX-Redirect to the login page, which comes back here) or the tab reloads. */
  var DRAFT_KEY = "hermes-draft-" + sessionId;
  function saveDraft() {
    var box = document.getElementById("composer-text");
    if (!box) return;
    try {
      if (box.value) sessionStorage.setItem(DRAFT_KEY, box.value);
      else sessionStorage.removeItem(DRAFT_KEY);
    } catch (err) { /* storage disabled: nothing to keep it in */ }
  }
  function restoreDraft() {
    var box = document.getElementById("composer-text");
    if (!box || box.value) return;
    try { box.value = sessionStorage.getItem(DRAFT_KEY) || ""; } catch (err) { /* none */ }
  }
  document.addEventListener("input", function (e) {
    if (e.target.id === "composer-text") saveDraft();
  });
  document.addEventListener("htmx:beforeRequest", function (e) {
    if (e.detail.elt && e.detail.elt.id === "composer") saveDraft();
  });

  /* The composer's keys (Enter sends, Shift+Enter adds a line, Alt+Enter steers) are bound
     by static/composer.js, loaded before this deferred script so no key is lost meanwhile. */
  document.addEventListener("htmx:afterRequest", function (e) {
    var form = e.detail.elt;
    if (form.id === "composer" && e.detail.successful && e.detail.xhr.status === 200) {
      var text = form.querySelector("#composer-text");
      if (text) { text.value = ""; text.focus(); }
      saveDraft();  /* sent: forget it */
      var error = document.getElementById("composer-error");
      if (error) error.remove();
    }
  });
  /* A composer POST that failed changed nothing, and htmx swaps nothing for a 403, 404 or
     5xx, nor when the network is down (base.html responseHandling): the page used to stay
     silent, a 404 in the console only (a session deleted from another tab). Say what
     happened; the typed text stays in the box, and a session that is gone links to the list. */
  var sendError = document.getElementById("send-error");
  function fromComposer(elt) { return elt && (elt.id === "composer" || elt.id === "steer-button"); }
  function showSendError(text, link) {
    if (!sendError) return;
    sendError.textContent = text;
    if (link) {
      var a = document.createElement("a");
      a.href = link.href; a.textContent = link.text;
      sendError.appendChild(document.createTextNode(" "));
      sendError.appendChild(a);
    }
    sendError.hidden = false;
    sendError.scrollIntoView({ block: "nearest" });
  }
  function sendFailure(status) {
    var kept = " Your message was not sent; its text is still in the box.";
    if (status === 404) {
      return ["This session no longer exists (it was deleted)." + kept,
              { href: sendError.dataset.sessionsUrl || "/", text: "Go to your sessions" }];
    }
    if (status === 403) {
      /* A lost access, or a CSRF refusal after signing out in another tab: reload to see which. */
      return ["The server refused this message (403): you may have been signed out or lost access to this session." + kept + " Reload the page to check.", null];
    }
    return ["The server could not take your message (error " + status + ")." + kept + " Try again.", null];
  }
  document.addEventListener("htmx:responseError", function (e) {
    if (!fromComposer(e.detail.elt)) return;
    var failure = sendFailure(e.detail.xhr.status);
    showSendError(failure[0], failure[1]);
  });
  document.addEventListener("htmx:sendError", function (e) {
    if (!fromComposer(e.detail.elt)) return;
    showSendError("Could not reach the server. Your message was not sent; its text is still in the box. Try again when you are back online.", null);
  });
  /* A new attempt starts without the last failure's words: they would say the wrong thing
     if this one fails differently, or linger once it succeeds. */
  document.addEventListener("htmx:beforeRequest", function (e) {
    if (fromComposer(e.detail.elt) && sendError) { sendError.hidden = true; sendError.textContent = ""; }
  });
  window.addEventListener("online", function () {
    if (!socket && !closedForGood) { clearTimeout(retryTimer); connect(); }
  });

  restoreDraft();
  connect();
  /* A notice from the last action (e.g. "There is nothing to rewind.") is at the top of the
     page: show it rather than jumping to the end of a long transcript past it. */
  var flash = document.querySelector(".flash");
  if (flash) flash.scrollIntoView({ block: "start" }); else toBottom();
  window.hermesChat = { lastSeq: function () { return lastSeq; } };
})();
