"""results.jsonl and metrics_summary.json made by a second process while the gate decides
(docs/speed.md, "Twelfth pass").

After a large run's last answer one thread does everything: the verdicts, the cases, then
the run directory, whose metrics_summary.json document, results.jsonl and records digest
took 0.15-0.17 s of it at the paper's scale. A thread beside it would hold the
interpreter's lock as long, and a child forked there pays a copy of every page either
process then writes (docs/speed.md, seventh pass: slower than one process). So a child is
started while the answers come in, on the run's first graded batch (`start`), with an
interpreter of its own:

- it reads results.jsonl's lines as the run spools them (rundir/files.ResultRows: the very
  file, inherited, read by position), each into its record and metrics_summary.json's
  sums, on another core while the requests are out;
- once the run's records are final, the parent asks (`request`): the offset of each
  record's line in the spool, in the records' order, the variants, prevalence and deferral
  cost, and three hidden files it made beside the run directory to come (on its file system;
  made ahead, `stage`, while the gate's process waits for its evidence child);
- the child checks that the offsets are every line it read, each once, writes results.jsonl
  (the spool's own bytes, in that order) and metrics_summary.json (encoded by
  rundir/files.summary_text, as the run directory's writer encodes it) into two of those files, made durable (fsync), and
  answers with their SHA-256 and run.json's records digest (`take`); the run directory's
  writer renames them into place.

Nothing rests on it. The records are the lines the parent wrote from its own records, read
back as every reader of results.jsonl reads them (GradedRecord.from_dict), and what is made
is used only for the very records and arguments asked about (rundir/files.GradedAhead). A
child that could not start, died, failed, was asked about records whose lines it did not
read, or has not answered within WAIT_S: the parent writes the files itself, as before. The
parent removes the files it made and did not rename (`close`, also at its exit); the child
ends when its standard input, the parent's pipe, closes, so a parent killed takes it along,
and it removes them then.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import gc
import hashlib
import json
import mmap
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Below this many planned asks the child's interpreter and imports (about 0.3 s of CPU, on the
# other core) cost more than it takes off the end (about 4.5 us a record).
MIN_RECORDS = 10_000
POLL_S = 0.05  # how often the child looks for new lines while the answers come in
WAIT_S = 10.0  # how long the parent waits for an answer it asked for before it writes the files itself
ORDER, RESULTS, SUMMARY = ".medrcube-order.", ".results.jsonl.", ".metrics_summary.json."


@dataclass(frozen=True)
class Made:
    """What the child wrote for one request: each file's temporary path and SHA-256."""

    results: tuple[str, str]
    summary: tuple[str, str]
    records_digest: str


