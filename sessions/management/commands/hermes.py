"""`python manage.py hermes chat|policy|reprice|help`: the CLI over the same services as the
web UI.

- ``hermes help`` (or ``hermes`` alone, or ``--help``) prints OVERVIEW: every subcommand, and
  where the features without one live in the web UI (approvals, memory, schedules,
  webhooks, spend). They have no subcommand on purpose: deciding an approval, editing memory
  or a schedule belongs to the apps above sessions/ (approvals/, schedules/), which this
  command may not import (docs/architecture.md), and their pages are where their rules
  (who may decide, the memory cap, the next runs) are shown.

- ``hermes reprice [--since YYYY-MM-DD]`` re-prices usage rows at the rates in force
  (idempotent: a second run changes nothing).

- ``hermes chat "<message>" [--session ID] [--user NAME] [--json]`` runs one turn through
  turn_start and the same Celery task (on this process's embedded worker in embedded mode,
  on the `celery worker` processes in services mode), waits for it, then prints the reply,
  or every event of the turn as JSON lines carrying the session id.
- ``hermes policy "<command>" [--user NAME] [--session ID] [--stdin] [--backend B]`` prints
  the approval policy's decision, the rule that made it and the normalised command; with
  --stdin one tab-separated line per input line (decision, rule, command as given), in
  order, then (past SUMMARY_AFTER lines) a "# N commands: ... ask-or-deny P%" summary.
  --backend local|sandbox decides as if commands ran there (default: the one in force; under the sandbox the floor, the deny list and workspace-destroying commands still
  apply, seed "What is not here" and issue 8 item 3).
"""

from __future__ import annotations

import argparse
import json
import sys

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils.module_loading import import_string

from sessions.backends import local_confined
from sessions.hooks import MONEY
from sessions.models import RunEvent, Session, Turn

SUMMARY_AFTER = 5
"""``policy --stdin`` ends with a "# N commands: ... ask-or-deny P%" line past this many."""

OVERVIEW = """\
What this command does (python manage.py hermes <subcommand> --help for its options):
  chat "<message>" [--session ID] [--user NAME] [--json] [--timeout S]
        run one turn through the same services, policy and worker as the web UI and print
        the reply (or every event as JSON lines). Type "help" as the message to see what
        the demo script can do without an API key; "slow demo" is a turn long enough to
        try Steer in the web UI.
  policy "<command>" [--user NAME] [--session ID] [--stdin] [--backend local|sandbox]
        show the approval policy's decision for a command without running it.
  reprice [--since YYYY-MM-DD]
        re-price usage rows after rates change.
  help  this overview.

In the web UI (no subcommand here; paths under the address `make run` prints):
  Approvals  /approvals/   decide the commands waiting for a human; `chat` stops at
                           "(awaiting approval ...)" and the turn resumes once decided there.
             /approvals/rules/  the "always allow" rules you made.
  Memory     /memory/      your durable notes (the memory tool writes them too).
  Schedules  /schedules/   prompts run on a cron or interval, and their run history.
  Webhooks   /webhooks/    signed URLs that start a turn in a session.
  Questions  /sessions/<id>/  a clarify question waits for your answer on the session page.
  Spend      /spend/       costs, and (team admins) budgets.
  Settings   /settings/    backend and confinement in force, teams, MCP servers.
Other commands: python manage.py simulator --port 8765 (the provider simulator alone)."""
"""The full help: `hermes help`, `hermes` alone and the epilog of `hermes --help`."""


