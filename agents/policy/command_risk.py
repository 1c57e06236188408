"""What a parsed command puts at risk: the hardline floor, the sudo guard and the ask classes.

Input is a ParsedCommand (agents/policy/command_model.py: quotes, wrappers, flags, payloads already
normalised), so every rule reads meaning, not spelling (B29, B30). Sources: hermes-facts §10
(hardline patterns, sudo -S guard), seed "The fourth fault". The floor is narrow on purpose:
unrecoverable damage to the host (root or system trees, home, block devices, power, every
process); broader risk asks. Deciding on a finding (order, bypass, isolation) is
agents/policy/__init__.py.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Literal

from agents.policy.command_model import ParsedCommand, SimpleCommand
from agents.policy.command_tables import DELETING_FLAGS, HOST_TUNING, host_setting
from agents.policy.write_targets import write_targets

Level = Literal["hardline", "guard", "ask"]

SYSTEM_DIRS = frozenset({
    "/", "/etc", "/usr", "/bin", "/sbin", "/boot", "/var", "/lib", "/lib32", "/lib64",
    "/libx32", "/opt", "/root", "/home", "/srv", "/sys", "/proc", "/dev", "/run", "/snap",
    "/mnt", "/media", "/System", "/Library", "/Applications", "/private", "/Users"})
# Writes under these ask (the floor covers removing the trees themselves).
_SYSTEM_WRITE = re.compile(r"^(/etc|/usr|/bin|/sbin|/boot|/lib\w*|/sys|/proc|/var|/opt|/root"
                           r"|/dev(?!/(null|stdout|stderr|tty|fd/|zero$)))(/|$)"
                           r"|^~[^/]*/\.(ssh|bashrc|bash_profile|profile|zshrc|zprofile|"
                           r"bash_logout|config/autostart|gnupg|aws|kube|docker)")
_BLOCK_DEVICE = re.compile(r"^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d"
                           r"|rdisk\d|md\d|dm-\d|loop\d|mapper/|sr\d|nbd\d|zd\d|disk/|root$"
                           r"|mtdblock|ubd)")
_MKFS = re.compile(r"^(mkfs(\.\w+)?|mke2fs|mkswap|newfs(_\w+)?|mkdosfs|mkntfs|mkexfatfs)$")
_PARTITION = frozenset({"fdisk", "sfdisk", "parted", "gdisk", "cfdisk", "sgdisk"})
_POWER = frozenset({"shutdown", "reboot", "halt", "poweroff"})
_SYSTEMCTL_FLOOR = frozenset({"poweroff", "reboot", "halt", "kexec", "soft-reboot", "rescue",
                              "emergency"})
_SYSTEMCTL_ASK = frozenset({"stop", "disable", "mask", "kill", "isolate", "restart",
                            "suspend", "hibernate", "hybrid-sleep", "daemon-reexec"})
_SQL_CLIENTS = frozenset({"psql", "mysql", "mariadb", "sqlite3", "duckdb", "clickhouse-client",
                          "sqlcmd", "cockroach", "redis-cli", "mongosh", "mongo"})
# Landlock cannot refuse connect() to a Unix socket (psql → the app's PostgreSQL): ask.
_SERVICE_CLIENTS = _SQL_CLIENTS - {"sqlite3", "duckdb"}  # file databases: judged by path
_UNIX_SOCKET_CONNECT = re.compile(r"^(UNIX|ABSTRACT)-(CONNECT|CLIENT|SENDTO):", re.I)
_SQL_DESTRUCTIVE = re.compile(
    r"\b(DROP\s+(TABLE|DATABASE|SCHEMA|VIEW|USER|INDEX)|TRUNCATE\b|FLUSHALL|FLUSHDB"
    r"|dropDatabase|DELETE\s+FROM\b(?![^;]*\bWHERE\b)|ALTER\s+TABLE\s+\S+\s+DROP)", re.I)
_ADMIN = frozenset({"userdel", "deluser", "useradd", "adduser", "usermod", "passwd", "chpasswd",
                    "visudo", "mount", "umount", "swapoff", "swapon", "modprobe", "rmmod",
                    "insmod", "chattr", "setenforce", "iptables", "ip6tables", "nft", "ufw",
                    "dropdb", "dropuser", "crontab", "killall5", "pkill", "killall"})
_PACKAGE_MUTATE = re.compile(r"^(install|remove|purge|autoremove|upgrade|dist-upgrade|erase|"
                             r"-S\w*|-R\w*|add|del|reinstall|downgrade)$")
_PRIVILEGE = frozenset({"sudo", "doas", "su", "pkexec", "run0"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One reason a command is not plainly allowed.

    ``level``: "hardline" (deny, nothing overrides), "guard" (the sudo password guard,
    deny even under bypass) or "ask". ``command``: index into ParsedCommand.commands, or
    None when the finding concerns the whole line (then only a rule matching the whole
    normalised line can cover it)."""

    level: Level
    rule: str
    risk_class: str
    reason: str
    command: int | None = None


