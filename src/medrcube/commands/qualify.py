"""`medrcube qualify`: run the pytest qualification gate (the suite in tests_benchmark/).

    medrcube qualify [--model SPEC] [--cube CUBE] [--suite DIR] [pytest args...]

It is `python -m pytest tests_benchmark --model=SPEC --cube=CUBE [pytest args...]`, so
every pytest and gate option works (`-n 8`, `--alluredir`, `--thresholds`, `-k Chest`).

The suite is not packaged: it lives in the repository's `tests_benchmark/`, beside the
thresholds.yaml and the mini cube it defaults to, so that a site can read and extend it.
It is found at `--suite`, else `./tests_benchmark`, else in the checkout medrcube was
installed from (`pip install -e .`). From a wheel, pass `--suite` to a copy of it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

SUITE_DIR = "tests_benchmark"
# Arguments this parser does not know are pytest's: the dispatcher (cli.py) keeps them here.
PASSTHROUGH = "pytest_args"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="model spec to qualify (default: random)")
    parser.add_argument("--cube", help="cube to run (default: the bundled mini cube fixtures/mini)")
    parser.add_argument("--suite", help=f"the qualification suite directory (default: ./{SUITE_DIR})")
    parser.allow_abbrev = False  # `--co` is pytest's, not an abbreviation of ours
    parser.epilog = "Any other argument is passed to pytest, e.g. -n 8 --alluredir=reports/allure -k Chest."


def find_suite(explicit: str | None = None) -> Path:
    """The suite directory: --suite, ./tests_benchmark, or the checkout's tests_benchmark."""
    if explicit:
        path = Path(explicit).expanduser()
        if not (path / "conftest.py").is_file():
            raise FileNotFoundError(f"--suite {explicit}: no conftest.py there; point it at a copy of {SUITE_DIR}/")
        return path
    import medrcube

    checkout = Path(medrcube.__file__).resolve().parents[2]  # src/medrcube -> the checkout
    for path in (Path.cwd() / SUITE_DIR, checkout / SUITE_DIR):
        if (path / "conftest.py").is_file():
            return path
    raise FileNotFoundError(
        f"cannot find the qualification suite {SUITE_DIR}/ (looked in {Path.cwd()} and {checkout}); "
        "run from the medrcube checkout or pass --suite DIR"
    )


def pytest_argv(args: argparse.Namespace, suite: Path) -> list[str]:
    argv = [str(suite)]
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