class Mirror:
    """A started child (`start`): `request` once, then `take` what it made; `close` ends it."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self._paths: dict[str, str] = {}  # the request's files, named here: removed by `close` unless renamed
        self._staged: tuple[Any, Path] | None = None  # (the offsets, the directory) the files were made for ahead
        self._asked = False
        self._reply = _Reader(process.stdout.fileno()) if process.stdout is not None else None
        self._taken = False
        self.made: Made | None = None  # what `take` returned

    @classmethod
    def start(cls, spool: int) -> Mirror | None:
        """A child reading the spool file open as descriptor `spool`; None where none can start."""
        if getattr(sys, "frozen", False):  # a frozen application's executable is not a Python running `-c`
            return None
        from medrcube.cube.decode_workers import cores

        if cores() < 2:  # on the process's one core the child's reading and writing would only take turns with it
            return None
        # As cube/audit_child.py: medrcube's own directory appended for a parent that found it through sys.path.
        package_root = str(Path(__file__).resolve().parents[2])
        code = ("import sys; sys.path.append(sys.argv[1]); from medrcube.rundir.mirror import main; "
                "raise SystemExit(main(sys.argv[2:]))")
        try:
            process = subprocess.Popen([sys.executable, "-c", code, package_root, str(spool)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       pass_fds=(spool,))
        except OSError:
            return None
        mirror = cls(process)
        # A run that ends before its run directory is written (Ctrl-C, an error) leaves nothing either.
        atexit.register(mirror.close)
        return mirror

    def stage(self, offsets: array.array[int], directory: Path) -> bool:
        """The request's files made ahead, where the process has time to spare (the order of `offsets`
        written, the two files the child fills created): a `request` of these very offsets into this
        directory then sends the ask alone (a few milliseconds of file creation and writing taken off it).
        Whether they were made (else `request` makes them)."""
        if self._asked or self._paths or self.process.poll() is not None:
            return False
        try:
            self._make_files(offsets, directory)
        except OSError:
            self._remove_files()
            return False
        self._staged = (offsets, directory)
        return True

    def _make_files(self, offsets: array.array[int], directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name, prefix in (("order", ORDER), ("results", RESULTS), ("summary", SUMMARY)):
            fd, self._paths[name] = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
            # The order in a file, not through the pipe: 8 bytes a record would fill the pipe
            # and hold this thread until the child reads.
            with os.fdopen(fd, "wb") as fh:
                if name == "order":
                    offsets.tofile(fh)

    def _remove_files(self) -> None:
        paths, self._paths, self._staged = self._paths, {}, None
        for path in paths.values():
            with contextlib.suppress(OSError):
                os.unlink(path)  # a file renamed into a run directory is no longer here

    def request(self, offsets: array.array[int], end: int, directory: Path, variants: Any,
                prevalence: Any, costs: Any) -> bool:
        """Ask for the files of the records whose lines start at `offsets` (in that order) in the
        spool's first `end` bytes; False if the child cannot be asked (then nothing was)."""
        if self._asked or self.process.stdin is None or self.process.poll() is not None:
            return False
        staged = self._staged
        try:
            if staged is None or staged[0] is not offsets or staged[1] != directory:
                self._remove_files()  # made ahead for other records or another directory: made again
                self._make_files(offsets, directory)
            self._staged = None
            ask = {"end": end, "count": len(offsets), **self._paths,
                   "variants": list(variants) if variants is not None else None, "prevalence": prevalence,
                   "costs": {"error": costs.error, "deferral": costs.deferral} if costs is not None else None}
            self.process.stdin.write(json.dumps(ask).encode("utf-8") + b"\n")
            self.process.stdin.flush()
        except (OSError, ValueError, TypeError):
            self.close()
            return False
        self._asked = True
        return True

    def take(self, wait_s: float = WAIT_S) -> Made | None:
        """The files made for the request, once; None if it failed or took longer than `wait_s`."""
        if not self._paths or self._taken or self._reply is None:
            return None
        self._taken = True
        try:
            reply = json.loads(self._reply.line(time.monotonic() + wait_s) or b"{}")
            self.made = Made((self._paths["results"], str(reply["results"])), (self._paths["summary"],
                             str(reply["summary"])), str(reply["records_digest"]))
        except (OSError, ValueError, KeyError, TypeError, TimeoutError):
            return None
        return self.made

    def close(self) -> None:
        """End the child; the request's files not renamed elsewhere are removed (again: nothing)."""
        atexit.unregister(self.close)
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        if self.process.poll() is None:
            self.process.kill()
            if self._asked and self.made is None:
                self.process.wait()  # it may be writing the files removed below
            else:
                # It writes nothing more (never asked, or it has answered): waited for by a thread. Its exit
                # lets go of every record it read first (about 12 ms at the paper's scale), which the session's
                # end waited for.
                threading.Thread(target=self.process.wait, name="medrcube-mirror-reaper", daemon=True).start()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._remove_files()


