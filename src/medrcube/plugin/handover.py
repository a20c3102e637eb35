"""What the processes of a run hand to the controller, merged into one run: the records
(with `cached` meaning the run's, not one worker's), the request counts and the usage.

A module of its own beside summary.py (which writes what is merged here).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from medrcube.records import GradedRecord

if TYPE_CHECKING:
    from medrcube.rundir.files import GradedAhead, ResultRows

__all__ = ["Preread", "asked_out", "carries_records", "digest_out", "lines_sha256", "merge_handovers", "merged_run",
           "merged_usage", "publish_no_read", "publish_read", "records_out", "without_records"]


RECORDS = "records_jsonl"  # a worker's records: results.jsonl's lines of them, in one string
DIGEST = "records_sha256"  # or only the SHA-256 of those lines, when the controller has read the very same
READ_FILE = "controller-read.sha256"  # in the exchange directory: the SHA-256 of the lines the controller read
NO_READ_FILE = "controller-read.none"  # or that it read none (a shard file missing or not that shard's)
READ_WAIT_S = 10.0  # how long a worker that holds its own shard only waits for the controller's read
READ_POLL_S = 0.02


@dataclass
class Preread:
    """The run's records read by the controller from the workers' shard files while they
    decided (plugin/speed/shard_preread.py), their lines and sums, and the SHA-256 of the
    lines in order: used by `merged_run` only for a hand-over whose lines have that digest."""

    records: list[GradedRecord]
    ahead: GradedAhead
    digest: str


def records_out(records: Iterable[GradedRecord], made: ResultRows | None = None,
                exchange: Path | None = None, digest: str | None = None, wait_s: float = 0.0) -> dict[str, str]:
    """An xdist worker's records for its hand-over: results.jsonl's lines of them
    (rundir/files.result_line) in one string, and the (item, variant, rotation) of those it
    asked itself, one per line. Strings, because pytest-xdist sends a worker's output through
    execnet's serializer, which walks every object in Python: 36,478 records as dicts cost
    each worker about 1 s of CPU to send and the controller more to receive, after the last
    answer; and the lines, because the controller writes them into results.jsonl as they
    are (docs/speed.md, "Tenth pass"). `made`: lines made already (the shards' exchange,
    service.Inference.lines), copied as they are; a record it does not hold gets its own line.

    `exchange`: the shards' exchange directory. When the controller has read the very same
    lines from the shard files and holds them (`publish_read`: the SHA-256 of its lines
    equals this worker's), only that digest is handed over, not the lines: at paper scale
    25 MiB less per worker through execnet, and not held by the controller (eleventh pass).
    `digest`: `lines_sha256` of these records, when the caller took it already. `wait_s`: how long
    to wait for the controller's read (`digest` given), for a worker whose records were read from
    every shard file, which the controller reads too: the deciding worker's lines are 25 MiB at
    paper scale, about 0.2 s of CPU each to send and to receive (docs/speed.md, "Fifteenth pass")."""
    records = list(records)
    asked = _asked(records)
    # Waited for only with a digest to compare it with (without one, the read as it is now).
    read = _awaited_read(exchange, wait_s if digest is not None else 0.0, time.monotonic) if exchange is not None else None
    if read is not None and digest == read:
        return {DIGEST: read, "asked": asked}
    data = _lines(records, made)
    if read is not None and digest is None and hashlib.sha256(data).hexdigest() == read:
        return {DIGEST: read, "asked": asked}
    return {RECORDS: data.decode("utf-8"), "asked": asked}


def digest_out(own: Iterable[GradedRecord], exchange: Path | None, digest: str | None,
               wait_s: float = READ_WAIT_S, clock: Callable[[], float] = time.monotonic) -> dict[str, str] | None:
    """The hand-over of a worker that holds its own shard's records only (it took the deciding
    worker's verdicts: plugin/speed/shared_verdicts.taker): `digest`, the SHA-256 of the whole
    run's lines it was given, when the controller holds lines with that digest, with the asks of
    its own records; None when the controller holds no such read (the caller reads the rest).
    The controller reads the shard files while the workers decide: its read is waited for, up to
    `wait_s`, unless it said that it has none (`publish_no_read`)."""
    if exchange is None or digest is None:
        return None
    read = _awaited_read(exchange, wait_s, clock)
    return {DIGEST: read, "asked": _asked(own)} if read is not None and digest == read else None


def _awaited_read(exchange: Path, wait_s: float, clock: Callable[[], float]) -> str | None:
    """The controller's read (`controller_read`), waited for up to `wait_s` unless it said it has none."""
    deadline = clock() + wait_s
    while (read := controller_read(exchange)) is None:
        if (exchange / NO_READ_FILE).exists() or clock() > deadline:
            return None
        time.sleep(READ_POLL_S)
    return read


def asked_out(own: Iterable[GradedRecord]) -> dict[str, str]:
    """The hand-over of a worker's own asks alone, no records: another process's carry the run's
    (`merged_run` refuses a run whose hand-overs carry none)."""
    return {"asked": _asked(own)}


def _asked(records: Iterable[GradedRecord]) -> str:
    """(item, variant, rotation) of the records not `cached`, one per line (`_asked_keys` reads them back)."""
    return "\n".join(_ask_line(r.item_id, r.variant, r.rotation) for r in records if not r.cached)


def _ask_line(item: str, variant: str, rotation: int) -> str:
    """An ask as its `asked` line: its item, variant and rotation (an ask of its own) by tabs."""
    return f"{item}\t{variant}\t{rotation}"


def lines_sha256(records: Iterable[GradedRecord], made: ResultRows | None = None) -> str:
    """The SHA-256 of results.jsonl's lines of `records` joined by newlines (`records_out`'s
    string): equal for two processes exactly when their records are."""
    return hashlib.sha256(_lines(list(records), made)).hexdigest()


def _lines(records: list[GradedRecord], made: ResultRows | None) -> bytes:
    import io

    from medrcube.rundir.files import ResultRows

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="\n")
    (made or ResultRows()).write(out, records)
    data = out.buffer.getvalue()
    return data[:-1] if data.endswith(b"\n") else data


