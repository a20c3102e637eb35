"""Shared tools of the reliability suite: small cubes with unique questions, scripted
answers, the audit that proves nothing was lost or asked twice, the gate invariant, the
`medrcube run` command line, and the tiny filesystem for disk-full faults.

Everything here drives the real code: real cubes on disk, the real OpenAI adapter and
`openai` client against the scripted server (medrcube.testing.server), the real store.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrcube.cube import load_cube
from medrcube.cube.item import Cube
from medrcube.records import GRADED, GradedRecord, Outcome
from medrcube.run.plan import PlannedAsk, plan_asks
from medrcube.run.runner import RunResult
from medrcube.run.store import ResponseStore
from medrcube.testing.gencube import generate_release_cube

LETTERS = "ABCDEFGH"
MODEL = "scripted-model"
# The marker every test sets as the API key: it must never appear in anything written.
MARKER_KEY = "sk-medrcube-RELIAB-marker-7f3a9c1e5b2d4086"
# Words that mean Python crashed instead of reporting an error.
TRACEBACK = "Traceback (most recent call last)"


# ---------------------------------------------------------------------------- cubes


def make_cube(root: Path, *, n_items: int = 24, seed: int = 11, n_datasets: int = 3) -> Cube:
    """A small release-layout cube whose questions are all distinct (each ends in a tag
    such as "[q07]"), so that the server's per-question counters count per item."""
    generate_release_cube(root, n_items=n_items, n_datasets=n_datasets, n_images=max(4, n_items * 2 // 3),
                          image_size=24, n_base_images=4, seed=seed)
    k = 0
    for test_json in sorted(root.glob("*/test.json")):
        records = json.loads(test_json.read_text(encoding="utf-8"))
        for rec in records:
            rec["question"] = f"{rec['question']} [q{k:02d}]"
            k += 1
        test_json.write_text(json.dumps(records, indent=1), encoding="utf-8")
    return load_cube(root)


def replies(cube: Cube, *, template: str = "{letter}", wrong_every: int = 3) -> dict[str, str]:
    """The scripted server's `answers`: question -> reply. Two items in three are answered
    right in the standard order, the third wrong, so that the numbers are not trivial."""
    out = {}
    for i, item in enumerate(cube.items):
        choice = (item.answer + (1 if wrong_every and i % wrong_every == wrong_every - 1 else 0)) % len(item.options)
        out[item.question] = template.format(letter=LETTERS[choice], i=i)
    return out


def asked_items(cube: Cube, variants: Sequence[str] = ("standard",)) -> int:
    """How many asks of these variants need a response (unavailable images excluded)."""
    return sum(1 for a in plan_asks(cube, variants, fingerprint="x") if a.available)


def openai_adapter(base_url: str, **kw: Any):
    """The real OpenAI adapter pointed at a scripted server, with short retry delays."""
    from medrcube.models.openai_adapter import OpenAIAdapter

    kw.setdefault("concurrency", 6)
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("backoff_max", 0.2)
    kw.setdefault("timeout", 10.0)
    return OpenAIAdapter(MODEL, base_url=base_url, **kw)


def fingerprint(base_url: str) -> str:
    """The fingerprint `openai:scripted-model@URL` gets (the endpoint is part of it, so
    that two endpoints never share stored answers)."""
    from medrcube.models.openai_adapter import OpenAIAdapter

    os.environ.setdefault("OPENAI_API_KEY", MARKER_KEY)
    return OpenAIAdapter(MODEL, base_url=base_url).fingerprint


# ---------------------------------------------------------------------------- audit


@dataclass
class Audit:
    """What one finished run did with its asks, checked against the store and the script."""

    asks: int = 0  # asks that needed a response
    graded: int = 0
    errors: int = 0
    lost: int = 0  # neither a graded answer (kept in the store) nor a recorded error
    not_from_server: int = 0  # graded from a text the server never sent for that question
    error_graded: int = 0  # an error record with an extracted choice, or a stored response
    unrecorded_errors: int = 0  # an error record without an entry in the store's errors table
    problems: list[str] = field(default_factory=list)

    def ok(self) -> bool:
        return not (self.lost or self.not_from_server or self.error_graded or self.unrecorded_errors)


def audit(
    result: RunResult,
    plan: Sequence[PlannedAsk],
    store: ResponseStore | None,
    expected: Mapping[str, str | set[str]],
) -> Audit:
    """Check every record of `result` against its planned ask, the store and the script.

    `expected` maps a question to the reply (or the set of replies) the server may have
    sent for it; a graded record whose response is anything else was graded from a
    damaged or foreign text."""
    a = Audit()
    if len(result.records) != len(plan):
        a.problems.append(f"{len(result.records)} records for {len(plan)} planned asks")
        a.lost += abs(len(plan) - len(result.records))
    keys = [p.key for p in plan if p.available]
    stored = store.get_many(keys) if store is not None else {}
    error_keys = {e.key for e in store.errors(keys)} if store is not None else set()
    for ask, rec in zip(plan, result.records, strict=True):
        if (rec.item_id, rec.variant, rec.rotation) != (ask.item.id, ask.variant, ask.rotation):
            a.problems.append(f"record {rec.item_id}/{rec.variant} out of plan order")
        if not ask.available:
            if rec.outcome is not Outcome.UNAVAILABLE:
                a.problems.append(f"{rec.item_id}: unavailable image asked ({rec.outcome})")
            continue
        a.asks += 1
        if rec.outcome in GRADED:
            a.graded += 1
            allowed = expected.get(ask.item.question)
            allowed = {allowed} if isinstance(allowed, str) else set(allowed or ())
            if rec.outcome is not Outcome.REFUSED and rec.response not in allowed:
                a.not_from_server += 1
                a.problems.append(f"{rec.item_id}: graded from {rec.response!r}, the server sent {sorted(allowed)}")
            if store is not None:
                kept = stored.get(ask.key)
                if kept is None or kept.text != rec.response:
                    a.lost += 1
                    a.problems.append(f"{rec.item_id}: graded but its response is not in the store")
        elif rec.outcome is Outcome.ERROR:
            a.errors += 1
            if rec.extracted is not None or not rec.error:
                a.error_graded += 1
                a.problems.append(f"{rec.item_id}: error record with a choice or without a message")
            if store is not None and ask.key in stored:
                a.error_graded += 1
                a.problems.append(f"{rec.item_id}: error record although a response is stored")
            if store is not None and ask.key not in error_keys:
                a.unrecorded_errors += 1
                a.problems.append(f"{rec.item_id}: error not recorded in the store")
        else:
            a.lost += 1
            a.problems.append(f"{rec.item_id}: outcome {rec.outcome} for an available ask")
    return a


def server_duplicates(stats: Mapping[str, Any]) -> int:
    """Requests the server answered (200, well-formed) more than once, over its lifetime."""
    return sum(n - 1 for n in stats["answered"].values() if n > 1)


# ---------------------------------------------------------------------------- the gate

# A policy whose bounds any run passes (0), so that only the evidence decides: a check
# with too many errors must come out as an error, never a pass.
OPEN_POLICY = {
    "version": 1,
    "defaults": {"rule": "point", "confidence": 0.95, "min_n": 1, "max_error_rate": 0.05},
    "overall": {"bound": 0.0},
    "slices": {"part": {"default": {"bound": 0.0}}, "modality": {"default": {"bound": 0.0}},
               "task": {"default": {"bound": 0.0}}},
    "cells": [{"match": "*/*/*", "bound": 0.0}],
}


@dataclass
class GateAudit:
    checks: int = 0
    incomplete: int = 0  # checks whose records' error rate exceeds max_error_rate
    incomplete_errored: int = 0
    passes_on_incomplete: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)