def expand_braces(text: str) -> list[str]:
    """bash brace expansion of ``text`` (``/a/{b,c}`` → ["/a/b", "/a/c"]); text unchanged
    when it has none. Ranges (``{1..3}``) are left as written."""
    m = re.match(r"^(.*?)\{([^{}]*,[^{}]*)\}(.*)$", text)
    if not m:
        return [text]
    return [x for alt in m.group(2).split(",")
            for x in expand_braces(m.group(1) + alt + m.group(3))]


def floor_target(target: str, cwd: str | None = None) -> bool:
    """True when removing ``target`` recursively is on the floor: ``/``, a system tree
    (SYSTEM_DIRS), a home directory (``~``, ``~user``, ``$HOME``), or a glob of their
    entries (``/*``, ``~/.*``). ``..``, ``.``, repeated slashes and braces are resolved
    lexically; a relative target counts only when ``cwd`` is a literal ``cd`` target."""
    for t in expand_braces(target):
        t = re.sub(r"^(\$HOME|\$\{HOME\})", "~", t.strip())
        if not t.startswith(("/", "~")):
            if cwd is None:
                continue
            t = re.sub(r"^(\$HOME|\$\{HOME\})", "~", cwd.rstrip("/") + "/" + t)
        home = t.startswith("~")
        if home:
            t = "/" + t.partition("/")[2]
        path = posixpath.normpath(re.sub(r"/+", "/", t))
        if re.search(r"[*?\[]", posixpath.basename(path)):
            path = posixpath.dirname(path) or "/"
        if (path == "/") if home else (path in SYSTEM_DIRS):
            return True
    return False


def _kill_all(argv: tuple[str, ...]) -> bool:
    """``kill -1``, ``kill -9 -1``, ``kill -s KILL -1``, ``kill -- -1``: every process."""
    args, pids, signal_seen, i = argv[1:], [], False, 0
    while i < len(args):
        a = args[i]
        if a == "--":
            pids += args[i + 1:]
            break
        if a in ("-s", "-n", "--signal"):
            signal_seen, i = True, i + 2
            continue
        if a.startswith("-") and not signal_seen and a[1:].isalnum():
            signal_seen, i = True, i + 1
            continue
        pids.append(a)
        i += 1
    return "-1" in pids or args == ("-1",)


