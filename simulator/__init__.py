"""The provider simulator: a local HTTP server speaking the Anthropic Messages and OpenAI
chat-completions wire protocols, so the harness and its tests run the real SDKs against a
model stand-in (DESIGN.md §7). It validates requests as the real APIs do, accounts the prompt
cache byte-exactly on a controllable clock, injects faults and answers from a script (by
default a demo policy labelled "(simulated model)").

Plain Python (stdlib HTTP server); never imports django. The harness itself does not belong
here: nothing in agents/ outside tests and the composition root should import this package.

    sim = SimulatorServer(port=0).start()
    client = anthropic.Anthropic(base_url=sim.url, api_key="sim", max_retries=0)
    ...
    sim.stop()

The /_sim/* control API requires ``sim.token`` (``headers=sim.control_headers``; see
simulator/control.py): it exposes every user's prompts and steers every user's agent.
"""

from simulator.cache import CacheBlock, CacheOutcome, PromptCache, SimClock
from simulator.control import TOKEN_FILE_NAME, control_headers, read_token_file, \
    write_token_file
from simulator.demo import demo_policy
from simulator.faults import FAULT_KINDS, Fault
from simulator.script import Reply, Script, ScriptRequest, ScriptRule, ToolCallSpec, \
    ToolExchange
from simulator.server import SimulatorServer
from simulator.state import RecordedRequest, SimConfig, SimulatorState
from simulator.tokenizer import count_tokens, tokenize

__all__ = [
    "CacheBlock", "CacheOutcome", "FAULT_KINDS", "Fault", "PromptCache", "RecordedRequest",
    "Reply", "TOKEN_FILE_NAME", "Script", "ScriptRequest", "ScriptRule", "SimClock", "SimConfig",
    "SimulatorServer", "SimulatorState", "ToolCallSpec", "ToolExchange", "count_tokens",
    "control_headers", "demo_policy", "read_token_file", "tokenize", "write_token_file",
]