def gate_audit(records: Sequence[GradedRecord], variants: Sequence[str] = ("standard",)) -> GateAudit:
    """Evaluate every check of OPEN_POLICY on `records` and count passes on evidence
    whose error rate is above the check's max_error_rate (the gate must error those)."""
    from medrcube.gate.checks import build_checks
    from medrcube.gate.evaluate import evaluate
    from medrcube.gate.thresholds import policy_from_dict
    from medrcube.gate.verdict import Status

    policy = policy_from_dict(OPEN_POLICY, source="reliability-open-policy")
    cells = sorted({r.cell for r in records})
    g = GateAudit()
    for check in build_checks(cells, policy, variants=variants):
        scope = [r for r in records if check.selects(r) and r.variant in check.variants
                 and r.outcome is not Outcome.UNAVAILABLE]
        errors = sum(1 for r in scope if r.outcome is Outcome.ERROR)
        rate = errors / len(scope) if scope else 0.0
        verdict = evaluate(check, records)
        g.checks += 1
        g.verdicts[str(verdict.status)] += 1
        if rate > check.max_error_rate:
            g.incomplete += 1
            g.incomplete_errored += verdict.status is Status.ERROR
            g.passes_on_incomplete += verdict.status is Status.PASS
    return g


# ---------------------------------------------------------------------------- processes