def publish_read(exchange: Path, digest: str) -> None:
    """Say in the exchange directory that the controller holds lines with this SHA-256
    (plugin/speed/shard_preread.py): written whole (a temporary file renamed), only once the
    read is held, so that a worker that sees it may hand over the digest alone."""
    tmp = exchange / f".{READ_FILE}.{os.getpid()}"
    tmp.write_text(digest, encoding="ascii")
    os.replace(tmp, exchange / READ_FILE)


def publish_no_read(exchange: Path) -> None:
    """Say in the exchange directory that the controller holds no read of the shard files: a worker
    waiting for one (`digest_out`) reads the other shards itself at once."""
    with contextlib.suppress(OSError):
        (exchange / NO_READ_FILE).touch()


def controller_read(exchange: Path) -> str | None:
    """The SHA-256 of the lines the controller read and holds (`publish_read`), or None."""
    try:
        text = (exchange / READ_FILE).read_text(encoding="ascii").strip()
    except OSError:
        return None
    return text if len(text) == 64 else None


def without_records(handover: Mapping[str, Any]) -> dict[str, Any]:
    """A hand-over with its records dropped, its `asked` keys kept: every process of a run
    agrees on the records (`merge_handovers` takes the first's), so the controller keeps one copy."""
    out = dict(handover)
    if carries_records(out):
        out["asked"] = "\n".join(_asked_keys(out))
        out.pop(RECORDS, None)
        out.pop(DIGEST, None)
        out.pop("records", None)
        out.pop("outcome_pairs", None)  # the counts of those records
    return out


def carries_records(handover: Mapping[str, Any]) -> bool:
    """Whether a hand-over still holds records, or their digest (the first kept by the controller)."""
    return RECORDS in handover or DIGEST in handover or "records" in handover


def _digest(handover: Mapping[str, Any]) -> str | None:
    """The SHA-256 of a hand-over's lines: handed over alone, or taken of its lines; None for records as objects."""
    if DIGEST in handover:
        return str(handover[DIGEST])
    return hashlib.sha256(str(handover[RECORDS]).encode("utf-8")).hexdigest() if RECORDS in handover else None


def _records(handover: Mapping[str, Any]) -> tuple[list[GradedRecord], list[str] | None]:
    """A hand-over's records, and their results.jsonl lines when it came as lines."""
    if RECORDS in handover:
        lines = str(handover[RECORDS]).split("\n") if handover[RECORDS] else []
        return [GradedRecord.from_dict(json.loads(line)) for line in lines], lines
    return [d if isinstance(d, GradedRecord) else GradedRecord.from_dict(d) for d in handover.get("records") or ()], None


def _asked_keys(handover: Mapping[str, Any]) -> list[str]:
    """The asks of a hand-over's records not `cached`, each as its `asked` line (`_ask_line`): its `asked` lines as they are when it carries those (the records are results.jsonl's
    lines then, or a digest), else made from its records (this process's own, as objects)."""
    if "asked" in handover and "records" not in handover:
        return [line for line in str(handover["asked"]).split("\n") if line]
    return [_ask_line(item, variant, rotation) for item, variant, rotation, cached in map(_key, handover.get("records") or ())
            if not cached]


def merge_handovers(handovers: Iterable[Mapping[str, Any]]) -> Any:
    """One RunResult for the whole run (`merged_run`'s, without the lines)."""
    return merged_run(handovers)[0]


