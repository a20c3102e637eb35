"""The gate's asking on real inference engines, with the tiny BLIP-2 built at run time.

    python -m benchmarks.engines [--reps 3] [--only order,compare] [--items N]

- `order`: one managed vLLM engine (CPU build, `vllm:` as the gate starts it, 4 sequences
  at once, a KV cache too small for every image's prefix: `PRESSURE`; its prefix and image
  caches emptied before every run) on the tiny BLIP-2 with 64 image tokens, the run's requests sent in the plan's order or with the questions of one
  image back to back (`RunOptions.order`, run/order.py `image_runs`), on the bundled mini
  cube and on a cube of 8 questions per image whose file lists them task by task (so that
  the plan's order never puts two questions of one image together). Requests per second,
  time to the last answer, and the engine's own prefix-cache counters (/metrics).
- `compare`: the same model and cube through vLLM (CPU build, managed) and the in-process
  `hf:` adapter (batches of 8), and with `--with-serve` `transformers serve` (its own
  process, one inference thread; with the processor's chat template fixed as for `hf:`,
  `_SERVE_TEMPLATE_FIX`): items per
  second and CPU seconds per item, the client's and the server's together (the engine's
  whole process group for vLLM).

No response store (every request is sent); greedy decoding; 32 new tokens per answer (the
model is noise and never stops). Medians of `--reps` runs, alternating the arms. Results
print as JSON lines and go to benchmarks/results/engines_<scenarios>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MINI = ROOT / "fixtures" / "mini"
OUT = ROOT / "benchmarks" / "results" / "engines_{only}.json"
TICK = os.sysconf("SC_CLK_TCK")


def _build_model(python: Path, out: Path, query_tokens: int = 8) -> Path:
    code = ("import sys; from medrcube.testing.tiny_vlm import build_tiny_blip2; "
            "build_tiny_blip2(sys.argv[1], query_tokens=int(sys.argv[2]))")
    subprocess.run([str(python), "-c", code, str(out), str(query_tokens)], check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    return out


def _eight_per_image(work: Path, n_images: int = 40) -> Any:
    """A cube of `n_images` images of the mini cube, 8 questions each, listed task by task."""
    from medrcube.cube import load_cube

    mini = load_cube(MINI)
    seen: dict[str, Any] = {}
    for it in mini.items:
        if it.image is not None and it.image not in seen:
            seen[it.image] = it
    images = list(seen.values())[:n_images]
    root = work / "eight"
    (root / "img").mkdir(parents=True, exist_ok=True)
    rows = []
    for q in range(8):  # question q of every image, then question q+1: the task-by-task listing
        for i, it in enumerate(images):
            name = f"img/{i:03d}.png"
            if q == 0:
                shutil.copyfile(MINI / it.image, root / name)
            rows.append({"id": f"im{i:03d}-q{q}", "dataset": "bench", "image": name,
                         "question": f"Question {q} about this image: which option fits best?",
                         "options": list(it.options), "answer": it.answer, "task": it.task,
                         "modality": it.modality, "part": it.part})
    (root / "cube.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return load_cube(root / "cube.jsonl")


def _group_cpu(pgid: int) -> float:
    """CPU seconds (user + system) of the live processes of a process group."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # pgrp
            total += int(fields[11]) + int(fields[12])
    return total / TICK


def _metrics(url: str) -> dict[str, float]:
    root = url.removesuffix("/v1")
    text = urllib.request.urlopen(f"{root}/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(("vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:mm_cache_queries",
                            "vllm:mm_cache_hits")) and not line.startswith("#"):
            name = line.split("{")[0].split(" ")[0]
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def _reset_caches(url: str) -> None:
    root = url.removesuffix("/v1")
    for route in ("reset_prefix_cache", "reset_mm_cache"):
        urllib.request.urlopen(urllib.request.Request(f"{root}/{route}", method="POST", data=b""), timeout=30).read()


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _ask(cube: Any, adapter: Any, order: str = "image") -> dict[str, float]:
    from medrcube.run.runner import run_cube

    t0, c0 = time.perf_counter(), _self_cpu()
    result = run_cube(cube, adapter, order=order, concurrency=adapter.concurrency)
    wall, cpu = time.perf_counter() - t0, _self_cpu() - c0
    n = result.requests_sent
    failed = [r for r in result.records if r.outcome.value == "error"]
    if failed:
        print(f"{len(failed)} errors, the first: {getattr(failed[0], 'error', None) or failed[0]}", file=sys.stderr)
    errors = len(failed)
    return {"wall_s": wall, "client_cpu_s": cpu, "requests": n, "errors": errors, "rps": n / wall if wall else 0.0}


