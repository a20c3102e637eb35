"""Sequential qualification through the real gate, requests counted at the scripted server.

    python -m benchmarks.sequential_server [--reps 1] [--cases accuracy:0.25:+1,...] [--workers 3] [--cube DIR]

The generated full-size cube (`medrcube.testing.gencube`, 7,626 items on 3,000 images) is
copied with each question tagged by its item id (the generated questions repeat across
images, and the scripted server answers by question), images hard-linked. For each
case and replicate r the server is scripted with the answers the simulated model
`simulate:accuracy=A,icc=0.3,seed=r` would give (right or a fixed wrong option, item by
item; `benchmarks.sequential.model_spec` names the model of a case: a policy, a distance
from the bounds and a side), and the gate runs twice in a subprocess through the real
openai client:

    pytest --pyargs medrcube.suite --model=openai:bench@URL --cube=TAGGED --thresholds=T
    pytest ... --sequential --seed=r

each with a fresh response store, so that every request reaches the server; with
`--workers K` the sequential run of each first replicate is repeated under pytest-xdist
(`-n K`). Reported: the requests the server saw in each run, their ratio, the gate's verdict of
each run, and for `-n K` the extra requests against the single-process run (at most one
batch of 16 images per worker is allowed) and whether its verdicts are the same. The
policies are benchmarks/sequential.py's (`default`: the shipped thresholds.yaml;
`accuracy`: the same without credibility; `strict`, `slices`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.sequential import POLICY, SLICES_POLICY, bound_range, checks_of, cube_at, model_spec, shipped_doc

DEFAULT_CUBE = Path(tempfile.gettempdir()) / "medrcube-bench-sequential-cube"


def tagged_copy(source: Path, target: Path) -> Path:
    """The cube at `source` with " [case ID]" after every question; images hard-linked."""
    if (target / ".complete").is_file():
        return target
    for ds in sorted(p for p in source.iterdir() if p.is_dir()):
        out = target / ds.name
        (out / "images").mkdir(parents=True, exist_ok=True)
        for img in (ds / "images").iterdir():
            dest = out / "images" / img.name
            if not dest.exists():
                os.link(img, dest)
        rows = json.loads((ds / "test.json").read_text(encoding="utf-8"))
        for row in rows:
            row["question"] = f"{row['question']} [case {row['id']}]"
        (out / "test.json").write_text(json.dumps(rows), encoding="utf-8")
    (target / ".complete").write_text("ok\n")
    return target


def answer_key(cube: Any, spec: str) -> dict[str, str]:
    """The option text the simulated model `spec` picks for every item (standard variant)."""
    from medrcube.models.registry import load_adapter

    sim = load_adapter(spec, cube=cube)
    key = {}
    for it in cube.items:
        right = it.options.index(it.answer_text)
        pick = right if sim.correct(it.id, it.image, it.task) else (right + 1) % len(it.options)
        key[it.question] = it.options[pick]
    return key


def gate(workdir: Path, cube_dir: Path, thresholds: Path, model: str, name: str, *extra: str) -> dict[str, str]:
    """Run the gate once (fresh store and report directory); the verdict of every check,
    and the gate's under the key "gate"."""
    report = workdir / f"reports-{name}"
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "medrcube.suite", f"--model={model}", f"--cube={cube_dir}",
           f"--thresholds={thresholds}", f"--response-store={workdir / f'store-{name}'}",
           f"--medrcube-report={report}", "--concurrency=16", "-q", "-p", "no:cacheprovider", *extra]
    env = {**os.environ, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "sk-bench-scripted-server")}
    done = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode not in (0, 10, 11):
        raise SystemExit(f"gate run {name} ended with {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    runs = sorted(p for p in report.iterdir() if p.is_dir())
    doc = json.loads((runs[-1] / "gate.json").read_text(encoding="utf-8"))
    return {**{c["id"]: c["verdict"] for c in doc["checks"]}, "gate": doc["gate"]["verdict"]}


def full_in_process(cube: Any, policy: str, spec: str) -> tuple[int, str]:
    """The full run's asks and gate verdict on the same answers, decided in process by the
    gate's fixed-sample family (for cases whose full run is not sent to the server)."""
    from benchmarks.sequential import answers
    from medrcube.gate.evaluate import evaluate_gate

    recs = answers(cube, spec)
    asks = sum(r.outcome.value != "unavailable" for r in recs.values())
    return asks, evaluate_gate(checks_of(cube, policy), recs.values()).gate.status.value


def run(reps: int, cases: Sequence[tuple[str, float, int]], cube_dir: Path, workers: int = 0,
        full_at_server: bool = True) -> list[dict[str, Any]]:
    import yaml

    from medrcube.cube import load_cube
    from medrcube.testing.server import ScriptedServer

    cube_at(cube_dir)  # generated once, then reused
    work = Path(tempfile.mkdtemp(prefix="medrcube-bench-seqserver-"))
    tagged = tagged_copy(cube_dir, cube_dir.with_name(cube_dir.name + "-tagged"))
    cube = load_cube(tagged)
    policies = {"strict": POLICY, "slices": SLICES_POLICY, "default": shipped_doc(), "accuracy": shipped_doc(False)}
    rows = []
    with ScriptedServer({}) as server:
        model = f"openai:bench@{server.base_url}"
        for policy, distance, side in cases:
            thresholds = work / f"thresholds-{policy}.yaml"
            thresholds.write_text(yaml.safe_dump(policies[policy]), encoding="utf-8")
            bounds = bound_range(cube, checks_of(cube, policy))
            for seed in range(1, reps + 1):
                spec = model_spec(policy, bounds, distance, side, seed)
                name = f"{policy}-{distance}-{side}-{seed}"
                server.set_script({"answer_key": answer_key(cube, spec), "inspect_images": False})
                server.reset_stats()
                if full_at_server:
                    full = gate(work, tagged, thresholds, model, f"full-{name}")
                    full_requests = server.stats(log=False)["total"]
                else:
                    full_requests, full_gate = full_in_process(cube, policy, spec)
                    full = {"gate": full_gate}
                server.reset_stats()
                seq = gate(work, tagged, thresholds, model, f"seq-{name}", "--sequential", f"--seed={seed}")
                seq_requests = server.stats(log=False)["total"]
                xdist: dict[str, Any] = {}
                if workers and seed == 1 and not rows:
                    server.reset_stats()
                    par = gate(work, tagged, thresholds, model, f"seqn-{name}", "--sequential", f"--seed={seed}",
                               "-n", str(workers))
                    xdist = {"workers": workers, "xdist_requests": server.stats(log=False)["total"],
                             "xdist_same_verdicts": par == seq}
                rows.append({**xdist,
                    "policy": policy, "distance": distance, "side": "above" if side > 0 else "below",
                    "model": spec, "seed": seed, "full": full_requests, "sequential": seq_requests,
                    "full_at_server": full_at_server,
                    "fraction": seq_requests / max(full_requests, 1), "full_gate": full["gate"],
                    "sequential_gate": seq["gate"],
                    "undecided": sum(v == "undecided" for k, v in seq.items() if k != "gate"), "checks": len(seq) - 1,
                })
                print(json.dumps(rows[-1]), flush=True)
    return rows


def markdown(rows: Sequence[dict[str, Any]], seconds: float) -> str:
    extra = [f"- {r['policy']} {r['distance']:.2f} {r['side']}, seed {r['seed']}: `-n {r['workers']} --sequential` "
             f"sent {r['xdist_requests']:,} requests against {r['sequential']:,} in one process "
             f"({r['xdist_requests'] - r['sequential']:+,}), same verdicts: {'yes' if r['xdist_same_verdicts'] else 'NO'}"
             for r in rows if "workers" in r]
    lines = ["| policy | distance | model | seed | requests, full run | requests, `--sequential` | fraction "
             "| gate, full run | gate, `--sequential` | undecided checks (sequential) |",
             "|---|---|---|--:|--:|--:|--:|---|---|--:|"]
    for r in rows:
        model = re.sub(r",seed=\d+", "", r["model"]).removeprefix("simulate:")
        full = f"{r['full']:,}" + ("" if r.get("full_at_server", True) else " (in process)")
        lines.append(f"| {r['policy']} | {r['distance']:.2f} {r['side']} | {model} | {r['seed']} | {full} | "
                     f"{r['sequential']:,} | {r['fraction']:.1%} | {r['full_gate']} | {r['sequential_gate']} | "
                     f"{r['undecided']} of {r['checks']} |")
    tail = ("\n\n" + "\n".join(extra)) if extra else ""
    return "\n".join(lines) + tail + f"\n\n{len(rows)} pairs of gate runs, {seconds:.0f} s (wall).\n"


def parse_cases(text: str) -> list[tuple[str, float, int]]:
    out = []
    for case in text.split(","):
        policy, distance, side = case.split(":")
        out.append((policy, float(distance), 1 if int(side) > 0 else -1))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sequential_server")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--cases", default="accuracy:0.25:+1,accuracy:0.25:-1,accuracy:0.1:+1,accuracy:0.1:-1,"
                    "default:0.25:+1,default:0.25:-1,default:0.1:+1,default:0.1:-1")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--full-in-process", action="store_true",
                    help="decide the full run in process on the same answers instead of at the server")
    ap.add_argument("--cube", type=Path, default=DEFAULT_CUBE)
    args = ap.parse_args(argv)
    t0 = time.time()
    rows = run(args.reps, parse_cases(args.cases), args.cube, args.workers, not args.full_in_process)
    print(markdown(rows, time.time() - t0))
    return 0 if all(r["full_gate"] == r["sequential_gate"] and r.get("xdist_same_verdicts", True) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
