"""The records of a sharded run's passes, handed from each process to the others through files.

Under pytest-xdist every worker asks its own shard of the cube (service.infer), and every
worker needs every record: its cases decide the whole family of checks. Without this, each
worker then ran the whole cube again, reading the other shards' answers back from the
response store and grading each of them once more: at the paper's scale (36,478 asks) about
3 s of CPU in every worker after the last answer, n times the same work with n workers (a
tail of 9-11 s with two workers on two cores; docs/speed.md, "Tenth pass").

Here each worker writes the records of its own pass once (`publish`), and reads the
others' (`gather`) instead. The files only save work: `gather` answers None, and the
caller runs its pass over the store as before (which also asks what a dead worker left
unasked), whenever a file is missing after `wait_s`, its writer died or withdrew, or a file is not
exactly the shard it should be (another pass, another cube, a missing or duplicate
record). So a record taken from a file is the record its asker graded, and nothing can be
taken that the store pass would not have given.

A file: one JSON header line (format, tag, shard index and count, the shard's item ids'
digest, the number of records, what the pass counted), then one JSON line per record (the
gate writes results.jsonl's line of it, which its hand-over and the controller take as it
is; GradedRecord.from_dict reads either that or the record's dict), written to a temporary
name and renamed, so that a reader sees all of it or nothing. The directory is the
controller's own (tempfile.mkdtemp: this user's only), removed at the end of the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrcube.records import GradedRecord

FORMAT = "medrcube-shard-records/1"
POLL_S = 0.02  # how often a waiting worker looks for the others' files


@dataclass(frozen=True)
class Shard:
    """Another process's records of a pass over its shard, and what that pass counted."""

    records: list[GradedRecord]
    info: dict[str, Any]
    lines: list[str]  # each record's line as its writer wrote it
    sha256: str = ""  # of the file's bytes: what another process read, matched without parsing (`publish`)