# The order scenario's engine: 64 image tokens in blocks of 32 (two whole blocks an image's
# questions can share), and a KV cache of 64 blocks (2,048 tokens) of which 4 sequences in
# flight take about half: the cache cannot hold every image's prefix at once, as a real
# model's (hundreds of image tokens, KV of ~0.5 MB a token) cannot on a real machine.
PRESSURE = ("--block-size", "32", "--num-gpu-blocks-override", "64")


def _engine_adapter(model: Path, *, seqs: int = 8, flags: tuple[str, ...] = ()) -> Any:
    from medrcube.models.vllm_adapter import open_vllm
    from medrcube.models.vllm_engine import EngineArgs

    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # /reset_prefix_cache and /reset_mm_cache: each run starts cold
    args = EngineArgs(model=str(model), max_num_seqs=seqs, max_model_len=512, dtype="float32", seed=0,
                      limit_mm_per_prompt={"image": 1}, engine_flags=("--enforce-eager", *flags))
    return open_vllm(str(model), spec="vllm:bench", args=args)


def bench_order(model: Path, reps: int, work: Path, log: Any) -> list[dict[str, Any]]:
    from medrcube.cube import load_cube
    from medrcube.run.order import image_runs

    adapter = _engine_adapter(model, seqs=4, flags=PRESSURE)
    out = []
    try:
        cubes = {"eight_per_image": _eight_per_image(work), "mini": load_cube(MINI)}
        for name, cube in cubes.items():
            seq = [("standard", it.image) for it in cube.items]
            switches = {o: sum(1 for a, b in zip(s, s[1:], strict=False) if a[1] != b[1]) for o, s in
                        (("plan", seq), ("image", [seq[i] for i in image_runs(seq)]))}
            _ask(cube, adapter, "plan")  # a warm-up pass: the engine's first requests are slow
            runs: dict[str, list[dict[str, float]]] = {"plan": [], "image": []}
            for rep in range(reps):
                for order in (("plan", "image") if rep % 2 == 0 else ("image", "plan")):
                    _reset_caches(adapter.base_url)
                    before = _metrics(adapter.base_url)
                    r = _ask(cube, adapter, order)
                    after = _metrics(adapter.base_url)
                    r.update({k.split(":")[1]: after.get(k, 0.0) - before.get(k, 0.0) for k in after})
                    runs[order].append(r)
                    log(json.dumps({"scenario": "order", "cube": name, "order": order, "rep": rep, **r}))
            for order, rs in runs.items():
                row = {"scenario": "order", "cube": name, "items": len(cube.items), "order": order, "runs": len(rs),
                       "image_switches": switches[order],
                       **{f"median_{k}": statistics.median(r[k] for r in rs) for k in rs[0]},
                       "min_wall_s": min(r["wall_s"] for r in rs), "max_wall_s": max(r["wall_s"] for r in rs)}
                out.append(row)
                log(json.dumps(row))
    finally:
        from medrcube.models.vllm_engine import stop_engines

        asyncio.run(adapter.aclose())
        stop_engines()
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Run in the `transformers serve` process (a sitecustomize on its path): the same fix as
# _processor_template_from_tokenizer below, where transformers loads this BLIP-2's chat
# template into its tokenizer only (Blip2Processor's __init__ does not pass it on) and
# the server formats the prompt with the processor's. Without it every answer is HTTP 400
# ("this processor does not have a chat template").
_SERVE_TEMPLATE_FIX = """\
from transformers import Blip2Processor


def _template(self):
    return self.__dict__.get("chat_template") or self.tokenizer.chat_template


def _keep(self, value):
    self.__dict__["chat_template"] = value


Blip2Processor.chat_template = property(_template, _keep)
"""


