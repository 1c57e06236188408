"""Tables the command walker reads: program names, hook variables, git built-ins.

Sources: bash(1) (BASH_ENV, ENV, PROMPT_COMMAND), ld.so(8) (LD_PRELOAD, LD_AUDIT), git-config(1)
(keys that name a program), git(1) (built-in subcommands), issue 8 item 4 (what counts as a
program that runs other commands), the programs that act on the host (second-user attack,
2026-12-02). Data and one predicate on it; used by agents/policy/commands.py,
agents/policy/command_risk.py and
agents/policy/command_hooks.py.
"""

from __future__ import annotations

import re

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "rbash"})
UNKNOWN_CWD = "\x00unknown-cwd"
"""SimpleCommand.cwd after a ``cd`` whose target cannot be known (``cd "$X"``, ``cd -``)."""
INTERPRETER = re.compile(r"python[0-9.]*|pypy3?|perl|ruby|node|nodejs|php|lua[0-9.]*|Rscript"
                         r"|osascript|deno|bun|tclsh|wish|jshell|groovy|julia")
AWKS = frozenset({"awk", "gawk", "mawk", "nawk", "busybox-awk"})
EDITORS = frozenset({"vi", "vim", "nvim", "ex", "view", "vimdiff", "ed", "red", "emacs",
                     "nano"})
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "httpie", "lynx",
                         "links", "w3m", "nc", "ncat", "netcat", "socat", "ftp", "tftp",
                         "lwp-request", "GET", "xh"})
_GLOB_NAME = re.compile(r"[*?]|\[[^\]]*\]")
GLOB_CANDIDATES = ("rm", "rmdir", "dd", "shred", "mkfs", "mke2fs", "mkswap", "wipefs",
                   "blkdiscard", "fdisk", "sfdisk", "parted", "sgdisk", "chmod", "chown",
                   "chgrp", "kill", "killall", "pkill", "reboot", "shutdown", "halt",
                   "poweroff", "init", "systemctl", "mv", "cp", "truncate", "find", "tee",
                   "ln", "sh", "bash", "dash", "zsh", "sudo", "su", "curl", "wget", "python",
                   "python3", "perl", "eval", "sqlite3")
"""Programs a glob in a command name is tried against, so the floor still sees them."""
WRITE_PROGRAMS = frozenset({"rm", "rmdir", "unlink", "shred", "mv", "cp", "ln", "chmod",
                            "chown", "chgrp", "truncate", "tee", "dd", "touch", "install"})
RUN_WORDS = SHELLS | WRITE_PROGRAMS | {
    "sudo", "su", "doas", "kill", "pkill", "killall", "curl", "wget", "eval", "exec", "python",
    "python3", "perl", "ruby", "node", "mkfs", "wipefs", "reboot", "shutdown", "poweroff",
    "halt", "find", "xargs", "sqlite3", "psql", "systemctl", "crontab"}
"""Words that, after an unknown program, look like the command it would run."""
KNOWN_PROGRAMS = frozenset("""
: [ [[ alias apropos apt-cache basename bat cal cat cd chdir clear cmp column comm command
compgen complete cut date declare df diff dig dirname dmesg docker du echo egrep env export
expr false fd fgrep file fmt fold free gcc getent git go grep gunzip gzip hash head help
history host hostname id info ip jobs jq kubectl less ln locate look ls lsblk lsof make man
md5sum mkdir more mount npm npx nl od pip pip3 pnpm popd printenv printf ps pushd pwd
readlink realpath rg ag sed seq set sha1sum sha256sum shift sort stat strings tail test tldr
touch tput tr true type typeset ulimit umask uname unalias uniq unset uptime wc whatis
whereis which who whoami yarn yes cargo rustc pytest tox uv poetry mypy ruff black isort
flake8 pylint eslint prettier tsc go mvn gradle cmake ninja javac java dotnet sqlite3 psql
mysql redis-cli helm terraform aws gcloud az brew apt apt-get dnf yum apk pacman snap
systemctl service journalctl top htop nproc lscpu watch time sleep wait read trap return
exit break continue local readonly getopts dirs disown fg bg kill pkill killall xargs tee
tar zip unzip xz bzip2 zstd rsync scp cp mv rm rmdir mkdir chmod chown chgrp truncate dd
shred sha512sum base64 base32 xxd hexdump rev shuf split csplit paste join expand unexpand
iconv envsubst diff3 patch git-lfs gh hub code idea open xdg-open curl wget http ping
traceroute nslookup ss netstat lsattr chattr setfacl getfacl numfmt timeout nice nohup
""".split())
"""Programs that do not run their arguments as commands (or are analysed on their own):
anything else given a command-like word is an unknown wrapper (issue 8 item 4)."""
COMMAND_VARS = frozenset({"PAGER", "GIT_PAGER", "MANPAGER", "EDITOR", "VISUAL", "GIT_EDITOR",
                          "GIT_SEQUENCE_EDITOR", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF",
                          "GIT_PROXY_COMMAND", "LESSOPEN", "LESSCLOSE", "BROWSER",
                          "SYSTEMD_PAGER", "PSQL_PAGER", "SUDO_EDITOR"})