def merged_run(handovers: Iterable[Mapping[str, Any]], preread: Preread | None = None) -> tuple[Any, GradedAhead | None]:
    """One RunResult for the whole run: the records every inferring process agrees on
    (they all read the same store; the first is taken), and the request counts summed
    over processes; (None, None) if no process ran inference. With it, when the records
    came as results.jsonl's lines (an xdist worker's), a GradedAhead holding those lines
    and the summary's sums, for write_run (rundir/files.py: a line is used only for the
    very record it was read into). `preread`: the same lines read while the workers decided,
    taken instead of reading the hand-over's when their digests agree (closed otherwise); a
    hand-over of the digest alone (`records_out`) is always of the lines the controller read."""
    from medrcube.rundir.files import GradedAhead

    handovers = [h for h in handovers if h]
    if not handovers:
        return None, None
    # The first hand-over that carries records (`without_records` dropped the others').
    first = next((h for h in handovers if carries_records(h)), None)
    if first is None:
        raise RuntimeError("no process of this run handed over the run's records (each held its own shard's "
                           "only); the answers are in the response store: run again")
    # `cached` means answered from a store written before this run: an ask one worker
    # sent is not cached for the run, although the other workers read it from the store.
    # A handover's records are results.jsonl's lines (an xdist worker's: `records_out`), or
    # from this process itself the records (GateSession.handover(live=True)).
    fresh: set[str] | None = None  # the asks of this run, as `asked` lines (parsed back, 0.1 s of CPU at paper scale)

    def corrected(records: list[GradedRecord], pairs: Mapping[tuple[Any, bool], int] | None = None) -> list[GradedRecord]:
        nonlocal fresh
        # Nothing to correct (a run on a new store); `pairs` (RunResult.outcome_pairs) says so without a pass.
        if not (any(n for (_, cached), n in pairs.items() if cached) if pairs is not None else any(rec.cached for rec in records)):
            return records
        if fresh is None:  # each ask by its item, variant and rotation: a shuffled rotation is an ask of its own
            fresh = {key for h in handovers for key in _asked_keys(h)}
        fixed = [rec if not rec.cached or _ask_line(rec.item_id, rec.variant, rec.rotation) not in fresh
                 else dataclasses.replace(rec, cached=False) for rec in records]
        return records if all(a is b for a, b in zip(fixed, records, strict=True)) else fixed  # the list itself if unchanged

    if preread is not None:
        if _digest(first) == preread.digest:
            # A record whose `cached` the merge corrects is another object: its line and the
            # summary's sums are then made from it (GradedAhead uses only what it was fed).
            return _merged(handovers, first, corrected(preread.records)), preread.ahead
        preread.ahead.close()
    if DIGEST in first:  # the controller published the digest of a read it holds until here: never
        raise RuntimeError(f"a worker handed over the digest of the run's lines ({first[DIGEST]}) but the "
                           "controller holds no read with it; the answers are in the response store: run again")
    # This process's own records, live (`GateSession.handover`): the list is the hand-over's own copy,
    # of GradedRecords, with their (outcome, cached) counts from the grading (RunResult.outcome_pairs).
    live = "outcome_pairs" in first and isinstance(first.get("records"), list)
    records, lines = (first["records"], None) if live else _records(first)
    read = records
    records = corrected(records, first["outcome_pairs"] if live else None)
    ahead = None
    if lines is not None:
        ahead = GradedAhead()
        ahead.rows.add(records, lines=[line if rec is was else None for rec, was, line in zip(records, read, lines, strict=True)])
        ahead.tally.add(records)
    pairs = first["outcome_pairs"] if live and records is read else None  # none corrected: still theirs
    return _merged(handovers, first, records, pairs), ahead


def _merged(handovers: list[Mapping[str, Any]], first: Mapping[str, Any], records: list[GradedRecord],
            pairs: Any = None) -> Any:
    from medrcube.run.runner import RunResult, record_counts

    return RunResult(
        records=records,
        requests_sent=sum(int(h["requests_sent"]) for h in handovers),
        # cache_hits: asks answered from the store without any process of this run asking them.
        **record_counts(records, pairs),
        counted=(records, pairs) if pairs is not None else None,
        wall_s=max(float(h["wall_s"]) for h in handovers),
        judge_requests=sum(int(h.get("judge_requests", 0)) for h in handovers),
        started=min(float(h["started"]) for h in handovers),
        finished=max(float(h["finished"]) for h in handovers),
        aborted=next((h["aborted"] for h in handovers if h.get("aborted")), None),
        info={
            **dict(first.get("info") or {}),
            # How the asks were spread over the processes (xdist workers) of this run.
            "requests_by_process": {str(h.get("worker", i)): int(h["requests_sent"]) for i, h in enumerate(handovers)},
        },
    )


def _key(d: GradedRecord | Mapping[str, Any]) -> tuple[str, str, int, bool]:
    """(item, variant, rotation, cached) of a handed-over record or of its dict."""
    if isinstance(d, GradedRecord):
        return d.item_id, d.variant, d.rotation, bool(d.cached)
    return d["item_id"], d["variant"], int(d.get("rotation") or 0), bool(d.get("cached"))


def merged_usage(handovers: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Usage per model role, summed over the processes of the run."""
    from medrcube.run.metering import Usage

    out: dict[str, Usage] = {}
    for h in handovers:
        for role, u in (h.get("usage") or {}).items():
            out.setdefault(role, Usage()).add(u)
    return {role: u.to_dict() for role, u in out.items()}
