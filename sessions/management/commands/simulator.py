"""``python manage.py simulator --port N [--host H]``: serve the provider simulator in the
foreground until Ctrl-C. A thin shell over simulator.SimulatorServer; all behaviour
lives there (DESIGN.md §7)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from simulator import SimulatorServer


class Command(BaseCommand):
    help = "Serve the provider simulator (Anthropic Messages + OpenAI chat completions)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8765, help="TCP port (0: any free port)")
        parser.add_argument("--host", default="127.0.0.1", help="interface to bind")

    def handle(self, *args: Any, **options: Any) -> None:
        sim = SimulatorServer(host=options["host"], port=options["port"], follow_wall=True)
        self.stdout.write(f"Provider simulator on {sim.url} "
                          f"(ANTHROPIC_BASE_URL={sim.url}, OPENAI_BASE_URL={sim.url}/v1); "
                          "Ctrl-C to stop.")
        try:
            sim.serve_forever()
        except KeyboardInterrupt:
            self.stdout.write("Stopped.")
        finally:
            sim.stop()