def cli_run(base_url: str, cube: Cube | Path, store: Path, out: Path, *extra: str) -> list[str]:
    """`medrcube run` against the scripted server, as a command line."""
    root = cube.root if isinstance(cube, Cube) else cube
    return [sys.executable, "-m", "medrcube.cli", "run", "--no-progress", "--model", f"openai:{MODEL}@{base_url}",
            "--cube", str(root), "--response-store", str(store), "--out", str(out), *extra]


def env_with_key(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["OPENAI_API_KEY"] = MARKER_KEY
    env.pop("OPENAI_BASE_URL", None)
    env.update(extra)
    return env


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0, poll: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll)


def process_state(pid: int) -> str:
    """The process's state letter in /proc ("R", "S", "Z" for a zombie, ...), or "gone"."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is `pid` (zombies included), from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return sorted(out)


def sigkill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def stored_responses(store_dir: Path, keys: Sequence[str]) -> dict[str, str | None]:
    """{key: text} of the responses committed in a store directory (opened read-write,
    as the runner opens it; a missing store has none)."""
    if not (store_dir / "responses.sqlite3").exists():
        return {}
    with ResponseStore(store_dir) as s:
        return {k: r.text for k, r in s.get_many(keys).items()}


def no_traceback(*texts: str) -> bool:
    return not any(TRACEBACK in (t or "") for t in texts)


# ---------------------------------------------------------------------------- disk full


@contextlib.contextmanager
def tiny_filesystem(path: Path, size_kb: int) -> Iterator[bool]:
    """Mount a tmpfs of `size_kb` KiB at `path` (root only). Yields True when mounted,
    False when this machine cannot (not root, no mount): callers then fall back to
    RLIMIT_FSIZE, which makes any write past the limit fail with EFBIG."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = False
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("mount"):
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k,mode=0777", "tmpfs", str(path)],
                           capture_output=True, text=True)
        mounted = r.returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fsize_limited(cmd: Sequence[str], limit_bytes: int) -> list[str]:
    """`cmd` (a python -m ... command) run under RLIMIT_FSIZE: writes past the limit fail
    with EFBIG (SIGXFSZ ignored), as on a full disk but per file."""
    assert cmd[0] == sys.executable and cmd[1] == "-m", cmd
    code = (
        "import resource, runpy, signal, sys; "
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit_bytes}, {limit_bytes})); "
        f"sys.argv = {[cmd[2], *cmd[3:]]!r}; "
        f"runpy.run_module({cmd[2]!r}, run_name='__main__')"
    )
    return [sys.executable, "-c", code]


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


__all__ = [
    "Audit", "GateAudit", "LETTERS", "MARKER_KEY", "MODEL", "OPEN_POLICY", "TRACEBACK",
    "asked_items", "audit", "cli_run", "env_with_key", "fingerprint", "fsize_limited", "gate_audit",
    "make_cube", "no_traceback", "openai_adapter", "replies", "server_duplicates", "sigkill",
    "stored_responses", "tiny_filesystem", "unique_name", "wait_for",
]