def items_digest(item_ids: Sequence[str]) -> str:
    """The digest of a shard's item ids, in order: a file of another pass or cube is refused."""
    h = hashlib.sha256()
    for item_id in item_ids:
        h.update(item_id.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def _path(directory: Path, tag: str, index: int) -> Path:
    return directory / f"{tag}-{index}.jsonl"


def _pid_path(directory: Path, tag: str, index: int) -> Path:
    return directory / f"{tag}-{index}.pid"


def announce(directory: Path, tag: str, index: int) -> None:
    """Say that this process is doing pass `tag` of its shard (its pid: a reader stops
    waiting for the file of a writer that died)."""
    with contextlib.suppress(OSError):
        _pid_path(directory, tag, index).write_text(str(os.getpid()), encoding="ascii")


def publish(directory: Path, tag: str, index: int, count: int, item_ids: Sequence[str],
            records: Sequence[GradedRecord], info: dict[str, Any] | None = None,
            lines: Sequence[str] | None = None, digest: bool = True) -> str | None:
    """Write this shard's records of pass `tag` and what its pass counted (`info`: JSON-ready;
    best effort: a reader without the file runs its own pass). `lines[i]`, the i-th record's
    line as the caller writes it (a JSON object GradedRecord.from_dict reads back: the gate
    passes results.jsonl's, which its hand-over then sends as they are); else its dict's JSON.

    Returns the SHA-256 of the file's bytes (None when it could not be written; "" when not
    `digest`): a process that read this file (`Shard.sha256`) read exactly these records, which
    the writer can tell from that digest alone (plugin/speed/shared_verdicts.py)."""
    header = {"format": FORMAT, "tag": tag, "index": index, "count": count, "items": items_digest(item_ids),
              "records": len(records), "info": info or {}}
    if lines is None:
        lines = [json.dumps(r.to_dict(), ensure_ascii=False) for r in records]
    data = "".join([json.dumps(header) + "\n", *(line + "\n" for line in lines)]).encode("utf-8")
    path = _path(directory, tag, index)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return None
    return hashlib.sha256(data).hexdigest() if digest else ""


def withdraw(directory: Path, tag: str, index: int) -> None:
    """Say that this process will not publish pass `tag` of its shard (its pass stopped, or it
    reads the store itself): the others stop waiting for its file at once."""
    with contextlib.suppress(OSError):
        _withdrawn_path(directory, tag, index).touch()


def _withdrawn_path(directory: Path, tag: str, index: int) -> Path:
    return directory / f"{tag}-{index}.withdrawn"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # not ours to signal: it exists
        return True
    return True


def writer_gone(directory: Path, tag: str, index: int) -> bool:
    """Whether the process of shard `index`'s pass `tag` died or withdrew: nothing more will come from it."""
    return _writer_died(directory, tag, index) or _withdrawn_path(directory, tag, index).exists()


def _writer_died(directory: Path, tag: str, index: int) -> bool:
    try:
        pid = int(_pid_path(directory, tag, index).read_text(encoding="ascii"))
    except (OSError, ValueError):
        return False  # not started yet (or cannot tell): wait
    return not _alive(pid)


def read_shard(path: Path, tag: str, index: int, count: int, item_ids: Sequence[str],
               digest: bool = False) -> Shard | None:
    """A shard's file if it is exactly that shard's for pass `tag`, else None; `digest`: with
    the SHA-256 of its bytes (`Shard.sha256`, else empty)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        first, _, rest = data.partition(b"\n")
        header = json.loads(first)
        if not _header_of(header, tag, index, count, item_ids):
            return None
        # Split at "\n" only: a line's JSON (ensure_ascii off) may hold U+2028 and the like,
        # at which str.splitlines would also cut.
        body = rest.decode("utf-8")
        lines = body.split("\n")[:-1] if body.endswith("\n") else body.split("\n") if body else []
        records = [GradedRecord.from_dict(json.loads(line)) for line in lines]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if len(records) != header.get("records"):
        return None
    own = set(item_ids)
    if any(r.item_id not in own for r in records):
        return None
    info = header.get("info")
    return Shard(records, dict(info) if isinstance(info, dict) else {}, lines,
                 hashlib.sha256(data).hexdigest() if digest else "")


def _header_of(header: object, tag: str, index: int, count: int, item_ids: Sequence[str]) -> bool:
    """Whether a file's header line is that of shard `index` of `count` for pass `tag` over these items."""
    wanted = {"format": FORMAT, "tag": tag, "index": index, "count": count, "items": items_digest(item_ids)}
    return isinstance(header, dict) and all(header.get(k) == v for k, v in wanted.items())


def read_others(directory: Path, tag: str, index: int, count: int,
                shards: Sequence[Sequence[str]]) -> dict[int, Shard] | None:
    """`gather` without waiting: the other shards' records of pass `tag` as their files are
    now, or None when one is missing or not that shard's."""
    found: dict[int, Shard] = {}
    for j in range(count):
        if j != index:
            shard = read_shard(_path(directory, tag, j), tag, j, count, shards[j])
            if shard is None:
                return None
            found[j] = shard
    return found


def read_infos(directory: Path, tag: str, index: int, count: int,
               shards: Sequence[Sequence[str]]) -> list[dict[str, Any]] | None:
    """What the other shards' passes counted (`publish`'s `info`), in shard order, from their files'
    first lines alone; None when a file is missing or its header is not that shard's."""
    infos: list[dict[str, Any]] = []
    for j in range(count):
        if j == index:
            continue
        try:
            with open(_path(directory, tag, j), "rb") as fh:
                header = json.loads(fh.readline())
        except (OSError, ValueError):
            return None
        if not _header_of(header, tag, j, count, shards[j]):
            return None
        info = header.get("info")
        infos.append(dict(info) if isinstance(info, dict) else {})
    return infos


async def gather(directory: Path, tag: str, index: int, count: int, shards: Sequence[Sequence[str]],
                 wait_s: float, clock: Callable[[], float] = time.monotonic,
                 digest: bool = False) -> dict[int, Shard] | None:
    """The other shards' records of pass `tag` ({shard index: records}), waiting up to
    `wait_s` for their files; None as soon as one cannot be had (its writer died, the
    wait ran out, the file is not that shard's). `shards[j]` are shard j's item ids;
    `digest`: each with its file's SHA-256 (`read_shard`)."""
    deadline = clock() + wait_s
    found: dict[int, Shard] = {}
    pending = [j for j in range(count) if j != index]
    while pending:
        for j in list(pending):
            path = _path(directory, tag, j)
            if path.exists():
                shard = read_shard(path, tag, j, count, shards[j], digest)
                if shard is None:
                    return None
                found[j] = shard
                pending.remove(j)
            elif writer_gone(directory, tag, j):
                return None
        if pending:
            if clock() >= deadline:
                return None
            await asyncio.sleep(POLL_S)
    return found


def in_plan_order(records: Sequence[GradedRecord], item_ids: Sequence[str], variant_order: dict[str, int]) -> list[GradedRecord] | None:
    """`records` in the order a pass over the whole part gives them (run/plan.py: variant
    by variant, items in cube order, rotations in order), or None if one is duplicated or
    of a variant or item the part does not have."""
    position = {item_id: i for i, item_id in enumerate(item_ids)}
    keyed: dict[tuple[int, int, int], GradedRecord] = {}
    for r in records:
        v, i = variant_order.get(r.variant), position.get(r.item_id)
        if v is None or i is None:
            return None
        key = (v, i, r.rotation)
        if key in keyed:
            return None
        keyed[key] = r
    return [keyed[k] for k in sorted(keyed)]


def variant_positions(variants: Sequence[Any]) -> dict[str, int]:
    """Each record's variant name -> its variant's place in the run (run/variants.Variant.instances)."""
    order: dict[str, int] = {}
    for v_index, variant in enumerate(variants):
        for name, _ in variant.instances(1):
            order.setdefault(name, v_index)
    return order