def _floor(cmd: SimpleCommand) -> str | None:
    """The hardline reason for ``cmd``, or None."""
    argv = cmd.argv
    name, args = argv[0], argv[1:]
    ops = [a for a in args if not a.startswith("-")]
    devices = [a for a in ops + [a.split("=", 1)[1] for a in args if "=" in a]
               if _BLOCK_DEVICE.match(a)]
    if name == "rm" and ("--no-preserve-root" in args or (
            "-r" in args and any(floor_target(t, cmd.cwd) for t in ops))):
        return "recursive removal of /, a system directory or a home directory"
    if name in ("chmod", "chown", "chgrp") and "-R" in args and any(
            floor_target(t, cmd.cwd) for t in ops[1:]):
        return "recursive permission change of / or a system directory"
    if name == "find" and ("-delete" in args or "-exec" in args or "-execdir" in args):
        starts = [a for a in args[: next((i for i, a in enumerate(args)
                                          if a.startswith(("-", "(", "!"))), len(args))]]
        if any(floor_target(s, cmd.cwd) for s in starts) and (
                "-delete" in args or "rm" in args):
            return "find deleting under / or a system directory"
    if (_MKFS.match(name) or name in ("wipefs", "blkdiscard", "shred")) and devices:
        return f"{name} on a block device"
    if name == "sgdisk" and any(a in ("-Z", "--zap-all", "-o", "--clear") for a in args):
        return "sgdisk wiping a partition table"
    if name in _PARTITION and devices and not any(
            a in ("-l", "--list", "print", "-p", "--print") for a in args):
        return f"{name} editing the partition table of a block device"
    if name == "diskutil" and ops and re.match(r"(erase|zero|random|secureErase)", ops[0]):
        return "diskutil erasing a disk"
    if name == "dd" and any(_BLOCK_DEVICE.match(a[3:]) for a in args if a.startswith("of=")):
        return "dd onto a block device"
    if any(_BLOCK_DEVICE.match(t) for t in write_targets(cmd)) and name != "dd":
        return "writing onto a block device"
    if any(t == "/proc/sysrq-trigger" for t in write_targets(cmd)):
        return "writing the kernel's sysrq trigger"
    if name == "kill" and _kill_all(argv) or name == "killall5":
        return "signalling every process (kill -1)"
    if name in _POWER:
        return f"{name} powers off or restarts the host"
    if name in ("init", "telinit") and any(a in ("0", "6", "1", "s", "S") for a in ops):
        return f"{name} changing the runlevel"
    if name in ("systemctl", "loginctl") and any(a in _SYSTEMCTL_FLOOR for a in ops):
        return f"{name} power action"
    return None


_RUNNERS = frozenset({"systemd-run", "nsenter", "chroot", "unshare", "machinectl",
                      "runuser", "setpriv", "capsh", "firejail", "bwrap", "flatpak-spawn"})
_HISTORY = re.compile(r"(^|/)\.(bash_history|zsh_history|history|sh_history|python_history|"
                      r"mysql_history|psql_history|sqlite_history|lesshst|viminfo|"
                      r"node_repl_history|rediscli_history|local/share/fish/fish_history)$")
_LOGS = re.compile(r"^/var/(log|run/utmp|adm)(/|$)|^/run/(utmp|log)(/|$)|^/var/lib/"
                   r"(lastlog|wtmp|btmp)")
_HOME_CONFIG = re.compile(
    r"^\.(bashrc|bash_profile|bash_login|bash_logout|profile|zshrc|zshenv|zprofile|zlogin|"
    r"zlogout|kshrc|cshrc|tcshrc|inputrc|ssh|gitconfig|git-credentials|config|claude|"
    r"claude\.json|codex|gemini|cursor|aider[\w.-]*|hermes|continue|copilot|npmrc|pypirc|"
    r"netrc|gnupg|aws|kube|docker|vimrc|vim|emacs|emacs\.d|tmux\.conf|screenrc|local/bin|"
    r"pam_environment|xprofile|xinitrc|Xresources|curlrc|wgetrc|pip|condarc|mcp\.json)(/|$)")


def _home_rel(target: str) -> str | None:
    """``target`` relative to a home directory (``~``, ``$HOME``, /root, /home/<u>), or
    None when it is not under one."""
    t = re.sub(r"^(\$HOME|\$\{HOME\})(?=/|$)", "~", target)
    m = re.match(r"^(~[^/]*|/root|/home/[^/]+|/Users/[^/]+)(/+(.*))?$", t)
    if not m:
        return None
    return posixpath.normpath(m.group(3) or ".")


