"""A run directory: results.jsonl, metrics_summary.json and run.json, written atomically.

metrics_summary.json's numbers are rundir/summary.py's; results.jsonl's lines and those
numbers can be made as the run grades its records (`GradedAhead`), not all after the
last answer.
"""

from __future__ import annotations

import array
import contextlib
import dataclasses
import functools
import hashlib
import json
import mmap
import os
import platform
import re
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from medrcube.metrics.selective import DeferralCosts
from medrcube.records import GradedRecord, outcome_pairs
from medrcube.run.runner import Delivery, RunResult
from medrcube.rundir.documents import RUN_SCHEMA_VERSION, RunDocument
from medrcube.rundir.jsontext import indented
from medrcube.rundir.reading import RESULTS_SCHEMA_VERSION
from medrcube.rundir.summary import SummaryTally, metrics_summary

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

# -- results -----------------------------------------------------------------------------


def result_row(r: GradedRecord) -> dict[str, Any]:
    """One line of results.jsonl: the GradedRecord fields (GradedRecord.from_dict reads it
    back) plus the reference-style `id` and the letters, for people reading the file."""
    row = r.to_dict()
    row["schema_version"] = RESULTS_SCHEMA_VERSION  # on every line: each line stands alone
    row["id"] = r.item_id
    row["extracted_letter"] = LETTERS[r.extracted] if r.extracted is not None else None
    row["answer_letter"] = LETTERS[r.answer]
    return row


def result_line(r: GradedRecord) -> str:
    """One line of results.jsonl, without its newline."""
    return json.dumps(result_row(r), ensure_ascii=False, sort_keys=True)


