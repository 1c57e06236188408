"""The team admin's MCP server form: every field checked, then (unless told not to) one
real connection that lists the server's tools and checks each exposed tool's name and JSON
schema. Bad input is a form error naming the problem; nothing is stored
(accounts/mcp_services.py stores in one transaction)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.utils import timezone

from agents.egress import EgressDenied, egress_check
from agents.tools.mcp import POLICIES, SERVER_NAME
from sessions.mcp import check_server
from sessions.mcp_models import POLICY_CHOICES, McpServer

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _lines(text: str) -> list[str]:
    return [line.strip() for line in (text or "").replace(",", "\n").splitlines()
            if line.strip()]


class McpServerForm(forms.Form):
    """name, transport, command or url, env (KEY=VALUE lines), expose (tool names; empty
    = all), default_policy, tool_policies ("tool: policy" lines), enabled, skip_check.
    ``team`` and ``instance`` (None for a new server) come from the view. After is_valid()
    ``cleaned_data["tools_listed"]`` holds what the check found (None when skipped)."""

    name = forms.CharField(max_length=24, help_text="lowercase letters, digits and hyphens; "
                           "tools appear as mcp__{name}__{tool}")
    transport = forms.ChoiceField(choices=McpServer.Transport.choices)
    command = forms.CharField(required=False, max_length=2000,
                              help_text="stdio: the command line the worker starts (no shell)")
    url = forms.CharField(required=False, max_length=2000,
                          help_text="streamable HTTP: the endpoint, e.g. https://host/mcp")
    env = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                          help_text="stdio: KEY=VALUE lines added to the server's environment")
    expose = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                             help_text="tool names to offer, one a line; empty offers all")
    default_policy = forms.ChoiceField(choices=POLICY_CHOICES, initial="ask")
    tool_policies = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                                    help_text="per-tool overrides: 'tool: read_only|ask|allow'")
    enabled = forms.BooleanField(required=False, initial=True)
    skip_check = forms.BooleanField(required=False, label="Save without connecting",
                                    help_text="for a server that is not up yet; its tools "
                                    "reach sessions once a worker connects")

    def __init__(self, *args, team, user=None, instance: McpServer | None = None, **kwargs):
        self.team, self.instance, self.user = team, instance, user
        if instance is not None and (not args or args[0] is None) and not kwargs.get("data"):
            kwargs["initial"] = {
                "name": instance.name, "transport": instance.transport,
                "command": instance.command, "url": instance.url,
                "env": "\n".join(f"{k}={v}" for k, v in sorted((instance.env or {}).items())),
                "expose": "\n".join(instance.expose or []),
                "default_policy": instance.default_policy,
                "tool_policies": "\n".join(f"{k}: {v}" for k, v in
                                           sorted((instance.tool_policies or {}).items())),
                "enabled": instance.enabled}
        super().__init__(*args, **kwargs)

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not SERVER_NAME.match(name):
            raise forms.ValidationError("Use 1-24 lowercase letters, digits or hyphens, "
                                        "starting with a letter (no underscores).")
        taken = McpServer.objects.filter(team=self.team, name=name)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise forms.ValidationError(f"This team already has a server named {name!r}; "
                                        "its tool names would collide.")
        return name

    def clean_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for line in (self.cleaned_data.get("env") or "").splitlines():
            if not line.strip():
                continue
            key, sep, value = line.partition("=")
            key = key.strip()
            if not sep or not _ENV_KEY.match(key):
                raise forms.ValidationError(f"{line.strip()!r} is not KEY=VALUE.")
            env[key] = value.strip()
        return env

    def clean_expose(self) -> list[str]:
        return sorted(set(_lines(self.cleaned_data.get("expose", ""))))

    def clean_tool_policies(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for line in (self.cleaned_data.get("tool_policies") or "").splitlines():
            if not line.strip():
                continue
            tool, sep, policy = line.partition(":")
            tool, policy = tool.strip(), policy.strip()
            if not sep or not tool or policy not in POLICIES:
                raise forms.ValidationError(f"{line.strip()!r}: write 'tool: policy' with "
                                            f"policy one of {', '.join(POLICIES)}.")
            out[tool] = policy
        return out

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        if data["transport"] == McpServer.Transport.STDIO:
            data["url"] = ""
            self._check_command(data.get("command", "").strip())
        else:
            data["command"], data["env"] = "", {}
            self._check_url(data.get("url", "").strip())
        if self.errors:
            return data
        data["tools_listed"] = None
        if not data.get("skip_check"):
            data["tools_listed"] = self._check_connection(data)
        return data

    def _check_command(self, command: str) -> None:
        allowed = settings.HERMES["MCP_STDIO_ALLOWED"]
        if allowed != "admins" and not (allowed == "staff" and self.user is not None
                                        and self.user.is_staff):
            # A stdio server is a program started on the worker host as the worker's user:
            # it can read what the worker can. The operator decides who may start one.
            self.add_error("transport", "stdio servers run a command on the server host; on "
                           "this deployment only " + ("staff" if allowed == "staff" else
                                                      "the operator") + " may add them "
                           "(HERMES_MCP_STDIO_ALLOWED). Use a streamable-HTTP server.")
            return
        if not command:
            self.add_error("command", "A stdio server needs a command.")
            return
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            self.add_error("command", f"The command cannot be split into words ({exc}).")
            return
        program = argv[0] if argv else ""
        found = (os.path.isfile(program) and os.access(program, os.X_OK)) if "/" in program \
            else shutil.which(program) is not None
        if not found:
            self.add_error("command", f"{program!r} is not an executable on this server "
                                      "(not found or not executable).")

    def _check_url(self, url: str) -> None:
        parts = urlsplit(url) if url and not any(c.isspace() for c in url) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            self.add_error("url", "Give an http:// or https:// URL with a host, e.g. "
                                  "https://tools.example.com/mcp.")
            return
        try:  # also checked before every request the worker sends (DNS can change)
            egress_check(url, allowed=settings.HERMES["MCP_HTTP_ALLOW_PRIVATE"])
        except EgressDenied as exc:
            self.add_error("url", str(exc))

    def _check_connection(self, data) -> list[dict] | None:
        row = McpServer(team=self.team, name=data["name"], transport=data["transport"],
                        command=data.get("command", ""), url=data.get("url", ""),
                        env=data.get("env") or {})
        try:
            good, rejected = check_server(row)
        except BaseException as exc:  # noqa: BLE001 — any failure to connect is a form error
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            self.add_error(None, f"Could not connect to the server and list its tools "
                                 f"({_describe(exc)}). Fix the command or URL, or tick "
                                 "'Save without connecting'.")
            return None
        exposed = set(data["expose"]) or {t.name for t in good} | {n for n, _ in rejected}
        bad = [f"{name}: {why}" for name, why in rejected if name in exposed]
        if bad:
            self.add_error(None, "These tools cannot be offered: " + "; ".join(bad) +
                           ". Leave them out of 'Tools to expose'.")
        unknown = sorted((set(data["expose"]) | set(data["tool_policies"]))
                         - {t.name for t in good} - {n for n, _ in rejected})
        if unknown:
            self.add_error("expose", f"The server does not offer: {', '.join(unknown)}.")
        self.checked_at = timezone.now()
        return [{"name": t.name, "description": t.description,
                 "input_schema": dict(t.input_schema)} for t in good]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