def _is_home(target: str) -> bool:
    """The home directory itself (``~``, ``~/``, ``$HOME``, /home/u, /root)."""
    return _home_rel(target.rstrip("/") or "/") == "."


def home_config_file(target: str) -> bool:
    """A shell's or an agent's config file in a home directory (.bashrc, .ssh/, .claude/,
    .gitconfig ...; seed "The gate that trust cannot switch off")."""
    rel = _home_rel(target)
    return rel is not None and bool(_HOME_CONFIG.match(rel))


def _anti_forensics(cmd: SimpleCommand) -> str | None:
    """Wiping shell history or system logs (issue 8 item 4)."""
    argv = cmd.argv
    name, args = argv[0], argv[1:]
    if name == "history" and any(a in ("-c", "-w", "-d", "-r") or a.startswith("-c")
                                 for a in args):
        return "clears the shell history"
    if name in ("unset",) and any(a in ("HISTFILE", "HISTSIZE", "HISTFILESIZE") for a in args):
        return "turns shell history off"
    if name in ("export", "set", "declare", "typeset", ":") and any(
            re.match(r"(HISTFILE|HISTSIZE|HISTFILESIZE)=", a) or a == "history"
            and "+o" in args for a in args):
        return "turns shell history off"
    if name == "journalctl" and any(a.startswith(("--vacuum", "--rotate", "--flush"))
                                    for a in args):
        return "deletes system journal entries"
    if name in ("auditctl",) and ("-D" in args or "-e" in args):
        return "turns off or clears the audit rules"
    if name == "dmesg" and any(a in ("-c", "-C", "--clear", "--read-clear") for a in args):
        return "clears the kernel log"
    if name in ("logrotate", "utmpdump", "wipe", "srm"):
        return f"{name} rewrites or wipes logs"
    targets = list(write_targets(cmd))
    for t in targets + ([a for a in args if not a.startswith("-")] if name in (
            "shred", "rm", "truncate", "unlink") else []):
        if _HISTORY.search(t) or _LOGS.match(t):
            return f"wipes {t} (shell history or system logs)"
    return None


def _sudo_guard(cmd: SimpleCommand) -> str | None:
    """Password piping into sudo (hermes-facts §10 step 3; failure case B30)."""
    for layer in cmd.layers:
        if layer[0] not in ("sudo", "su"):
            continue
        flags = [a for a in layer[1:] if a.startswith("-")]
        if any(a in ("--stdin", "--askpass") or (not a.startswith("--") and
               ("S" in a or "A" in a)) for a in flags if layer[0] == "sudo"):
            return "sudo reading a password from stdin or an askpass helper (-S / -A)"
        if cmd.stdin in ("pipe", "heredoc"):
            return f"input piped into {layer[0]} can answer its password prompt"
        break
    return None