class ResultRows:
    """results.jsonl's lines made while the requests are out, as each batch of records is
    graded (`add`: run/runner.py RunOptions.on_graded), not all after the last answer (at
    paper scale 32,606 lines, about 0.4 s of the tail). The lines wait in an unnamed
    temporary file, not in memory (held as strings they added about 50 MiB to the peak
    RSS at that scale). A line made early is used only for the very record it was made
    from (`line`: records are frozen); any other record, a judge's reading or a record
    read back from a worker, is written from itself. `close` drops the file."""

    def __init__(self) -> None:
        self._spool: Any = None
        self._end = 0
        self._where: dict[int, tuple[GradedRecord, int, int]] = {}  # by id: the record (held), offset, length
        self._adds = 0
        self._identities: list[str] = []  # records_digest's lines of the records fed
        # Each line's record's id and the line's offset, in the order fed (`offsets_by_delivery`).
        self._fed_ids: array.array[int] = array.array("q")
        self._fed_offsets: array.array[int] = array.array("q")

    def add(self, records: Iterable[GradedRecord], lines: Sequence[str | None] | None = None) -> None:
        """The records' lines, made here; or `lines[i]` for the i-th record where given: its
        line as another process made it (the record read from it: plugin/handover.py)."""
        made = [(r, f"{result_line(r)}\n".encode()) for r in records] if lines is None else \
            [(r, f"{result_line(r) if line is None else line}\n".encode()) for r, line in zip(records, lines, strict=True)]
        if not made:
            return
        if self._spool is None:
            self._spool = tempfile.TemporaryFile(prefix="medrcube-results-")
        for r, data in made:
            self._where[id(r)] = (r, self._end, len(data))  # the line with its newline
            self._fed_ids.append(id(r))
            self._fed_offsets.append(self._end)
            self._end += len(data)
        self._adds += len(made)
        self._identities.extend(record_identity(r) for r, _ in made)
        self._spool.write(b"".join(data for _, data in made))
        self._spool.flush()  # in the file, for the reads by position

    def line(self, r: GradedRecord) -> str:
        """results.jsonl's line of `r`, without its newline."""
        made = self._where.get(id(r))
        if made is None or made[0] is not r or self._spool is None:
            return result_line(r)
        return os.pread(self._spool.fileno(), made[2], made[1]).decode("utf-8")[:-1]

    def write(self, fh: Any, records: Sequence[GradedRecord]) -> None:
        """results.jsonl's lines of `records`, in their order, into the text file `fh`: the
        bytes made early are copied as they are (not decoded and encoded again), read
        through a map of the spool (a slice each, where a read by position is a system
        call each: 0.13 -> 0.06 s at paper scale); a record not fed is written from itself."""
        fh.flush()
        out, where = fh.buffer, self._where
        spool = mmap.mmap(self._spool.fileno(), self._end, access=mmap.ACCESS_READ) \
            if self._spool is not None and self._end else None
        with spool if spool is not None else contextlib.nullcontext():
            for start in range(0, len(records), 2048):  # a few writes, never the whole file at once
                lines = []
                for r in records[start:start + 2048]:
                    made = where.get(id(r))
                    if spool is None or made is None or made[0] is not r:
                        lines.append(f"{result_line(r)}\n".encode())
                    else:
                        lines.append(spool[made[1]:made[1] + made[2]])
                out.write(b"".join(lines))
                # The pages read leave the process's memory (they stay in the page cache): the
                # spool is never resident whole (its lines are about 26 MiB at paper scale).
                if spool is not None and hasattr(mmap, "MADV_DONTNEED"):
                    spool.madvise(mmap.MADV_DONTNEED)
        out.flush()

    def spool_fileno(self) -> int:
        """The descriptor of the file the lines wait in (made now if no line was added yet): a
        reader beside this process reads each line by its offset (rundir/mirror.py)."""
        if self._spool is None:
            self._spool = tempfile.TemporaryFile(prefix="medrcube-results-")
        return int(self._spool.fileno())

    @property
    def end(self) -> int:
        """The size of the lines added so far, in bytes."""
        return self._end

    def offsets(self, records: Sequence[GradedRecord]) -> array.array[int] | None:
        """Where each record's line starts in the spool, in the records' order; None if one of them
        was not fed. A record fed twice is found at its last line only (`made_from` says whether the
        records are all the lines, each once; rundir/mirror.py's child checks it by counting them)."""
        where = self._where
        out = array.array("q")
        for r in records:
            made = where.get(id(r))
            if made is None or made[0] is not r:
                return None
            out.append(made[1])
        return out

    def offsets_by_delivery(self, delivery: Delivery) -> array.array[int] | None:
        """`offsets` of records given by their places among the records fed (run/runner.RunResult.delivery),
        where the records fed were the delivery's, in the same order: each line is then found by its
        place, with no lookup by identity (`offsets` of 36,478 records took 26-29 ms after the last
        answer). None otherwise (then `offsets`). The same ids in the same order are the same records:
        the index holds every record fed, so no other object can have one of their ids while it lives."""
        if delivery.ids != self._fed_ids:
            return None
        try:
            return array.array("q", map(self._fed_offsets.__getitem__, delivery.places()))
        except IndexError:
            return None

    def made_from(self, records: Sequence[GradedRecord]) -> bool:
        """Whether the lines were made from exactly `records`: the same objects, each once.
        By identity alone: the index holds every record fed, so while it lives no other
        object can have one of their ids, and the same ids, as many as the records, are the
        same records, each once."""
        where = self._where
        return self._adds == len(where) == len(records) and where.keys() == {id(r) for r in records}

    def records_digest(self) -> str:
        """records_digest of the records fed (the caller checks they are the run's: `made_from`)."""
        return digest_of_identities(self._identities)

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None
        self._where.clear()
        self._identities.clear()
        self._fed_ids = array.array("q")
        self._fed_offsets = array.array("q")


