"""Start-up of the gate from a real wheel install, with and without bytecode written.

    python -m benchmarks.wheel_startup [SRC_TREE ...] [--rounds 5] [--no-compile] [--out FILE]

The project's own .venv installs medrcube in editable mode, where pytest marks the
package for assertion rewriting by the entry point's name and the rewritten modules'
bytecode is cached beside the checkout; a user's CI installs a wheel. For each source
tree given (default: this checkout), this builds its wheel (`pip wheel --no-deps
--no-build-isolation`, offline), installs it with `--no-deps --no-index` into a scratch
venv whose other packages are this venv's (a directory of links to every entry of this
venv's site-packages except medrcube's own, on the path through a .pth file), and times
`pytest --pyargs medrcube.suite --co --model=random -p no:cacheprovider` from an empty
directory with `PYTHONDONTWRITEBYTECODE=1` (the trees alternating per round; the
start-up cache warmed by one untimed run each). pip compiles the installed modules'
bytecode at install, as it does by default; `--no-compile` installs without it (every
module is then compiled from source at every start, rewritten or not). Figures: wall and
CPU (user + system) of the pytest process, medians over the rounds, and how many medrcube
modules pytest's rewriter loaded (`-X importtime` is not used: it costs time itself).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import OUT, ROOT, run_proc
from benchmarks.machine import load_average

SCRATCH = OUT / "wheel_startup"
# Counts the medrcube modules whose loader is pytest's rewriter, at the end of collection.
_COUNTER = '''
import sys
def pytest_collection_finish(session):
    mods = [m for n, m in list(sys.modules.items()) if n == "medrcube" or n.startswith("medrcube.")]
    rewritten = [m for m in mods if type(getattr(m, "__loader__", None)).__name__ == "AssertionRewritingHook"]
    print("MEDRCUBE-MODULES %d REWRITTEN %d" % (len(mods), len(rewritten)))
'''


def deps_dir() -> Path:
    """Links to this venv's installed packages, medrcube's own files left out."""
    site = Path(sysconfig.get_paths()["purelib"])
    dest = SCRATCH / "deps"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for entry in site.iterdir():
        name = entry.name
        if name.startswith(("medrcube", "__editable__", "_medrcube")) or name.endswith(".pth"):
            continue
        (dest / name).symlink_to(entry)
    return dest


def _clean_env() -> dict[str, str]:
    """This process's environment without PYTHONPATH (a checkout on the path would hide the wheel)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def install(tree: Path, label: str, deps: Path, *, compile_: bool) -> Path:
    """A scratch venv with `tree`'s wheel installed; returns its python."""
    wheels = SCRATCH / f"wheel-{label}"
    shutil.rmtree(wheels, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                    str(tree)], check=True, env=_clean_env())
    venv = SCRATCH / f"venv-{label}"
    shutil.rmtree(venv, ignore_errors=True)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, env=_clean_env())
    py = venv / "bin" / "python"
    wheel = next(wheels.glob("*.whl"))
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    *([] if compile_ else ["--no-compile"]), str(wheel)], check=True, env=_clean_env())
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, env=_clean_env()).stdout.strip()
    (Path(site) / "zz_h46_deps.pth").write_text(str(deps) + "\n", encoding="utf-8")
    return py


def one(py: Path, label: str, rnd: int | str) -> dict[str, Any]:
    # outside the checkout: pytest must not find this project's pyproject.toml as its inifile
    # one directory per tree, kept across its rounds: the response store and the ledger of
    # attempts in it belong with the start-up cache, as in a user's project
    work = Path(tempfile.gettempdir()) / "medrcube-wheel-startup" / f"run-{label}"
    if rnd == "warm-up":
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    (work / "counter_plugin.py").write_text(_COUNTER, encoding="utf-8")
    env = {"PYTHONDONTWRITEBYTECODE": "1", "MEDRCUBE_CACHE_DIR": str(SCRATCH / "cache"), "PYTHONPATH": str(work)}
    cmd = [str(py), "-m", "pytest", "--pyargs", "medrcube.suite", "--co", "--model=random", "-p", "no:cacheprovider",
           "-p", "counter_plugin", "-q"]
    proc = run_proc(cmd, log_dir=work, name=f"pytest-{rnd}", cwd=work, env=env, timeout=600, ok_codes=(0,))
    counts = [ln for ln in proc.text().splitlines() if ln.startswith("MEDRCUBE-MODULES")]
    mods = rewritten = None
    if counts:
        parts = counts[-1].split()
        mods, rewritten = int(parts[1]), int(parts[3])
    return {"tree": label, "round": rnd, "wall_s": proc.wall_s, "cpu_s": proc.cpu_s, "modules": mods,
            "rewritten": rewritten, "load": load_average()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.wheel_startup", description=__doc__.split("\n")[0])
    ap.add_argument("trees", nargs="*", default=[str(ROOT)], help="source trees (checkouts) to build and compare")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true", help="install without bytecode (pip --no-compile)")
    ap.add_argument("--out", default=str(SCRATCH / "wheel_startup.json"))
    args = ap.parse_args(argv)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    # a fresh start-up cache, warmed by the untimed runs below (it also remembers the
    # ledgers of attempts, which the warm-up runs' fresh directories start anew)
    shutil.rmtree(SCRATCH / "cache", ignore_errors=True)
    deps = deps_dir()
    trees = [(f"t{i}", Path(t).resolve()) for i, t in enumerate(args.trees)]
    pys = {label: install(tree, label, deps, compile_=not args.no_compile) for label, tree in trees}
    for label, _ in trees:
        one(pys[label], label, "warm-up")
    runs = []
    for rnd in range(args.rounds):
        for label, _ in trees:
            r = one(pys[label], label, rnd)
            runs.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    rows = []
    for label, tree in trees:
        mine = [r for r in runs if r["tree"] == label]
        rows.append({"tree": str(tree), "label": label, "rounds": len(mine),
                     "wall_s": statistics.median(r["wall_s"] for r in mine),
                     "cpu_s": statistics.median(r["cpu_s"] for r in mine),
                     "modules": mine[-1]["modules"], "rewritten": mine[-1]["rewritten"]})
    doc = {"compiled_at_install": not args.no_compile, "rows": rows, "runs": runs}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    for r in rows:
        print(f"{r['tree']}: wall {r['wall_s']:.2f} s, CPU {r['cpu_s']:.2f} s (medians of {r['rounds']}), "
              f"{r['rewritten']} of {r['modules']} medrcube modules rewritten")
    print(f"load average at end {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
