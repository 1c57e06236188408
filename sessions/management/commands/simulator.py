"""``python manage.py simulator --port N [--host H]``: serve the provider simulator in the
foreground until Ctrl-C. A thin shell over simulator.SimulatorServer; all behaviour
lives there (DESIGN.md §7).

Its /_sim/* control API needs a token (simulator/control.py): HERMES_SIMULATOR_TOKEN when
set, else a random one for this run written to DATA_DIR/simulator_token (mode 0600, the
file `make run`'s embedded simulator uses too). The command prints where it is, never the
token itself (the Procfile's output may be logged where others can read it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from simulator import TOKEN_FILE_NAME, SimulatorServer, write_token_file


class Command(BaseCommand):
    help = "Serve the provider simulator (Anthropic Messages + OpenAI chat completions)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8765, help="TCP port (0: any free port)")
        parser.add_argument("--host", default="127.0.0.1", help="interface to bind")

    def handle(self, *args: Any, **options: Any) -> None:
        configured = settings.HERMES.get("SIMULATOR_TOKEN") or None
        sim = SimulatorServer(host=options["host"], port=options["port"], follow_wall=True,
                              token=configured)
        if configured:
            token_ref = "$HERMES_SIMULATOR_TOKEN"
        else:
            path = write_token_file(Path(settings.DATA_DIR) / TOKEN_FILE_NAME, sim.token)
            token_ref = f"$(cat {path})"
        self.stdout.write(f"Provider simulator on {sim.url} "
                          f"(ANTHROPIC_BASE_URL={sim.url}, OPENAI_BASE_URL={sim.url}/v1); "
                          "Ctrl-C to stop.")
        self.stdout.write(f"Control API: curl -H \"Authorization: Bearer {token_ref}\" "
                          f"{sim.url}/_sim/requests")
        try:
            sim.serve_forever()
        except KeyboardInterrupt:
            self.stdout.write("Stopped.")
        finally:
            sim.stop()
