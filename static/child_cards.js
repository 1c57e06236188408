/* Child agent cards (issue 12; markup in templates/sessions/_child_cards.html).
 *
 * Every delegate tool card is followed by a .child-cards section. This script fills each
 * section from /sessions/<id>/children.json (one card per child: goal, status, iterations,
 * tokens, cost, a link to the child's read-only transcript) and keeps polling while any
 * child has not ended or a section is still empty; it stops when all have ended and starts
 * again when the socket inserts a new section (a MutationObserver on the transcript) or a
 * child event arrives. It also keeps the header's children total (#children-cost) current.
 * Polling, not the socket, because the children's events are on their own sessions.
 */
(function () {
  "use strict";
  var head = document.getElementById("children-cost");
  var url = head && head.dataset.childrenUrl;
  if (!url) return;
  var POLL_MS = 1500, EMPTY_TRIES = 20;
  var timer = null, inFlight = false, emptyTries = 0;

  /* static/money.js, the twin of the server's formatter (accounts/money.py). */
  function usd(text) {
    if (text === null || text === undefined) return "cost unknown";
    return window.hermesMoney.usd(text);
  }

  function sections() {
    return Array.prototype.slice.call(document.querySelectorAll(".child-cards[data-call-id]"));
  }

  function fillCard(el, child) {
    el.dataset.status = child.status;
    el.dataset.childId = String(child.child_id);
    el.id = "child-card-" + child.child_id;
    el.querySelector(".child-index").textContent = "Child " + child.index;
    el.querySelector(".child-goal").textContent = child.goal;
    var status = el.querySelector(".child-status");
    status.textContent = child.status_label;
    status.className = "child-status tool-status status-" + child.status;
    el.querySelector(".child-iterations").textContent = String(child.iterations);
    el.querySelector(".child-tokens").textContent = Number(child.tokens).toLocaleString();
    // the nouns follow the counts: a child that answers in one model call is "1 iteration"
    el.querySelector(".child-iterations-unit").textContent =
      child.iterations === 1 ? "iteration" : "iterations";
    el.querySelector(".child-tokens-unit").textContent = child.tokens === 1 ? "token" : "tokens";
    el.querySelector(".child-cost").textContent = usd(child.cost_usd);
    el.querySelector(".child-link").href = child.url;
  }

  function render(section, children) {
    var template = section.querySelector("template.child-card-template");
    if (!template) return;
    var empty = section.querySelector(".child-cards-empty");
    if (empty) empty.hidden = children.length > 0;
    children.forEach(function (child) {
      var el = section.querySelector('.child-card[data-child-id="' + child.child_id + '"]');
      if (!el) {
        el = template.content.firstElementChild.cloneNode(true);
        section.appendChild(el);
      }
      fillCard(el, child);
    });
  }

  function renderTotal(total) {
    if (!total || !total.children) return;
    head.hidden = false;
    head.querySelector(".children-cost-usd").textContent = usd(total.cost_usd);
    head.querySelector(".children-cost-unknown").textContent =
      total.unknown ? " + " + total.unknown + " unknown" : "";
  }

  function schedule(ms) {
    if (timer) clearTimeout(timer);
    timer = setTimeout(refresh, ms);
  }

  function refresh() {
    timer = null;
    var all = sections();
    if (!all.length || inFlight) return;
    inFlight = true;
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (data) {
        var byCall = {};
        data.children.forEach(function (child) {
          (byCall[child.call_id] = byCall[child.call_id] || []).push(child);
        });
        var live = data.children.some(function (c) { return !c.ended; });
        var emptyLeft = false;
        all.forEach(function (section) {
          var children = byCall[section.dataset.callId] || [];
          render(section, children);
          if (!children.length) emptyLeft = true;
        });
        renderTotal(data.total);
        /* An empty section: its children are being created, or the call failed before any
           existed (a validation error); give up after a while in the second case. */
        emptyTries = emptyLeft ? emptyTries + 1 : 0;
        if (live || (emptyLeft && emptyTries < EMPTY_TRIES)) schedule(POLL_MS);
      })
      .catch(function () { schedule(POLL_MS * 4); })
      .then(function () { inFlight = false; });
  }

  var transcript = document.getElementById("transcript");
  if (transcript && window.MutationObserver) {
    new MutationObserver(function (mutations) {
      var added = mutations.some(function (m) {
        return Array.prototype.some.call(m.addedNodes, function (node) {
          return node.nodeType === 1 && (node.matches(".child-cards, .turn-status, .tool-card")
            || (node.querySelector && node.querySelector(".child-cards")));
        });
      });
      if (added) { emptyTries = 0; schedule(100); }
    }).observe(transcript, { childList: true, subtree: true });
  }
  var status = document.getElementById("turn-status");
  if (status && status.parentNode && window.MutationObserver) {
    /* The turn-status partial is swapped on every turn event: refresh the cards then too. */
    new MutationObserver(function () { schedule(100); })
      .observe(status.parentNode, { childList: true });
  }
  refresh();
})();
