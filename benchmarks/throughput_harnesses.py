"""The throughput scenario of issue 29: a bare client, `medrcube run` and the gate, side by side.

    python -m benchmarks.throughput_harnesses [--reps 3] [--settings 0.1:10,0.02:32,0.005:64]
                                              [--cube fixtures/mini] [--paper] [--out FILE]

One scripted OpenAI-compatible server (`medrcube.testing.server.ScriptedServer`, on a
thread of this process, answering "A" after a fixed delay) serves, for each setting
(delay, requests in flight) and each of `--reps` rounds, in this interleaved order:

- `bare`: `benchmarks/bare_client.py` (stdlib http.client, one keep-alive connection per
  thread, each image base64-encoded once), one request per item: the ceiling of this
  server and machine;
- `run`: `medrcube run --model=openai:bench@URL --concurrency=C` (fresh store);
- `gate`: `pytest --pyargs medrcube.suite --model=openai:bench@URL --concurrency=C` with
  `--junitxml` and `--alluredir` (fresh store, fresh report folder).

Every child is measured by `benchmarks.harness.run_proc` (wall, CPU of the process and
its reaped children, peak RSS); the server's log (its clock placed on ours through
`clock_origin`) splits each wall time into start-up (spawn to the first request's
arrival), the request phase (first arrival to last answer) and the tail (last answer to
the exit status; a report.html drawn after the exit is waited for before the next run,
and its CPU is not in the run's). Before the timed rounds of a cube, one untimed gate run fills the
start-up cache (`MEDRCUBE_CACHE_DIR` under the scratch folder; its figures are kept as
"cold"), so the rounds measure a user's second run on a cube. Each run is checked: the server saw exactly one request per item, no
error. After each `run` and gate run, the same command again on the store it filled
(every answer from the store; the server must see none): its CPU is the fixed cost, and
(CPU - replay CPU) / requests is the "marginal CPU/request", the client's CPU per request
(docs/speed.md; `--no-marginal` skips the replays). Figures are medians over the rounds;
the physical limit is requests x delay / concurrency. `--paper` adds one round of `run` and the gate at the last setting on the
generated 7,626-item cube (`benchmarks.cubes.full_cube`) for CPU per request and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import OUT, ROOT, BenchError, bin_path, pid_cpu_s, python, run_proc
from benchmarks.machine import load_average
from medrcube.report.after_exit import wait_drawn
from medrcube.testing.server import ScriptedServer

HARNESSES = ("bare", "run", "gate")
RESULT = ROOT / "benchmarks" / "results" / "throughput_harnesses.json"
DEV_PLUGINS = False  # --dev-plugins: the gate with this venv's dev-only pytest plugins (hypothesis)


def write_jobs(cube_path: str, dest: Path) -> int:
    """The bare client's jobs: each item's prompt and its image file (module docstring)."""
    from medrcube.cube import load_cube
    from medrcube.run.prompts import render_prompt

    cube = load_cube(cube_path)
    root = Path(cube.root or ".")
    jobs = [{"prompt": render_prompt(it.question, it.options),
             "image": None if it.image is None else str(root / it.image)} for it in cube.items]
    dest.write_text(json.dumps(jobs), encoding="utf-8")
    return len(jobs)


def command(harness: str, *, url: str, cube: str, conc: int, work: Path, jobs: Path,
            store: Path | None = None, extra: Sequence[str] = ()) -> list[str]:
    """`extra`: more arguments for `run` and the gate (e.g. `--variants=...`); for the bare
    client, `lazy` among them builds each body when it is sent (benchmarks/bare_client.py)."""
    store = store or work / "store"
    if harness == "bare":
        return [python(), "-m", "benchmarks.bare_client", str(jobs), url, str(conc), *(["lazy"] if "lazy" in extra else [])]
    extra = [a for a in extra if a != "lazy"]
    if harness == "run":
        return [bin_path("medrcube"), "run", f"--model=openai:bench@{url}", f"--cube={cube}",
                f"--concurrency={conc}", f"--response-store={store}", f"--out={work / 'reports'}",
                "--no-progress", *extra]
    # `-p no:hypothesispytest`: hypothesis is a dev dependency of this venv, absent from a user's
    # install, and its pytest plugin imports it in every terminal summary (~0.1 s of CPU, 0.15-0.2 s
    # wall at load 14, after the last answer: docs/speed.md). Pass --dev-plugins to keep it.
    dev = [] if DEV_PLUGINS else ["-p", "no:hypothesispytest"]
    return [python(), "-m", "pytest", "--pyargs", "medrcube.suite", f"--model=openai:bench@{url}",
            f"--cube={cube}", f"--concurrency={conc}", f"--response-store={store}",
            f"--junitxml={work / 'junit.xml'}", f"--alluredir={work / 'allure'}", "-p", "no:cacheprovider", "-q", *dev,
            *extra]


def one_run(srv: ScriptedServer, harness: str, *, delay: float, conc: int, cube: str, n_items: int,
            jobs: Path, scratch: Path, name: str, strict: bool = True, marginal: bool = True,
            extra: Sequence[str] = (), hot_path: bool = False) -> dict[str, Any]:
    """One run of `harness`, measured (module docstring). `hot_path`: the client process's
    CPU is read from /proc each time the server reads one of its requests, for the CPU
    between its first request and its last (`HotPath`)."""
    work = scratch / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    hot = HotPath() if hot_path else None
    srv.set_script({"default": "A", "latency": delay}, reply=None if hot is None else hot.reply)
    srv.reset_stats()
    cmd = command(harness, url=srv.base_url, cube=cube, conc=conc, work=work, jobs=jobs, extra=extra)
    t_spawn = time.monotonic()
    env = {"OPENAI_API_KEY": "bench", "MEDRCUBE_CACHE_DIR": str(scratch / "cache"),
           # the bare client is this checkout's module, run from the scratch directory
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = run_proc(cmd, log_dir=work, name=harness, cwd=work, env=env, timeout=1800, ok_codes=(0, 10, 11),
                    on_start=None if hot is None else hot.started)
    t_exit = time.monotonic()
    srv.set_script({"default": "A", "latency": delay})  # no more reads of a finished process
    st = srv.stats(log=True)
    chat = [r for r in st["requests"] if r.get("t_end") is not None]
    # On the bundled cube every item is one distinct request; the generated cube has
    # restricted items (no image: not asked) and repeated questions on one image.
    exact = st["total"] == n_items and not st["duplicates"]
    if (strict and not exact) or st["by_outcome"].get("200", 0) != st["total"]:
        raise BenchError(f"{name}: the server saw {st['total']} requests ({st['duplicates']} answered twice, "
                         f"outcomes {st['by_outcome']}) for {n_items} items\n{proc.tail()}")
    # report.html is drawn by a detached child after the exit status (report/after_exit.py):
    # it is waited for here, so that its CPU does not fall on the next run measured.
    for page in work.rglob("report.html"):
        wait_drawn(page.parent)
    origin = srv.clock_origin
    first = origin + min(r["t_start"] for r in chat)
    last = origin + max(r["t_end"] for r in chat)
    out = {"harness": harness, "delay_s": delay, "concurrency": conc, "requests": len(chat),
           "wall_s": t_exit - t_spawn, "startup_s": first - t_spawn, "requests_s": last - first,
           "tail_s": t_exit - last, "cpu_s": proc.cpu_s, "cpu_ms_per_request": 1000.0 * proc.cpu_s / len(chat),
           "maxrss_mib": proc.maxrss_mib, "exit": proc.returncode,
           "limit_s": len(chat) * delay / conc, "replay_cpu_s": None, "marginal_cpu_ms_per_request": None}
    if hot is not None:
        out.update(hot.figures(proc.cpu_s))
    if harness != "bare" and marginal:
        out.update(replay(srv, harness, url=srv.base_url, cube=cube, conc=conc, jobs=jobs, env=env,
                          store=work / "store", work=scratch / f"{name}-replay", requests=len(chat),
                          cpu_s=proc.cpu_s))
    return out


class HotPath:
    """The client's CPU on its hot path: user + system CPU of the whole process (every
    thread), read from /proc/PID/stat by the server each time it reads one of the
    client's requests; the CPU between the first read and the last, over the requests
    read in between, is the CPU per request with the start-up (spawn to the first
    request) and the tail (from the last request read: its answer, the verdicts, the
    outputs) left out. The steady figure starts at the request a quarter of the way in:
    the one-off work the gate does once its first answer is in (the rest of its session,
    the test collection, the report's imports) is left out with the start-up. /proc
    counts in clock ticks (10 ms), so a run of about a second or more of hot-path CPU
    gives it to about 1%."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.cpu: list[float] = []  # at each request read

    def started(self, pid: int) -> None:
        self.pid = pid

    def reply(self, prompt: str, body: Any) -> None:
        if self.pid is None:
            return None
        cpu = pid_cpu_s(self.pid)
        if cpu is not None:
            self.cpu.append(cpu)
        return None  # the script answers

    def figures(self, cpu_s: float) -> dict[str, Any]:
        cpu = self.cpu
        if len(cpu) < 2:
            return {"cpu_at_first_request_s": None, "hot_cpu_s": None, "hot_cpu_ms_per_request": None,
                    "steady_cpu_ms_per_request": None}
        quarter = len(cpu) // 4
        steady = 1000.0 * (cpu[-1] - cpu[quarter]) / (len(cpu) - 1 - quarter) if len(cpu) - 1 > quarter else None
        return {"cpu_at_first_request_s": cpu[0], "hot_cpu_s": cpu[-1] - cpu[0], "cpu_from_last_request_s": cpu_s - cpu[-1],
                "hot_cpu_ms_per_request": 1000.0 * (cpu[-1] - cpu[0]) / (len(cpu) - 1), "steady_cpu_ms_per_request": steady}


def replay(srv: ScriptedServer, harness: str, *, url: str, cube: str, conc: int, jobs: Path, env: dict[str, str],
           store: Path, work: Path, requests: int, cpu_s: float) -> dict[str, Any]:
    """The same run again on the store the first filled: every answer from the store, none asked.

    Its CPU is the run's fixed cost (start-up, grading, the verdict, the outputs), so the
    first run's CPU minus this one's, over the requests sent, is the client's CPU per
    request (docs/speed.md, "Client CPU per request").
    """
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    srv.reset_stats()
    cmd = command(harness, url=url, cube=cube, conc=conc, work=work, jobs=jobs, store=store)
    proc = run_proc(cmd, log_dir=work, name=f"{harness}-replay", cwd=work, env=env, timeout=1800, ok_codes=(0, 10, 11))
    st = srv.stats(log=False)
    if st["total"]:
        raise BenchError(f"{work.name}: the replay sent {st['total']} requests (every answer should come from "
                         f"the store)\n{proc.tail()}")
    for page in work.rglob("report.html"):
        wait_drawn(page.parent)
    return {"replay_cpu_s": proc.cpu_s, "marginal_cpu_ms_per_request": 1000.0 * (cpu_s - proc.cpu_s) / requests}


def med_or_none(key: str, rs: list[dict[str, Any]]) -> float | None:
    values = [r[key] for r in rs if r.get(key) is not None]
    return float(statistics.median(values)) if values else None


def summarise(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Medians per (cube, setting, harness), with ratios to the bare client of the same round."""
    rows = []
    keys = sorted({(r["cube"], r["delay_s"], r["concurrency"]) for r in runs}, key=lambda k: (k[0], -k[1]))
    for cube, delay, conc in keys:
        here = [r for r in runs if (r["cube"], r["delay_s"], r["concurrency"]) == (cube, delay, conc)]
        bare = {r["round"]: r["wall_s"] for r in here if r["harness"] == "bare"}
        for h in HARNESSES:
            mine = [r for r in here if r["harness"] == h]
            if not mine:
                continue

            def med(key: str, rs: list[dict[str, Any]] = mine) -> float:
                return float(statistics.median(r[key] for r in rs))

            ratios = [r["wall_s"] / bare[r["round"]] for r in mine if r["round"] in bare]
            rows.append({"cube": cube, "delay_s": delay, "concurrency": conc, "harness": h, "n": len(mine),
                         "requests": mine[0]["requests"], "limit_s": mine[0]["limit_s"],
                         "wall_s": med("wall_s"), "x_limit": med("wall_s") / mine[0]["limit_s"],
                         "x_bare": float(statistics.median(ratios)) if ratios else None,
                         "startup_s": med("startup_s"), "requests_s": med("requests_s"), "tail_s": med("tail_s"),
                         "cpu_ms_per_request": med("cpu_ms_per_request"),
                         "marginal_cpu_ms_per_request": med_or_none("marginal_cpu_ms_per_request", mine),
                         "maxrss_mib": max(r["maxrss_mib"] for r in mine)})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| cube | delay, in flight (limit) | harness | wall | x bare | x limit | start-up | requests | "
            "last answer to exit | CPU/request | marginal CPU/request | peak RSS |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        xb = "" if r["x_bare"] is None else f"{r['x_bare']:.2f}x"
        m = r.get("marginal_cpu_ms_per_request")
        marg = "" if m is None else f"{m:.2f} ms"
        lines.append(f"| {r['cube']} | {r['delay_s'] * 1000:.0f} ms, {r['concurrency']} ({r['limit_s']:.2f} s) | "
                     f"{r['harness']} | {r['wall_s']:.2f} s | {xb} | {r['x_limit']:.2f}x | {r['startup_s']:.2f} s | "
                     f"{r['requests_s']:.2f} s | {r['tail_s']:.2f} s | {r['cpu_ms_per_request']:.2f} ms | {marg} | "
                     f"{r['maxrss_mib']:.0f} MiB |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.throughput_harnesses", description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--settings", default="0.1:10,0.02:32,0.005:64", help="DELAY_S:IN_FLIGHT,...")
    ap.add_argument("--cube", default=str(ROOT / "fixtures" / "mini"))
    ap.add_argument("--harnesses", default=",".join(HARNESSES))
    ap.add_argument("--paper", action="store_true", help="also the generated 7,626-item cube (module docstring)")
    ap.add_argument("--paper-only", action="store_true", help="only the generated cube (with --paper)")
    ap.add_argument("--no-cold", action="store_true", help="keep the start-up cache as it is (no cold run)")
    ap.add_argument("--no-marginal", action="store_true",
                    help="no replay run from the store after each run and gate run (no marginal CPU per request)")
    ap.add_argument("--out", default=str(RESULT))
    ap.add_argument("--dev-plugins", action="store_true",
                    help="run the gate with the dev-only pytest plugins of this venv (hypothesis) loaded")
    args = ap.parse_args(argv)
    global DEV_PLUGINS
    DEV_PLUGINS = args.dev_plugins
    settings = [(float(d), int(c)) for d, c in (s.split(":") for s in args.settings.split(","))]
    chosen = [h for h in HARNESSES if h in args.harnesses.split(",")]
    scratch = OUT / "throughput_harnesses"
    scratch.mkdir(parents=True, exist_ok=True)
    load0 = load_average()
    runs: list[dict[str, Any]] = []
    colds: list[dict[str, Any]] = []
    cubes = [] if args.paper_only else [("mini", args.cube, settings, args.reps, chosen)]
    if args.paper:
        from benchmarks.cubes import full_cube

        cubes.append(("paper", str(full_cube(log=lambda m: print(m, file=sys.stderr))), settings[-1:], 1,
                      [h for h in chosen if h != "bare"] or ["gate"]))
    with ScriptedServer({"default": "A"}) as srv:
        for label, cube, sets, reps, harnesses in cubes:
            jobs = scratch / f"jobs-{label}.json"
            n_items = write_jobs(cube, jobs)
            # The gate's start-up cache (the leakage audit, the feasibility pass) cold, once:
            # every timed round after it finds the cache warm, as a user's second run does.
            strict = label == "mini"
            delay, conc = sets[-1]
            if args.no_cold:
                pass
            else:
                shutil.rmtree(scratch / "cache", ignore_errors=True)
                cold = one_run(srv, "gate", delay=delay, conc=conc, cube=cube, n_items=n_items, jobs=jobs,
                               scratch=scratch, name=f"{label}-cold-gate", strict=strict, marginal=False)
                cold.update(cube=label, round=-1)
                colds.append(cold)
                print(f"{label} gate, cold start-up cache: wall {cold['wall_s']:.2f} s, start-up {cold['startup_s']:.2f} s, "
                      f"tail {cold['tail_s']:.2f} s, CPU {cold['cpu_ms_per_request']:.2f} ms/request, "
                      f"RSS {cold['maxrss_mib']:.0f} MiB", file=sys.stderr, flush=True)
            for delay, conc in sets:
                for rnd in range(reps):
                    for h in harnesses:
                        name = f"{label}-{int(delay * 1000)}ms-c{conc}-{h}-{rnd}"
                        r = one_run(srv, h, delay=delay, conc=conc, cube=cube, n_items=n_items, jobs=jobs,
                                    scratch=scratch, name=name, strict=strict, marginal=not args.no_marginal)
                        r.update(cube=label, round=rnd)
                        runs.append(r)
                        m = r["marginal_cpu_ms_per_request"]
                        print(f"{name}: wall {r['wall_s']:.2f} s, start-up {r['startup_s']:.2f} s, requests "
                              f"{r['requests_s']:.2f} s, tail {r['tail_s']:.2f} s, CPU {r['cpu_ms_per_request']:.2f} "
                              f"ms/request" + ("" if m is None else f" (marginal {m:.2f})") + ", "
                              f"RSS {r['maxrss_mib']:.0f} MiB", file=sys.stderr, flush=True)
    rows = summarise(runs)
    doc = {"load_average_start": load0, "load_average_end": load_average(), "cpu_count": os.cpu_count(),
           "rows": rows, "runs": runs, "cold": colds}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(table(rows))
    print(f"load average at start {load0}, at end {doc['load_average_end']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
