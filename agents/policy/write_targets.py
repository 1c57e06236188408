"""The files a simple command writes: redirects, and the operands and option values of the
programs that write (cp, mv, tee, dd of=, tar -x -C, unzip -d, --output=, ...). Used by the
floor and risk rules (agents/policy/command_risk.py) and the path rules
(agents/policy/paths.py). Pure: no file is opened.
"""

from __future__ import annotations

import re

from agents.policy.command_model import SimpleCommand
from agents.policy.command_tables import OUTPUT_FLAGS

_OUTPUT_LONG = frozenset({"--output", "--output-document", "--target-directory",
                          "--directory-prefix", "--outfile", "--out-file", "--output-file"})
"""Long options whose value is a file or directory the program writes, whatever it is."""


def write_targets(cmd: SimpleCommand) -> tuple[str, ...]:
    """Paths ``cmd`` writes, truncates, moves or deletes (redirections, tee, cp/mv/ln/install
    destinations, sed -i / perl -i files, dd of=, rm, touch, truncate, OUTPUT_FLAGS)."""
    out = [t for op, t in cmd.redirects if op in (">", ">>", ">|", "&>", "&>>", ">&")
           and not t.isdigit() and t != "-"]
    argv = cmd.argv
    name, args = argv[0], argv[1:]
    ops = [a for a in args if not a.startswith("-")]
    if name == "tee" or name in ("rm", "unlink", "rmdir", "shred", "touch", "truncate", "mv"):
        out += ops
    elif name in ("cp", "ln", "install", "rsync", "scp"):
        t = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-t",
                  "--target-directory")), None) or next(
            (a.split("=", 1)[1] or None for a in args if a.startswith("--target-directory=")),
            None) or next((a[2:] for a in args if a.startswith("-t") and len(a) > 2
                           and name != "rsync"), None)
        out += [t] if t else ops[-1:] if len(ops) >= 2 else []
    elif name in ("sed", "perl") and any(a.startswith(("-i", "--in-place", "-pi")) for a in args):
        out += ops if "-e" in args else ops[1:]
    elif name == "dd":
        out += [a[3:] for a in args if a.startswith("of=")]
    elif name in OUTPUT_FLAGS:  # curl -o, wget -O, sort -o (second-user attack A2)
        out += [args[i + 1] for i, a in enumerate(args[:-1]) if a in OUTPUT_FLAGS[name]]
    elif name == "tar" and (any(a in ("-x", "--extract", "--get") for a in args)
                            or args[:1] and not args[0].startswith("-") and "x" in args[0]
                            or any(re.fullmatch(r"-[A-Za-z]*x[A-Za-z]*", a) for a in args)):
        # extracting writes into -C DIR / --directory=DIR (else the working directory)
        out += [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-C", "--directory")]
        out += [a.split("=", 1)[1] for a in args if a.startswith("--directory=")]
    if name == "tar" and (any(a in ("-c", "--create", "-r", "--append", "-u", "--update")
                              for a in args)
                          or args[:1] and not args[0].startswith("-") and "c" in args[0]
                          or any(re.fullmatch(r"-[A-Za-z]*[cru][A-Za-z]*", a) for a in args)):
        # creating or appending writes the archive named by -f / --file
        for k, a in enumerate(args[:-1]):
            if re.fullmatch(r"-?[A-Za-z]*f[A-Za-z]*", a) and (a.startswith("-") or k == 0) \
                    or a == "--file":
                out.append(args[k + 1])
        out += [a.split("=", 1)[1] for a in args if a.startswith("--file=")]
    elif name == "unzip":
        out += [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-d"]
    elif name == "find":
        out += [args[i + 1] for i, a in enumerate(args[:-1])
                if a in ("-fprint", "-fprint0", "-fls", "-fprintf")]
    # long output options of any program (``--output=FILE``, ``--target-directory=DIR``)
    out += [a.split("=", 1)[1] for a in args if a.split("=", 1)[0] in _OUTPUT_LONG
            and "=" in a and a.split("=", 1)[1] and name not in ("cp", "ln", "install",
                                                                   "rsync", "scp")]
    return tuple(out)
