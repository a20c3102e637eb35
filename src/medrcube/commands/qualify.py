"""`medrcube qualify`: run the pytest qualification gate.

    medrcube qualify [--model SPEC] [--cube CUBE] [--suite DIR] [pytest args...]

It is `python -m pytest SUITE --model=SPEC --cube=CUBE [pytest args...]`, so every pytest
and gate option works (`-n 8`, `--alluredir`, `--thresholds`, `-k Chest`). The suite is
`--suite`, else the current directory when it is a site project (its conftest.py
declares MEDRCUBE_SUITE: `medrcube init` writes one), else the suite shipped inside the
package (medrcube/suite), which runs anywhere medrcube is installed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

# Arguments this parser does not know are pytest's: the dispatcher (cli.py) keeps them here.
PASSTHROUGH = "pytest_args"
SUITE_FLAG = "MEDRCUBE_SUITE"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="model spec to qualify (default: random)")
    parser.add_argument("--cube", help="cube to run (default: the bundled mini cube)")
    parser.add_argument(
        "--suite", help="the qualification suite directory (default: this site project, else the packaged suite)"
    )
    parser.allow_abbrev = False  # `--co` is pytest's, not an abbreviation of ours
    parser.epilog = "Any other argument is passed to pytest, e.g. -n 8 --alluredir=reports/allure -k Chest."


def declares_suite(directory: Path) -> bool:
    conftest = directory / "conftest.py"
    return conftest.is_file() and SUITE_FLAG in conftest.read_text(encoding="utf-8", errors="replace")


def find_suite(explicit: str | None = None) -> Path | None:
    """The suite to run: --suite, this site project (None: pytest's own default, the
    current directory), or the packaged suite."""
    if explicit:
        path = Path(explicit).expanduser()
        if not declares_suite(path):
            raise FileNotFoundError(
                f"--suite {explicit}: no conftest.py declaring {SUITE_FLAG} = True there; "
                "point it at a site project (medrcube init DIR) or leave it out for the packaged suite"
            )
        return path
    if declares_suite(Path.cwd()):
        return None
    from medrcube.suite import suite_dir

    return suite_dir()


def pytest_argv(args: argparse.Namespace, suite: Path | None) -> list[str]:
    argv = [str(suite)] if suite is not None else []
    if args.model:
        argv.append(f"--model={args.model}")
    if args.cube:
        argv.append(f"--cube={args.cube}")
    return argv + list(getattr(args, "pytest_args", []))


def run(args: argparse.Namespace) -> int:
    import subprocess
    import sys

    try:
        suite = find_suite(args.suite)
    except FileNotFoundError as e:
        print(f"medrcube qualify: {e}", file=sys.stderr)
        return 4  # pytest's usage-error exit code
    # A fresh interpreter rather than pytest.main(): pytest rewrites the asserts of its
    # plugins' modules at import, which it cannot do once this process imported medrcube.
    return subprocess.call([sys.executable, "-m", "pytest", *pytest_argv(args, suite)])