def _ask(cmd: SimpleCommand) -> tuple[str, str, str] | None:
    """(rule, risk_class, reason) when ``cmd`` needs a person, else None."""
    argv = cmd.argv
    name, args = argv[0], argv[1:]
    ops = [a for a in args if not a.startswith("-")]
    sub = ops[0] if ops else ""
    if any(layer[0] in _PRIVILEGE for layer in cmd.layers):
        return "privilege", "privilege", "runs with elevated privileges"
    if any(layer[0] in _RUNNERS for layer in cmd.layers):
        return "privilege", "privilege", "runs a command in another namespace, root or unit"
    if (forensic := _anti_forensics(cmd)) is not None:
        return "anti_forensics", "anti_forensics", forensic
    if name in ("mv", "rsync", "ln", "cp") and any(_is_home(t) for t in (
            ops[:-1] if name == "mv" else ops[-1:] if name in ("ln", "rsync", "cp") else ops)):
        if name == "mv" or "--delete" in args or name == "ln" or "-T" in args:
            return "home_move", "destructive", "moves or replaces the home directory"
    if (gone := [a for a in args if a.split("=")[0] in DELETING_FLAGS.get(name, ())]):
        return "destructive", "destructive", f"{name} {' '.join(gone)} deletes files"
    if (conf := next((t for t in write_targets(cmd) if home_config_file(t)), None)) is not None:
        return "home_config", "home_config", f"writes {conf}, a shell or agent config file"
    if name == "rm" and "-r" in args or name == "find" and "-delete" in args:
        return "recursive_delete", "destructive", "deletes a directory tree"
    if name in ("shred", "wipefs") or _MKFS.match(name) or name == "dd" and any(
            a.startswith("of=") and a != "of=/dev/null" for a in args):
        return "destructive", "destructive", f"{name} overwrites data"
    if name == "mv" and ops[-1:] == ["/dev/null"]:
        return "destructive", "destructive", "moves files onto /dev/null"
    if name == "chmod" and any(re.fullmatch(r"0?[0-7]?77[67]|a\+rwx|o\+w|a\+w|\+w", a)
                               for a in ops[:1]):
        return "permissions", "permissions", "makes files world-writable"
    if name in ("chown", "chgrp", "chmod") and "-R" in args:
        return "permissions", "permissions", "recursive ownership or mode change"
    if name == "git":
        if sub == "push" and ("-f" in args or "-d" in args or "--mirror" in args or any(
                a.startswith(("--force", "+", ":")) for a in args[1:])):
            return "git_history", "git_history", "rewrites or deletes remote history"
        if (sub == "reset" and "--hard" in args or sub == "clean" and "-f" in args
                or sub == "branch" and ("-D" in args or {"-d", "-f"} <= set(args))
                or sub in ("checkout", "restore") and "." in ops
                or sub == "stash" and ops[1:2] in (["drop"], ["clear"])
                or sub in ("filter-branch", "filter-repo")
                or sub == "reflog" and "expire" in ops):
            return "git_discard", "git_history", f"git {sub} discards work"
    if name in _SQL_CLIENTS and _SQL_DESTRUCTIVE.search(" ".join(args) + (cmd.stdin_text or "")):
        return "sql_destructive", "database", "drops, truncates or mass-deletes data"
    if name in _SERVICE_CLIENTS:
        return "service_client", "database", f"{name} connects to a database the host runs"
    if (name in ("nc", "ncat", "netcat") and "-U" in args
            or name == "socat" and any(_UNIX_SOCKET_CONNECT.match(a) for a in args)):
        return "service_client", "database", f"{name} connects to a Unix socket"
    if name in ("python", "python3") and ops[:2] == ["manage.py", "flush"]:
        return "sql_destructive", "database", "empties the database"
    if name in ("systemctl", "service") and any(a in _SYSTEMCTL_ASK for a in ops):
        return "service", "system_admin", "stops or restarts a system service"
    if name == "kill" and any(a in ("-9", "-KILL", "-SIGKILL") for a in args):
        return "process_kill", "system_admin", "force-kills a process"
    if name == "kill" and not {"-l", "-L", "--list", "--table"} & set(args):
        # On the host a signal reaches any process of the worker's user (the app itself:
        # a second user froze the shared worker with kill -STOP); the kernel scopes it only
        # where Landlock can (agents/backends/landlock.py).
        return "process_kill", "system_admin", "signals a process"
    if name in HOST_TUNING or host_setting(name, args, ops):
        return "system_admin", "system_admin", f"{name} changes the host, not the workspace"
    if name in _ADMIN:
        return "system_admin", "system_admin", f"{name} changes system configuration"
    if name in ("apt", "apt-get", "dnf", "yum", "apk", "pacman", "zypper", "brew", "snap") \
            and any(_PACKAGE_MUTATE.match(a) for a in args[:2]):
        return "system_packages", "system_admin", "changes system packages"
    if name in ("docker", "podman") and (
            {"rm", "rmi", "prune", "kill"} & set(ops[:3]) or "--privileged" in args
            or any(re.match(r"/(:|$)", a) for a in args)):
        return "containers", "infra", "removes containers or mounts the host"
    if (name == "kubectl" and sub in ("delete", "drain") or name == "terraform" and (
            sub == "destroy" or "-auto-approve" in args) or name == "helm" and sub in (
            "uninstall", "delete") or name == "aws" and ("rm" in ops or "rb" in ops)):
        return "infra_destructive", "infra", f"{name} {sub} destroys infrastructure"
    if any(t.startswith(("/dev/tcp/", "/dev/udp/")) for _, t in cmd.redirects) or (
            name in ("nc", "ncat", "netcat") and {"-e", "-c", "--exec", "--sh-exec"} & set(args)
            or name == "socat" and any(re.match(r"(EXEC|SYSTEM):", a, re.I) for a in args)):
        return "network_shell", "network", "opens a shell over the network"
    if any(_SYSTEM_WRITE.match(re.sub(r"^(\$HOME|\$\{HOME\})", "~", t))
           for t in write_targets(cmd)):
        return "system_write", "system_write", "writes a system or shell-startup file"
    return None


