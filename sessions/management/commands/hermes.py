"""`python manage.py hermes chat|policy`: the CLI over the same services as the web UI.

- ``hermes chat "<message>" [--session ID] [--user NAME] [--json]`` runs one turn through
  turn_start and the same Celery task (executed in this process), then prints the reply, or
  every event of the turn as JSON lines carrying the session id.
- ``hermes policy "<command>" [--user NAME] [--session ID] [--stdin] [--backend B]`` prints
  the approval policy's decision, the rule that made it and the normalised command; with
  --stdin one tab-separated line per input line (decision, rule, command as given), in
  order. --backend local|sandbox decides as if commands ran there (default: the one in
  force, which under the sandbox allows all but the deny list, seed "What is not here").
"""

from __future__ import annotations

import json
import sys

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from sessions.models import RunEvent, Session


class Command(BaseCommand):
    help = "Chat with the agent or check the approval policy from the command line."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        chat = sub.add_parser("chat", help="run one turn and print the reply")
        chat.add_argument("message")
        chat.add_argument("--session", type=int)
        chat.add_argument("--user", default="demo")
        chat.add_argument("--json", action="store_true", help="print events as JSON lines")
        policy = sub.add_parser("policy", help="show the policy decision for a command")
        policy.add_argument("command", nargs="?", default="")
        policy.add_argument("--user", default=None)
        policy.add_argument("--session", type=int)
        policy.add_argument("--stdin", action="store_true")
        policy.add_argument("--backend", choices=["local", "sandbox"],
                            help="decide as if commands ran on this backend (default: the "
                                 "one in force)")

    def handle(self, *args, **options):
        if options["action"] == "chat":
            return self.chat(options)
        return self.policy(options)

    def _user(self, name: str):
        try:
            return get_user_model().objects.get(username=name)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {name!r} (create one with createsuperuser)")

    def chat(self, options) -> None:
        from sessions.selectors import session_get
        from sessions.services import session_create, turn_start
        from sessions.tasks import turn_run_task

        from django.conf import settings

        if settings.HERMES["SIMULATOR_EMBEDDED"] and settings.HERMES["PROVIDER"].startswith(
                "simulator"):
            from hermes_web.embedded import start_simulator

            start_simulator()  # embedded mode: the simulator lives in this process too
        user = self._user(options["user"])
        if options["session"]:
            from django.http import Http404
            try:
                session = session_get(user=user, session_id=options["session"], write=True)
            except Http404:
                raise CommandError(f"no session {options['session']} for {user.username}")
        else:
            session = session_create(user=user)
        start_seq = session.event_seq
        try:
            turn = turn_start(session=session, user=user, text=options["message"])
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages))
        turn_run_task.apply(args=[session.pk])  # same task, run here, in order
        turn.refresh_from_db()
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
        last = session.messages.filter(role="assistant", active=True).order_by("-id").first()
        if turn.status == "failed":
            raise CommandError(f"turn failed: {turn.error[:500]}")
        if turn.status == "awaiting_approval":
            self.stdout.write("(awaiting approval: decide in the web UI's approval queue)")
        self.stdout.write(last.content if last else "")
        self.stdout.write(f"(session {session.pk})")

    def policy(self, options) -> None:
        from agents.commands import parse_command
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
            ctx = replace(ctx, backend_isolated=options["backend"] == "sandbox")
        with bind_identity(session_id=ctx.session_id, user_id=ctx.user_id):
            self._decide_and_print(ctx, options, check_command, parse_command)

    def _decide_and_print(self, ctx, options, check_command, parse_command) -> None:
        if options["stdin"]:
            for line in sys.stdin.read().splitlines():
                if not line.strip():
                    continue
                decision = check_command(line, ctx)
                self.stdout.write(f"{decision.verdict}\t{decision.rule}\t{line}")
            return
        if not options["command"]:
            raise CommandError("give a command to check, or --stdin")
        decision = check_command(options["command"], ctx)
        self.stdout.write(f"decision:   {decision.verdict}")
        self.stdout.write(f"rule:       {decision.rule}")
        self.stdout.write(f"reason:     {decision.reason}")
        normalized = decision.normalized or parse_command(options["command"]).normalized
        self.stdout.write(f"normalised: {normalized}")