class GradedAhead:
    """What the run directory takes from the candidate's records, made as each batch is
    graded (`add`: run/runner.py RunOptions.on_graded) while the requests are out:
    results.jsonl's lines and run.json's records_digest lines (`rows`) and
    metrics_summary.json's sums (`tally`). Each is used only for the very records it was
    made from (`write_run_dir`): a line checks its own record; the sums and the digest, the
    lines' index of every record fed (`ResultRows.made_from`, as `summary`). `close` drops
    the lines' file."""

    def __init__(self) -> None:
        self.rows = ResultRows()
        self.tally = SummaryTally()
        # A child reading the lines as they come, which writes results.jsonl and metrics_summary.json
        # when asked (rundir/mirror.Mirror: `mirror_to`).
        self._mirror: Any = None
        self._mirror_asked: tuple[tuple[int, ...], tuple[Any, ...]] | None = None  # (records, arguments) asked about
        # `prepare_ask`'s lines' offsets, for one list of records and the spool as it then ended.
        self._ask_ready: tuple[tuple[int, ...], int, array.array[int] | None] | None = None
        # What `prepare` and `prewrite` made, each for one list of records: the ids of its records in
        # order (held by `rows` while it lives, so no other object has them: see `made_from`).
        self._prepared: tuple[tuple[int, ...], tuple[Any, ...], dict[str, Any]] | None = None
        self._written: tuple[tuple[int, ...], str, str] | None = None  # (records, temporary file, SHA-256)

    def add(self, records: Sequence[GradedRecord]) -> None:
        self.rows.add(records)
        self.tally.add(records)

    def mirror_to(self, mirror: Any) -> None:
        """Hand the lines to `mirror` (rundir/mirror.Mirror, started on `rows.spool_fileno()`; None: none
        could start) before the first batch is added: `ask_mirror` then asks it."""
        self._mirror = mirror

    def ask_mirror(self, records: Sequence[GradedRecord], directory: Path, variants: Sequence[str] | None = None, *,
                   prevalence: Mapping[str, Any] | None = None, costs: DeferralCosts | None = None,
                   delivery: Delivery | None = None) -> bool:
        """Ask the child for results.jsonl and metrics_summary.json of these very records, in this
        order, with these arguments, written into `directory` (on the run directory's file system):
        made on another core while this process decides (`place_mirrored` takes them). Whether it was
        asked. The child checks that the records are every line it read, each once (their offsets).
        `delivery`: the records' places among the records fed and the ids of those (the runner's
        RunResult.delivery), by which their lines are found (`_offsets`)."""
        mirror = self._mirror
        if mirror is None or self._mirror_asked is not None:
            return False
        order, ready, self._ask_ready = _order(records), self._ask_ready, None
        # The offsets `prepare_ask` found, if for these very records (the same objects in the same order:
        # the lines' index holds them) and the spool as it still ends; else found now.
        offsets = ready[2] if ready is not None and ready[:2] == (order, self.rows.end) else \
            self._offsets(records, delivery)
        if offsets is None or not mirror.request(offsets, self.rows.end, directory, variants, prevalence, costs):
            return False
        self._mirror_asked = (order, _summary_key(variants, prevalence, costs))
        return True

    def prepare_ask(self, records: Sequence[GradedRecord], directory: Path,
                    delivery: Delivery | None = None) -> None:
        """Find the lines' offsets of these records now, and make the child's files in `directory`, where
        the process has time to spare (while the evidence child collects its share:
        plugin/speed/forked_evidence.py), for `ask_mirror` of the very same records into the same
        directory: the 36,478 lookups of a paper-scale run took 26-29 ms of the time before its first
        case (by `delivery`, as `ask_mirror`'s, a few), and the files a few more."""
        mirror = self._mirror
        if mirror is not None and self._mirror_asked is None:
            offsets = self._offsets(records, delivery)
            self._ask_ready = (_order(records), self.rows.end, offsets)
            if offsets is not None:
                mirror.stage(offsets, directory)

    def _offsets(self, records: Sequence[GradedRecord],
                 delivery: Delivery | None) -> array.array[int] | None:
        """The records' lines' offsets: by their places among the records fed where `delivery` gives them
        for as many records as these, else looked up by identity (ResultRows.offsets)."""
        if delivery is not None and delivery.size == len(records):
            found = self.rows.offsets_by_delivery(delivery)
            if found is not None:
                return found
        return self.rows.offsets(records)

    def place_mirrored(self, records: Sequence[GradedRecord], run_dir: Path, variants: Sequence[str] | None = None, *,
                       prevalence: Mapping[str, Any] | None = None, costs: DeferralCosts | None = None,
                       landing: Landing | None = None) -> str | None:
        """Rename the child's results.jsonl and metrics_summary.json into `run_dir` if they were made
        for these very records in this order with these arguments; their records_digest, or None and
        nothing placed (the caller writes both files itself)."""
        # The same objects in the same order as asked about (the lines' index holds them: no other
        # object can have their ids meanwhile), and the same arguments.
        asked, mirror = self._mirror_asked, self._mirror
        if asked is None or mirror is None or asked != (_order(records), _summary_key(variants, prevalence, costs)):
            return None
        made = mirror.take()
        if made is None:
            return None
        placed = []
        try:
            for (tmp, digest), name in ((made.results, "results.jsonl"), (made.summary, "metrics_summary.json")):
                os.replace(tmp, run_dir / name)
                placed.append((run_dir / name, digest))
        except OSError:
            return None  # the caller writes both files (over one placed here: the same bytes)
        if landing is not None:  # the seal takes their digests as for files the landing put in place
            for path, digest in placed:
                landing.landed[path] = Landed(digest, file_identity(path))
        return str(made.records_digest)

    def summary(self, records: Sequence[GradedRecord], variants: Sequence[str] | None = None, *,
                prevalence: Mapping[str, Any] | None = None,
                costs: DeferralCosts | None = None) -> dict[str, Any] | None:
        """metrics_summary.json from the sums, if they were made from exactly `records` (the
        same objects, each once: records are frozen, so a record replaced after grading, as
        a judge's reading replaces one, is another object); otherwise None. The document
        `prepare`d for the very same list and arguments is that document, made earlier."""
        if not self.rows.made_from(records):
            return None
        made = self._prepared
        if made is not None and made[1] == _summary_key(variants, prevalence, costs) and made[0] == _order(records):
            return made[2]
        return self.tally.document(records, variants, prevalence=prevalence, costs=costs)

    def prepare(self, records: Sequence[GradedRecord], variants: Sequence[str] | None = None, *,
                prevalence: Mapping[str, Any] | None = None, costs: DeferralCosts | None = None) -> None:
        """Make `summary`'s document now, where there is time to spare (the xdist controller
        while its workers decide: plugin/speed/shard_preread.py), for these very records in
        this order (records are frozen) and these arguments only."""
        doc = self.summary(records, variants, prevalence=prevalence, costs=costs)
        if doc is not None:
            self._prepared = (_order(records), _summary_key(variants, prevalence, costs), doc)

    def prewrite(self, records: Sequence[GradedRecord], directory: Path) -> None:
        """Write results.jsonl of this list of records now, where there is time to spare (the
        xdist controller while its workers decide), into a hidden temporary file of `directory`,
        made durable (fsync) and its SHA-256 read back: `place_results` then renames it into a
        run directory of the same file system. Dropped by `close` when not placed."""
        if not self.rows.made_from(records):
            return
        fd, tmp = tempfile.mkstemp(prefix=".results.jsonl.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                self.rows.write(fh, records)
                fh.flush()
                os.fsync(fh.fileno())
            self._written = (_order(records), tmp, file_sha256(Path(tmp)))
        except BaseException:
            _discard(tmp)
            raise

    def place_results(self, records: Sequence[GradedRecord], path: Path, landing: Landing | None = None) -> bool:
        """Rename the results.jsonl `prewrite` made to `path` if `records` are the very records it
        was written from, in the same order (records are frozen); False, and nothing done, for any
        other list or a rename that fails (another file system): the caller writes the file itself."""
        written = self._written
        if written is None or not self.rows.made_from(records) or written[0] != _order(records):
            return False
        try:
            os.replace(written[1], path)
        except OSError:
            return False
        self._written = None
        if landing is not None:  # the seal takes its digest as for a file the landing put in place
            landing.landed[path] = Landed(written[2], file_identity(path))
        return True

    def close(self) -> None:
        if self._mirror is not None:
            self._mirror.close()
            self._mirror = None
        self.rows.close()
        if self._written is not None:
            _discard(self._written[1])
            self._written = None


def _order(records: Sequence[GradedRecord]) -> tuple[int, ...]:
    return tuple(map(id, records))


def _summary_key(variants: Sequence[str] | None, prevalence: Mapping[str, Any] | None,
                 costs: DeferralCosts | None) -> tuple[Any, ...]:
    return (tuple(variants) if variants is not None else None, json.dumps(prevalence, sort_keys=True), costs)


def summary_text(doc: Mapping[str, Any]) -> str:
    """metrics_summary.json's text of its document: one encoding wherever the file is written
    (here, and by the run files child, rundir/mirror.py, whose file must be these very bytes)."""
    return indented(doc)


def summary_arguments(site_policy: Mapping[str, Any] | None) -> tuple[Mapping[str, Any] | None, DeferralCosts | None]:
    """metrics_summary.json's prevalence and deferral costs: the site's, when the gate's
    policy states them (plugin/run_meta.site_policy, run.json's meta `site_policy`)."""
    site = dict(site_policy or {})
    costs = DeferralCosts(deferral=float(site["deferral_cost"])) if site.get("deferral_cost") is not None else None
    return site.get("prevalence") or None, costs


def read_results(path: str | os.PathLike[str]) -> list[GradedRecord]:
    """The records of a results.jsonl written by `write_run_dir`, through the one strict
    reader (rundir/reading.py: UTF-8, versions, duplicates)."""
    from medrcube.rundir.reading import read_results as strict

    return strict(path)


def records_digest(records: Sequence[GradedRecord]) -> str:
    """sha256 over the sorted identities of the records (item, variant, rotation, prompt,
    image): run.json keeps it, so that `medrcube report` refuses a results.jsonl that is
    not the one of its run.json (another cube, another run, records added or dropped)."""
    return digest_of_identities(map(record_identity, records))


def record_identity(r: GradedRecord) -> str:
    """A record's line in records_digest."""
    return f"{r.item_id}\t{r.variant}\t{r.rotation}\t{r.prompt_hash}\t{r.image_digest}"


def digest_of_identities(rows: Iterable[str]) -> str:
    """records_digest from its rows (`record_identity` of each record), in any order."""
    return hashlib.sha256("\n".join(sorted(rows)).encode("utf-8")).hexdigest()


# -- run.json ----------------------------------------------------------------------------


@functools.cache
def installed_version(name: str) -> str | None:
    """The installed distribution's version (None if absent), read once per process: each
    read parses the package's metadata (~1 ms), and a gate run states it in three files."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """Versions that matter for reproducing a run. torch only if this process loaded it
    (an API run must not pay for importing it)."""
    out: dict[str, str | None] = {
        "python": platform.python_version(),
        "medrcube": installed_version("medrcube"),
        "openai": installed_version("openai"),
    }
    for name in ("torch", "transformers"):
        mod = sys.modules.get(name)
        if mod is not None:
            out[name] = getattr(mod, "__version__", None)
    return out


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")




def redact_spec(spec: str | None) -> str | None:
    """A model spec fit for a file: credentials written into a URL (http://user:pw@host,
    ?api-key=...) are cut (the one rule: models/urls.py). Keys never reach a spec by
    design (specs with them are refused); this covers the ways one could still get in."""
    from medrcube.models.urls import redact_urls

    return None if spec is None else redact_urls(spec)


def run_document(result: RunResult, meta: Mapping[str, Any] | None = None, *,
                 digest: str | None = None) -> dict[str, Any]:
    """run.json: what ran (model spec, never a key; fingerprints; variants), when, how long,
    with which versions, and the counts. `digest`: the records' records_digest, when known."""
    outcomes: dict[str, int] = defaultdict(int)
    # By the enum, its value read once each; counted as the records were graded when those counts are theirs.
    for (outcome, _), n in outcome_pairs(result.records, result.outcome_pairs).items():
        if n:
            outcomes[outcome.value] += n
    doc: dict[str, Any] = {"schema_version": RUN_SCHEMA_VERSION}
    doc.update(result.info)
    doc.update(dict(meta or {}))
    for field in ("model_spec", "judge_spec"):
        if isinstance(doc.get(field), str):
            doc[field] = redact_spec(doc[field])
    doc["versions"] = versions()
    doc["timings"] = {
        "started": _iso(result.started) if result.started else None,
        "finished": _iso(result.finished) if result.finished else None,
        "wall_s": round(result.wall_s, 3),
    }
    doc["counts"] = {
        "records": len(result.records),
        "asked": result.asked,
        "requests_sent": result.requests_sent,
        "cache_hits": result.cache_hits,
        "errors": result.errors,
        "unavailable": result.unavailable,
        "judge_requests": result.judge_requests,
        "judge_cache_hits": result.judge_cache_hits,
        "outcomes": dict(sorted(outcomes.items())),
    }
    doc["aborted"] = result.aborted
    doc["records_digest"] = digest if digest is not None else records_digest(result.records)
    # The name this run's own answers carry in the response store (their provenance).
    doc["run_token"] = (result.info.get("provenance") or {}).get("run")
    return doc


# -- writing -----------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:60] or "model"


def default_run_id(model_spec: str, now: datetime | None = None) -> str:
    """`<UTC timestamp>-<model slug>`, e.g. 20260101T120000Z-openai-gpt-5.1."""
    now = now or datetime.now(UTC)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{_slug(redact_spec(model_spec) or '')}"


def atomic_write(path: Path, write: Callable[[Any], None], *, landing: Landing | None = None) -> None:
    """Write through a temporary file in the same directory, then rename it into place: a
    reader (or a crash) never sees half a file. Raises OSError (e.g. disk full) with the
    target untouched. With `landing`, the file is written whole now and its fsync and
    rename are the landing's (Landing.wait raises their error)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        fh = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
    except BaseException:
        os.close(fd)
        _discard(tmp)
        raise
    try:
        write(fh)
        fh.flush()
    except BaseException:
        fh.close()
        _discard(tmp)
        raise
    if landing is None:
        _land(fh, tmp, path)
    else:
        landing.add(fh, tmp, path)


def _discard(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _land(fh: Any, tmp: str, path: Path, landed: dict[Path, Landed] | None = None) -> None:
    """fsync, close, rename into place: the file is on disk before it has its name. With
    `landed`, the file's SHA-256 (read back before the rename) and its identity after it
    are kept there under its path."""
    try:
        with fh:
            os.fsync(fh.fileno())
        digest = file_sha256(Path(tmp)) if landed is not None else None
        os.replace(tmp, path)
    except BaseException:
        _discard(tmp)
        raise
    if landed is not None and digest is not None:
        landed[path] = Landed(digest, file_identity(path))


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read a MiB at a time (hashlib lets other threads run
    while it hashes a block)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_identity(path: Path) -> tuple[int, int, int, int, int]:
    """What changes whenever a file's bytes can have: device, inode, size, mtime and ctime
    (ns; a write or a utime sets ctime, which no caller can set back)."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclasses.dataclass(frozen=True, slots=True)
class Landed:
    """A file put in place by a Landing: its SHA-256 and its identity once in place. The
    seal takes the digest for a file whose identity is still this one (rundir/seal.py)."""

    sha256: str
    identity: tuple[int, int, int, int, int]


class Landing:
    """Files written whole, then made durable and renamed into place on one worker thread
    while the caller goes on (fsync waits on the disk and releases the GIL: ~5 ms a file
    here, more on a busy or slow disk, six of them before the gate's exit status;
    docs/speed.md). Each file keeps atomic_write's order (fsync before rename). Used as a
    context manager: leaving it waits for every file, and `wait` raises the first error,
    so a file is read by its name (the seal) only after the block."""

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="medrcube-landing")
        self._pending: list[Any] = []
        # Each file's digest, read back on the landing's thread while the caller encodes the
        # next file: the seal then need not read the run's files again (about 30 MiB at paper
        # scale) on the caller's thread.
        self.landed: dict[Path, Landed] = {}

    def add(self, fh: Any, tmp: str, path: Path) -> None:
        self._pending.append(self._pool.submit(_land, fh, tmp, path, self.landed))

    def call(self, fn: Callable[[], Any]) -> None:
        """Run `fn` on the landing's thread after the files added so far (its error is raised
        by `wait` as theirs are)."""
        self._pending.append(self._pool.submit(fn))

    def wait(self) -> None:
        pending, self._pending = self._pending, []
        self._pool.shutdown(wait=True)
        errors = [e for f in pending if (e := f.exception()) is not None]
        if errors:
            raise errors[0]

    def __enter__(self) -> Landing:
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is None:
            self.wait()
            return
        with contextlib.suppress(Exception):  # the block's own error is the one to see
            self.wait()