class _Reader:
    """The child's answer read from its pipe's descriptor itself, with a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.held = bytearray()

    def _more(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.fd], [], [], left)[0]:
            raise TimeoutError("the child did not answer in time")
        data = os.read(self.fd, 1 << 16)
        if not data:
            raise OSError("the child ended without answering")
        self.held += data

    def line(self, deadline: float) -> bytes:
        while (at := self.held.find(b"\n")) < 0:
            self._more(deadline)
        out = bytes(self.held[:at])
        del self.held[:at + 1]
        return out


# -- the child --------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """The child: the spool at descriptor argv[0] read as it grows until the parent asks."""
    from medrcube.rundir.summary import SummaryTally

    # A Ctrl-C reaches the whole process group: this child ends with its parent's pipe instead, and
    # removes its files then.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    spool = int(argv[0])
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    _warm()
    lines: dict[int, tuple[Any, int]] = {}  # offset in the spool -> (the record of the line there, its length)
    tally = SummaryTally()
    # Each line's row of run.json's records_digest, made as it is read: at the end only their sort and hash
    # are left (the digest of the records asked about, once they are found to be every line, each once).
    identities: list[str] = []
    read = 0
    while not select.select([stdin], [], [], POLL_S)[0]:
        read = _read_lines(spool, read, os.fstat(spool).st_size, lines, tally, identities)
    header = stdin.readline()
    if not header:
        return 0  # the parent ended, or closed without asking
    ask = json.loads(header)
    gc.disable()  # what is made from here on lives until the answers are sent (the gate's verdicts pause it too)
    with contextlib.suppress(OSError):  # a parent gone (its pipe closed): only the clean-up below is left
        try:
            reply = _make(spool, read, ask, lines, tally, identities)
        except Exception as e:  # noqa: BLE001 - said to the parent, who writes the files itself
            reply = {"error": f"{type(e).__name__}: {e}"}
        stdout.write(json.dumps(reply).encode("utf-8") + b"\n")
        stdout.flush()
        stdin.read()  # until the parent is done (or gone): what it did not rename is removed, as it would
    for name in ("order", "results", "summary"):
        with contextlib.suppress(OSError, KeyError):
            os.unlink(ask[name])
    return 0


def _read_lines(spool: int, start: int, end: int, lines: dict[int, tuple[Any, int]], tally: Any,
                identities: list[str]) -> int:
    """The whole lines of the spool between `start` and `end` into records (and their records_digest rows);
    the offset after them."""
    from medrcube.records import GradedRecord
    from medrcube.rundir.files import record_identity

    if end <= start:
        return start
    data = os.pread(spool, end - start, start)
    whole = data.rfind(b"\n") + 1  # a line still being written is read next time
    batch = []
    at = start
    for line in data[:whole].split(b"\n")[:-1]:
        record = GradedRecord.from_dict(json.loads(line))
        lines[at] = (record, len(line) + 1)
        identities.append(record_identity(record))
        batch.append(record)
        at += len(line) + 1
    tally.add(batch)
    # The records live until the end: out of the collector's sight, as the gate's heap is once its
    # answers are in (plugin/speed/frozen_heap.py); left in it, every full collection walked them all.
    gc.freeze()
    return start + whole


def _make(spool: int, read: int, ask: dict[str, Any], lines: dict[int, tuple[Any, int]], tally: Any,
          identities: list[str]) -> dict[str, Any]:
    """The two files asked for; what the parent is answered."""
    from medrcube.metrics.selective import DeferralCosts
    from medrcube.rundir.files import digest_of_identities, summary_text

    end = int(ask["end"])
    read = _read_lines(spool, read, end, lines, tally, identities)
    offsets: array.array[int] = array.array("q")
    offsets.frombytes(Path(ask["order"]).read_bytes())
    if read != end or len(offsets) != int(ask["count"]):
        raise ValueError(f"read {read} of {end} bytes and {len(offsets)} offsets of {ask['count']}")
    # The sums counted every line read, each once (and a records_digest row was made of each): they are
    # the sums of the records asked about only when those are every line, each once.
    if len(offsets) != len(lines) or len(set(offsets)) != len(offsets):
        raise ValueError(f"asked about {len(offsets)} records; {len(lines)} lines were read")
    records = [lines[o][0] for o in offsets]
    costs = DeferralCosts(**ask["costs"]) if ask.get("costs") else None
    doc = tally.document(records, ask.get("variants"), prevalence=ask.get("prevalence"), costs=costs)
    summary = _durable(ask["summary"], [summary_text(doc).encode("utf-8")])
    with mmap.mmap(spool, end, access=mmap.ACCESS_READ) as view:
        # The spool's own bytes of each line, newline included, a few thousand lines a write.
        chunks = (b"".join(view[o:o + lines[o][1]] for o in offsets[i:i + 2048]) for i in range(0, len(offsets), 2048))
        results = _durable(ask["results"], chunks)
    # records_digest(records), from the rows made as the lines were read (sorted: the order is not in it).
    return {"results": results, "summary": summary, "records_digest": digest_of_identities(identities)}


def _warm() -> None:
    """What the summary and the digest import, imported while the answers come in."""
    import medrcube.metrics.selective  # noqa: F401
    import medrcube.rundir.files  # noqa: F401


def _durable(path: str, blocks: Any) -> str:
    """`blocks` written to `path` (the parent made it, empty), fsynced; their SHA-256."""
    digest = hashlib.sha256()
    with open(path, "wb") as fh:
        for block in blocks:
            digest.update(block)
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
    return digest.hexdigest()