_PARSER_FINDINGS: dict[str, tuple[Level, str, str]] = {
    "unparseable": ("ask", "obfuscation", "the command could not be parsed"),
    "dynamic_name": ("ask", "obfuscation", "the command name is computed at run time"),
    "eval_dynamic": ("ask", "obfuscation", "eval or sh -c of text computed at run time"),
    "pipe_to_shell": ("ask", "remote_code", "a shell runs a script read from a pipe"),
    "exec_process_substitution": ("ask", "remote_code", "runs a script from a substitution"),
    "inline_code": ("ask", "inline_code", "an interpreter runs inline code"),
    "fork_bomb": ("hardline", "destructive", "a fork bomb exhausts the host"),
    "script_unreadable": ("ask", "remote_code", "runs a script the policy cannot read safely "
                          "(outside the workspace, a symlink, missing or computed)"),
    "script_opaque": ("ask", "remote_code", "runs a script whose effects cannot be seen"),
    "exec_hook": ("ask", "exec_hook", "a program is told to run another command"),
    "env_hook": ("ask", "exec_hook", "sets a variable that makes programs load or run code"),
    "unknown_wrapper": ("ask", "exec_hook", "an unknown program may run the command after it"),
    "download_exec": ("ask", "remote_code", "a download is piped to an interpreter"),
    "schedules": ("ask", "system_admin", "schedules a command to run later (at/batch)"),
    "remote_host": ("ask", "network", "runs a command on another host (ssh)"),
    "xargs_operands": ("ask", "destructive", "xargs gives a writing or deleting command "
                       "operands the policy cannot see"),
}


_SELF_EXPLAINED = frozenset({"pipe_to_shell", "download_exec"})
"""Parser findings whose detail restates the reason: it stands alone (a card once said
"…from a pipe: a shell reads its script from a pipe")."""


def assess(parsed: ParsedCommand) -> tuple[Finding, ...]:
    """Every finding for ``parsed``: parser findings (whole line) first, then per command
    the floor, the sudo guard and the first ask class that applies."""
    out: list[Finding] = []
    for rule, detail in parsed.findings:
        level, risk, reason = _PARSER_FINDINGS[rule]
        if rule not in _SELF_EXPLAINED:
            reason = f"{reason}: {detail}"
        out.append(Finding(level=level, rule=rule if level == "ask" else "hardline",
                           risk_class=risk, reason=reason[:300]))
    for i, cmd in enumerate(parsed.commands):
        if (floor := _floor(cmd)) is not None:
            out.append(Finding(level="hardline", rule="hardline", risk_class="destructive",
                               reason=floor, command=i))
        if (guard := _sudo_guard(cmd)) is not None:
            out.append(Finding(level="guard", rule="sudo_guard", risk_class="privilege",
                               reason=guard, command=i))
        if (ask := _ask(cmd)) is not None:
            out.append(Finding(level="ask", rule=ask[0], risk_class=ask[1], reason=ask[2],
                               command=i))
    return tuple(out)