def write_run_dir(run_dir: str | os.PathLike[str], result: RunResult, meta: Mapping[str, Any] | None = None,
                  *, landing: Landing | None = None, ahead: GradedAhead | None = None) -> Path:
    """Write results.jsonl, metrics_summary.json and run.json into `run_dir` (created if
    needed) and return it. `meta` adds to run.json (run id, command line, ...); it must
    never hold a secret, and nothing here adds one. With `landing`, the files are in
    place once it is waited for (atomic_write); `ahead`, the lines and the summary's sums
    made as the run graded."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    def results(fh: Any) -> None:
        records = result.records
        if ahead is not None:
            ahead.rows.write(fh, records)
            return
        for start in range(0, len(records), 2048):  # a few writes, never the whole file in one string
            fh.write("".join(f"{result_line(r)}\n" for r in records[start:start + 2048]))

    prevalence, costs = summary_arguments((meta or {}).get("site_policy"))
    variants = result.info.get("variants")
    # Made by the mirror child while this process decided (rundir/mirror.py), for these very records only.
    digest = ahead.place_mirrored(result.records, run_dir, variants, prevalence=prevalence, costs=costs,
                                  landing=landing) if ahead is not None else None
    if digest is None:
        # What was made as the run graded is used only for the very records it was made from (the
        # same objects, each once: a judge's reading is another object); otherwise made afresh.
        summary = ahead.summary(result.records, variants, prevalence=prevalence, costs=costs) if ahead else None
        digest = ahead.rows.records_digest() if ahead is not None and summary is not None else None
        if summary is None:
            summary = metrics_summary(result.records, variants, prevalence=prevalence, costs=costs)
        if ahead is None or not ahead.place_results(result.records, run_dir / "results.jsonl", landing):
            atomic_write(run_dir / "results.jsonl", results, landing=landing)
        atomic_write(run_dir / "metrics_summary.json", lambda fh: fh.write(summary_text(summary)), landing=landing)
    atomic_write(
        run_dir / "run.json",
        # Through RunDocument: checked against the shipped schema before it is written.
        lambda fh: fh.write(indented(
            RunDocument.from_mapping(run_document(result, meta, digest=digest)).to_json(where=str(run_dir / "run.json")))),
        landing=landing,
    )
    return run_dir