def _transformers_serve(model: Path, work: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    exe = Path(sys.executable).with_name("transformers")
    site = work / "serve-site"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(_SERVE_TEMPLATE_FIX, encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    proc = subprocess.Popen([str(exe), "serve", str(model), "--port", str(port), "--host", "127.0.0.1", "--device", "cpu"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=5) as r:
                if json.load(r).get("data"):
                    return proc, base
        except OSError:
            time.sleep(1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError("transformers serve did not come up")


def _processor_template_from_tokenizer() -> None:
    """This project's transformers loads BLIP-2's chat template into its tokenizer only, and
    the hf adapter formats prompts with the processor's: the processor reads it from there
    (this benchmark's process only)."""
    from transformers import Blip2Processor

    def template(self: Any) -> Any:
        return self.__dict__.get("chat_template") or self.tokenizer.chat_template

    def keep(self: Any, value: Any) -> None:
        self.__dict__["chat_template"] = value

    Blip2Processor.chat_template = property(template, keep)  # type: ignore[assignment]


def bench_compare(model: Path, reps: int, items: int, log: Any, with_serve: bool = False) -> list[dict[str, Any]]:
    from medrcube.cube import load_cube
    from medrcube.models.registry import load_adapter
    from medrcube.models.vllm_engine import stop_engines

    mini = load_cube(MINI)
    rng = random.Random(1)
    keep = set(rng.sample([it.id for it in mini.items], items))
    cube = dataclasses.replace(mini, items=tuple(it for it in mini.items if it.id in keep))
    arms: dict[str, list[dict[str, float]]] = {"vllm": [], "hf": []}
    vllm = _engine_adapter(model)
    serve = ts = None
    if with_serve:
        serve, base = _transformers_serve(model, model.parent)
        arms["transformers_serve"] = []
        os.environ.setdefault("OPENAI_API_KEY", "none")
        from medrcube.models.openai_adapter import OpenAIAdapter

        ts = OpenAIAdapter(str(model), base_url=base, concurrency=8, timeout=600,
                           params={"max_tokens": 32, "temperature": 0})
    _processor_template_from_tokenizer()
    hf = load_adapter(f"hf:{model}")
    hf.params = {**getattr(hf, "params", {}), "max_new_tokens": 32}  # as the servers: 32 new tokens
    try:
        adapters = {"vllm": vllm, "hf": hf, "transformers_serve": ts}
        for arm in arms:
            _ask(cube, adapters[arm])  # warm-ups
        for rep in range(reps):
            for arm in list(arms) if rep % 2 == 0 else list(reversed(arms)):
                server_pgid = (vllm.process.proc.pid if arm == "vllm"
                               else serve.pid if arm == "transformers_serve" and serve is not None else None)
                s0 = _group_cpu(server_pgid) if server_pgid else 0.0
                r = _ask(cube, adapters[arm])
                r["server_cpu_s"] = (_group_cpu(server_pgid) - s0) if server_pgid else 0.0
                r["cpu_per_item_s"] = (r["client_cpu_s"] + r["server_cpu_s"]) / max(1, r["requests"])
                arms[arm].append(r)
                log(json.dumps({"scenario": "compare", "arm": arm, "rep": rep, **r}))
    finally:
        asyncio.run(vllm.aclose())
        stop_engines()
        if serve is not None:
            os.killpg(serve.pid, signal.SIGTERM)
            serve.wait(timeout=60)
    out = []
    for arm, rs in arms.items():
        row = {"scenario": "compare", "arm": arm, "items": len(cube.items), "runs": len(rs),
               "median_items_per_s": statistics.median(r["rps"] for r in rs),
               "median_cpu_per_item_s": statistics.median(r["cpu_per_item_s"] for r in rs),
               "median_wall_s": statistics.median(r["wall_s"] for r in rs),
               "errors": sum(r["errors"] for r in rs)}
        out.append(row)
        log(json.dumps(row))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="order,compare")
    ap.add_argument("--items", type=int, default=200, help="items of the mini cube in the comparison")
    ap.add_argument("--with-serve", action="store_true", help="add `transformers serve` to the comparison")
    args = ap.parse_args(argv)
    from medrcube.models.vllm_engine import find_python

    python = find_python()
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        work = Path(tmp)
        model = _build_model(python, work / "tiny-vlm")
        results: list[dict[str, Any]] = []
        only = set(args.only.split(","))
        if "order" in only:
            results += bench_order(_build_model(python, work / "tiny-vlm-64", 64), args.reps, work, print)
        if "compare" in only:
            results += bench_compare(model, args.reps, args.items, print, with_serve=args.with_serve)
    out = Path(str(OUT).format(only="_".join(sorted(only))))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"load_start": load0, "load_end": os.getloadavg(), "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
