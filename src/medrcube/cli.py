"""The `medrcube` command.

Each subcommand lives in medrcube/commands/<name>.py with `add_arguments(parser)` and
`run(args) -> int`, imported only when chosen so that `medrcube validate` never pays for
torch or the openai client. A module that sets `PASSTHROUGH = "attr"` receives the
arguments its parser does not know in `args.attr` (for commands that wrap another tool).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module under medrcube.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("validate", "validate a cube; exits non-zero on any error"),
    "cube": ("cube", "cube utilities: `cube stats CUBE`, `cube export`"),
    "run": ("run", "ask a model every item of a cube and write reports/<run-id>/"),
    "qualify": ("qualify", "run the pytest gate (the packaged suite, or this site project) on a cube"),
    "init": ("init", "write a starter site project: thresholds, models, conftest, an example site test"),
    "power": ("power", "probability that a check passes, and the n needed for 80%% power"),
    "plan": ("plan", "images to collect per patient and device subgroup for the subgroup checks to decide"),
    "report": ("report", "report and leaderboard across run directories"),
    "dossier": ("dossier", "verify a sealed run and write its validation dossier (HTML and JSON) for a review board"),
    "verify": ("verify", "check a sealed run directory: says exactly which file changed"),
    "build": ("build", "build a cube from a recipe (DICOM, NIfTI or PNG+CSV sources)"),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="medrcube", description=__doc__.splitlines()[0])
    from medrcube import __version__

    parser.add_argument("--version", action="version", version=f"medrcube {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, help_) in COMMANDS.items():
        sub.add_parser(name, help=help_, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    if not argv or argv[0] not in COMMANDS:
        parser.parse_args(argv)  # prints help, version or "invalid choice"
        parser.print_help()
        return 2
    name, rest = argv[0], argv[1:]
    module = importlib.import_module(f"medrcube.commands.{COMMANDS[name][0]}")
    sub = argparse.ArgumentParser(prog=f"medrcube {name}", description=COMMANDS[name][1])
    module.add_arguments(sub)
    passthrough = getattr(module, "PASSTHROUGH", None)
    if passthrough:  # a wrapper command (qualify): unknown arguments belong to the tool it runs
        args, extra = sub.parse_known_args(rest)
        setattr(args, passthrough, extra[1:] if extra[:1] == ["--"] else extra)
    else:
        args = sub.parse_args(rest)
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