class Command(BaseCommand):
    help = ("Chat with the agent, check the approval policy, re-price usage; `hermes help` "
            "lists everything and where approvals, memory and schedules live in the web UI.")

    def create_parser(self, prog_name, subcommand, **kwargs):
        """The parser with OVERVIEW as its epilog, kept as written (line breaks)."""
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.epilog = OVERVIEW
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        return parser

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action")
        sub.add_parser("help", help="everything this command does, and where the rest lives "
                                    "in the web UI")
        chat = sub.add_parser("chat", help="run one turn and print the reply")
        chat.add_argument("message")
        chat.add_argument("--session", type=int)
        chat.add_argument("--user", default="demo")
        chat.add_argument("--json", action="store_true", help="print events as JSON lines")
        chat.add_argument("--timeout", type=float, default=600.0,
                          help="seconds to wait for the turn (default 600)")
        reprice = sub.add_parser("reprice", help="re-price usage at the rates in force")
        reprice.add_argument("--since", help="only usage from this date (YYYY-MM-DD, UTC)")
        policy = sub.add_parser("policy", help="show the policy decision for a command")
        policy.add_argument("command", nargs="?", default="")
        policy.add_argument("--user", default=None)
        policy.add_argument("--session", type=int)
        policy.add_argument("--stdin", action="store_true")
        policy.add_argument("--backend", choices=["local", "sandbox"],
                            help="decide as if commands ran on this backend (default: the "
                                 "one in force)")

    def handle(self, *args, **options):
        if options["action"] in (None, "help"):
            self.stdout.write(OVERVIEW)
            return None
        if options["action"] == "chat":
            return self.chat(options)
        if options["action"] == "reprice":
            return self.reprice(options)
        return self.policy(options)

    def reprice(self, options) -> None:
        """Re-price history after rates change (accounts/pricing.py usage_reprice)."""
        from datetime import datetime, timezone

        since = None
        if options.get("since"):
            try:
                since = datetime.strptime(options["since"], "%Y-%m-%d").replace(
                    tzinfo=timezone.utc)
            except ValueError:
                raise CommandError(f"--since {options['since']!r}: expected YYYY-MM-DD")
        counts = MONEY.usage_reprice(since=since)
        self.stdout.write(f"repriced {counts['seen']} usage rows: {counts['changed']} changed, "
                          f"{counts['unknown']} of unknown cost")

    def _user(self, name: str):
        try:
            return get_user_model().objects.get(username=name)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {name!r} (create one with createsuperuser)")

    def chat(self, options) -> None:
        from django.conf import settings

        from sessions.selectors import session_get
        from sessions.services import check_message_text, session_create, turn_start

        user = self._user(options["user"])
        try:
            check_message_text(options["message"])  # before anything is created
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages))
        if options["session"]:
            from django.http import Http404
            try:
                session = session_get(user=user, session_id=options["session"], write=True)
            except Http404:
                raise CommandError(f"no session {options['session']} for {user.username}")
        else:
            session = session_create(user=user)
        start_seq = session.event_seq
        if (settings.CELERY_BROKER_URL.startswith("memory://")
                and settings.HERMES["CLI_EMBEDDED_WORKER"]):
            # Embedded mode: this process is the worker (and the simulator's host) too. The
            # starter is named by the settings (hermes_web/embedded.py), not imported from
            # the project package above this app.
            import_string(settings.HERMES["EMBEDDED_START"])()
        try:
            turn = turn_start(session=session, user=user, text=options["message"])
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages))
        turn = self._wait(turn, options["timeout"])
        events = RunEvent.objects.filter(session=session, seq__gt=start_seq).order_by("seq")
        if options["json"]:
            from sessions.events import event_to_dict

            for event in events:
                self.stdout.write(json.dumps(event_to_dict(event), ensure_ascii=False))
            return
        for event in events:
            if event.type == "tool.called":
                call = event.payload["tool_call"]
                self.stdout.write(f"[tool] {call['name']} {call['arguments'][:200]}")
        if turn.status == "failed":
            raise CommandError(f"turn failed: {turn.error[:500]}")
        if turn.status == "awaiting_approval":
            self.stdout.write("(awaiting approval: decide in the web UI's approval queue, "
                              "/approvals/; the turn resumes once it is decided)")
        if turn.status == "awaiting_answer":
            self.stdout.write(f"(waiting for your answer to Hermes' question: answer it on the "
                              f"session page, /sessions/{session.pk}/)")
        if turn.status == "budget_blocked":
            self.stdout.write(f"(stopped by a budget: {turn.error}; raise the cap, then "
                              "resume the turn from the chat)")
        reply = (session.messages.filter(role="assistant", active=True,
                                         id__gt=turn.user_message_id or 0)
                 .order_by("-id").first())
        self.stdout.write(reply.content if reply else "")
        self.stdout.write(f"(session {session.pk})")

    def _wait(self, turn, timeout: float):
        """Poll until ``turn`` ends (completed, failed, cancelled) or waits for a human; the
        worker (this process in embedded mode, `celery worker` in services mode) runs it."""
        import time

        deadline = time.monotonic() + timeout
        ended = {Turn.Status.COMPLETED, Turn.Status.FAILED, Turn.Status.CANCELLED,
                 Turn.Status.BUDGET_BLOCKED, Turn.Status.AWAITING_APPROVAL,
                 Turn.Status.AWAITING_ANSWER}  # children finish on their own
        while time.monotonic() < deadline:
            turn.refresh_from_db()
            if turn.status in ended:
                return turn
            time.sleep(0.2)
        raise CommandError(f"turn {turn.pk} did not finish within {timeout:.0f} s "
                           f"(status {turn.status}); is a worker running?")

    def policy(self, options) -> None:
        from agents.policy.commands import parse_command
        from agents.policy import check_command
        from sessions.toolbox import policy_context_for

        session = None
        user = self._user(options["user"]) if options["user"] else None
        if options["session"]:
            session = Session.objects.filter(pk=options["session"]).first()
            if session is None:
                raise CommandError(f"no session {options['session']}")
            user = user or session.owner
        from agents.identity import bind_identity

        # A what-if check: nothing runs. It still decides as someone; without --user it is
        # an anonymous checker identity (never a real user's grants).
        ctx = policy_context_for(user=user, session=session)
        from dataclasses import replace

        if ctx.user_id is None:
            ctx = replace(ctx, user_id="policy-check")
        if options["backend"]:
            local = options["backend"] == "local"
            ctx = replace(ctx, backend_isolated=not local,
                          host_confined=local and local_confined())
        with bind_identity(session_id=ctx.session_id, user_id=ctx.user_id):
            self._decide_and_print(ctx, options, check_command, parse_command)

    def _decide_and_print(self, ctx, options, check_command, parse_command) -> None:
        if options["stdin"]:
            counts = {"allow": 0, "ask": 0, "deny": 0}
            for line in sys.stdin.read().splitlines():
                if not line.strip():
                    continue
                decision = check_command(line, ctx)
                counts[decision.verdict] += 1
                self.stdout.write(f"{decision.verdict}\t{decision.rule}\t{line}")
            total = sum(counts.values())
            if total > SUMMARY_AFTER:
                gated = counts["ask"] + counts["deny"]
                self.stdout.write(f"# {total} commands: {counts['allow']} allow, "
                                  f"{counts['ask']} ask, {counts['deny']} deny; "
                                  f"ask-or-deny {100 * gated / total:.1f}%")
            return
        if not options["command"]:
            raise CommandError("give a command to check, or --stdin")
        decision = check_command(options["command"], ctx)
        self.stdout.write(f"decision:   {decision.verdict}")
        self.stdout.write(f"rule:       {decision.rule}")
        self.stdout.write(f"reason:     {decision.reason}")
        normalized = decision.normalized or parse_command(options["command"]).normalized
        self.stdout.write(f"normalised: {normalized}")
