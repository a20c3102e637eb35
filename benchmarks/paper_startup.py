"""The gate's start-up at paper scale, in wall time and in CPU, tree against tree (issue 46).

    python -m benchmarks.paper_startup [OLD_SRC] [--rounds 3] [--variants standard,blind,shuffled:3]
                                       [--delay 0.02] [--concurrency 64] [--out FILE]

The gate command of `benchmarks.paper_scale` (the generated 7,626-item cube, the variants,
JUnit and Allure, `-p no:hypothesispytest`) against one scripted server, run to its end
(every request answered). Start-up is the spawn to the first request the server reads, as
in `paper_scale`; beside it, **the gate process's CPU at that moment** (user + system of
all its threads, read from /proc/PID/stat by the server's reply callable when it reads the
first request, in clock ticks of 10 ms): on a shared machine the wall time of a start-up
moves by tenths of a second with the other jobs, its CPU does not. With OLD_SRC (the
`src/` of another checkout, e.g. `git archive BASE src | tar -x -C /tmp/base`) the two
trees alternate round by round, each with its own source first on PYTHONPATH.

The start-up cache (`MEDRCUBE_CACHE_DIR`) is `paper_scale`'s: run `python -m
benchmarks.paper_scale` once first, so that the cube's snapshot, the audit and the
feasibility pass are remembered (a tree whose cube/, gate/ or metrics/ code differs
misses them on its first round: `--warmup` runs each tree once untimed first). Each tree's
bytecode is written first (`compileall`), so that with `PYTHONDONTWRITEBYTECODE` set neither
tree is compiled again at every start.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import OUT, ROOT, pid_cpu_s, python
from benchmarks.machine import load_average
from benchmarks.throughput_harnesses import command
from medrcube.testing.server import ScriptedServer

RESULT = ROOT / "benchmarks" / "results" / "paper_startup.json"


def one_gate(srv: ScriptedServer, *, src: str, cube: str, variants: str, delay: float, conc: int,
             work: Path) -> dict[str, Any]:
    """One gate run; its start-up (wall), CPU at the first request, tail, CPU and peak RSS."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    seen: dict[str, float] = {}
    child: dict[str, int] = {}

    def reply(prompt: str, body: Any) -> None:
        if "cpu" not in seen and "pid" in child:
            cpu = pid_cpu_s(child["pid"])
            if cpu is not None:
                seen["cpu"], seen["at"] = cpu, time.monotonic()
        return None  # the script answers

    srv.set_script({"default": "A", "latency": delay}, reply=reply)
    srv.reset_stats()
    cmd = command("gate", url=srv.base_url, cube=cube, conc=conc, work=work, jobs=work / "unused",
                  extra=[f"--variants={variants}"])
    env = {**os.environ, "OPENAI_API_KEY": "bench", "MEDRCUBE_CACHE_DIR": str(OUT / "paper_scale" / "cache"),
           "PYTHONPATH": os.pathsep.join(filter(None, [src, str(ROOT), os.environ.get("PYTHONPATH")]))}
    with open(work / "gate.out", "wb") as out, open(work / "gate.err", "wb") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        child["pid"] = proc.pid
        _, status, ru = os.wait4(proc.pid, 0)
        t1 = time.monotonic()
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code  # reaped here
    st = srv.stats(log=True)
    chat = [r for r in st["requests"] if r.get("t_end") is not None]
    if code not in (0, 10, 11) or not chat:
        raise RuntimeError(f"the gate exited with {code} after {len(chat)} requests: see {work / 'gate.err'}")
    first = srv.clock_origin + min(r["t_start"] for r in chat)
    last = srv.clock_origin + max(r["t_end"] for r in chat)
    return {"startup_s": round(first - t0, 3), "cpu_at_first_request_s": seen.get("cpu"),
            "wall_s": round(t1 - t0, 2), "tail_s": round(t1 - last, 3), "requests": len(chat),
            "cpu_s": round(ru.ru_utime + ru.ru_stime, 2), "maxrss_mib": round(ru.ru_maxrss / 1024, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.paper_startup", description=__doc__.split("\n")[0])
    ap.add_argument("old_src", nargs="?", help="the src/ of another checkout, run alternately with this one")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default="standard,blind,shuffled:3")
    ap.add_argument("--delay", type=float, default=0.02)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--warmup", action="store_true", help="run each tree once untimed first (its cache entries)")
    ap.add_argument("--out", default=str(RESULT))
    args = ap.parse_args(argv)
    from benchmarks.cubes import full_cube

    cube = str(full_cube(log=lambda m: print(m, file=sys.stderr)))
    trees = [("this", str(ROOT / "src"))] + ([("old", str(Path(args.old_src).resolve()))] if args.old_src else [])
    # Every tree's bytecode written first, as pip writes an installed wheel's: where
    # PYTHONDONTWRITEBYTECODE is set (CI containers, this project's sandbox) a tree that was
    # never compiled is compiled again at every start, about 0.1 s of CPU at this scale, and the
    # comparison would be of bytecode, not of code (benchmarks/RESULTS.md 24, "Thirteenth pass").
    for _, src in trees:
        subprocess.run([python(), "-m", "compileall", "-q", str(Path(src) / "medrcube")], check=True,
                       stdout=subprocess.DEVNULL)
    # Each run's folder named anew: the ledger of attempts remembers a store's path in the user's
    # cache, and a store deleted and made again at the same path is a lost ledger (a usage error).
    scratch = OUT / "paper_startup" / time.strftime("%Y%m%dT%H%M%S")
    runs: list[dict[str, Any]] = []
    with ScriptedServer({"default": "A"}) as srv:
        order = [("warmup", t) for t in trees] if args.warmup else []
        order += [(str(r), t) for r in range(args.rounds) for t in (trees[::-1] if r % 2 else trees)]
        for n, (rnd, (name, src)) in enumerate(order):
            load0 = load_average()
            r = one_gate(srv, src=src, cube=cube, variants=args.variants, delay=args.delay, conc=args.concurrency,
                         work=scratch / f"{n}-{name}")
            r.update(tree=name, src=src, round=rnd, load=[load0, load_average()])
            print(f"{rnd} {name}: start-up {r['startup_s']:.3f} s, CPU at the first request "
                  f"{r['cpu_at_first_request_s']} s, wall {r['wall_s']} s, tail {r['tail_s']} s, "
                  f"CPU {r['cpu_s']} s, RSS {r['maxrss_mib']} MiB, load {load0[0]}", file=sys.stderr, flush=True)
            shutil.rmtree(scratch / f"{n}-{name}", ignore_errors=True)
            if rnd != "warmup":
                runs.append(r)
    summary = {}
    for name, _ in trees:
        mine = [r for r in runs if r["tree"] == name]
        summary[name] = {k: statistics.median(r[k] for r in mine) for k in
                         ("startup_s", "cpu_at_first_request_s", "wall_s", "tail_s", "cpu_s", "maxrss_mib")}
        print(f"{name} (median of {len(mine)}): " + ", ".join(f"{k} {v:.3f}" for k, v in summary[name].items()))
    doc = {"variants": args.variants, "delay_s": args.delay, "concurrency": args.concurrency,
           "cpu_count": os.cpu_count(), "medians": summary, "runs": runs}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