"""Variables whose value another program runs as a command: parsed like one."""
HOOK_VARS = frozenset({"BASH_ENV", "ENV", "PROMPT_COMMAND", "PS4", "SHELLOPTS",
                       "BASHOPTS", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT",
                       "DYLD_INSERT_LIBRARIES", "GCONV_PATH", "PYTHONSTARTUP", "PYTHONHOME",
                       "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS",
                       "GIT_SSH", "GIT_EXEC_PATH", "GIT_ASKPASS", "SSH_ASKPASS",
                       "SUDO_ASKPASS", "GIT_TEMPLATE_DIR", "GIT_CONFIG_PARAMETERS",
                       "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
                       "ZDOTDIR", "INPUTRC", "HOSTALIASES", "LOCPATH", "MALLOC_CONF"})
"""Variables that make a program load code or run a startup hook: setting one asks."""
GIT_EXEC_KEYS = frozenset({"core.pager", "core.sshcommand", "core.editor", "core.fsmonitor",
                           "core.hookspath", "core.askpass", "core.gitproxy", "diff.external",
                           "sequence.editor", "gpg.program", "gpg.ssh.program",
                           "uploadpack.packobjectshook", "protocol.ext.allow", "include.path",
                           "credential.helper", "web.browser", "man.viewer", "core.worktree",
                           "gpg.x509.program", "ssh.variant"})
GIT_BUILTINS = frozenset("""
add am annotate apply archive bisect blame branch bundle cat-file check-attr check-ignore
check-ref-format checkout cherry cherry-pick clean clone commit commit-graph config
count-objects describe diff diff-files diff-index diff-tree difftool fetch for-each-ref
format-patch fsck gc grep hash-object help init log ls-files ls-remote ls-tree merge
merge-base mergetool mv name-rev notes pull push range-diff rebase reflog remote repack
replace reset restore rev-list rev-parse revert rm shortlog show show-ref sparse-checkout
stash status submodule switch symbolic-ref tag update-index update-ref verify-commit
version whatchanged worktree write-tree lfs maintenance var blame gui citool instaweb
""".split())



DELETING_FLAGS: dict[str, frozenset[str]] = {
    "tar": frozenset({"--remove-files"}),
    "rsync": frozenset({"--delete", "--delete-before", "--delete-during", "--delete-delay",
                        "--delete-after", "--delete-excluded", "--del", "--remove-source-files"}),
    "zip": frozenset({"-m", "--move"}), "7z": frozenset({"-sdel"}),
}
"""Flags that make an archiving or copying program delete files: a workspace wiped by
``tar --remove-files -cf /dev/null .`` is as gone as by ``rm -rf .`` (second-user attack A1)."""

OUTPUT_FLAGS: dict[str, tuple[str, ...]] = {
    "curl": ("-o", "--output"), "wget": ("-O", "--output-document"),
    "sort": ("-o", "--output"),
}
"""Flags whose operand is a file the program writes."""


HOST_TUNING = frozenset({"prlimit", "renice", "taskset", "chrt", "ionice", "setpriv",
                          "unshare", "nsenter", "chroot", "ifconfig", "route", "tc",
                          "ethtool", "iw", "nmcli", "resolvectl", "loginctl", "hostnamectl",
                          "timedatectl", "localectl"})
"""Programs that act on host processes, namespaces or the network configuration (a second
user's attack: prlimit --pid, renice, ip link set lo down). Asked, like _ADMIN."""
IP_MUTATE = frozenset({"add", "del", "delete", "set", "change", "replace", "flush", "exec",
                        "append", "prepend", "attach", "detach", "save", "restore"})


def host_setting(name: str, args: list[str], ops: list[str]) -> bool:
    """``hostname NAME``, ``date -s``, ``hwclock --set``, ``sysctl -w`` / ``sysctl a=b``,
    ``ip ... add|set|del|flush|exec``: the host's configuration, not the workspace."""
    if name == "hostname":
        return bool(ops) or any(a in ("-F", "--file", "-b", "--boot") for a in args)
    if name == "date":
        return any(a in ("-s", "--set") or a.startswith(("--set=", "-s")) for a in args)
    if name == "hwclock":
        return any(a in ("--set", "-w", "--systohc", "--adjust") for a in args)
    if name == "sysctl":
        return any(a in ("-w", "--write", "-p", "--load", "--system") or "=" in a
                   for a in args)
    if name == "ip":
        return bool(IP_MUTATE & set(ops))
    return False
