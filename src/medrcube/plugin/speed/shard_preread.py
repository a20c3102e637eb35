"""The xdist controller reads the workers' shard files while the workers decide
(docs/speed.md, "Tenth pass").

Under pytest-xdist the workers hand each other their shards' records through files
(run/shard_exchange.py); each then decides every check and runs its cases, and hands the
controller results.jsonl's lines of the whole run. The controller, idle meanwhile, read
those lines back into records and summed them for metrics_summary.json only after the last
worker was done: about 0.8 s of CPU at paper scale on the end of the run. Here a thread of
the controller reads the same files as soon as every shard's is there, into the records in
plan order, their lines and the summary's sums (rundir/files.GradedAhead), makes
metrics_summary.json's document from them and writes results.jsonl beside the run directory
to come, to be renamed into it.

It decides nothing and changes nothing written: `merged_run` (plugin/handover.py) takes what
was read only when the SHA-256 of the lines a worker handed over equals that of the lines
read here, so the records are the very ones the workers decided on; otherwise (a worker read
the store instead, a pass over part of the cube, a sequential run's several passes, a file
missing) it reads the hand-over as before. Once the read is held, its digest is put in the
exchange directory (`publish_read`): a worker whose lines have that digest hands over the
digest instead of its lines (plugin/handover.records_out).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from medrcube.plugin.handover import Preread, publish_no_read, publish_read

FIRST_PASS = "candidate-0"  # the one pass of the candidate over the cube in a run that is not sequential
POLL_S = 0.02


class ShardPreread:
    """Reads pass FIRST_PASS's shard files of `count` workers in `directory` on a thread (`start`);
    `take` ends the wait and returns what was read, or None."""

    def __init__(self, directory: Path, count: int, cube: Any, variants: Sequence[Any],
                 site_policy: Callable[[], Mapping[str, Any]] | None = None, report_dir: Path | None = None) -> None:
        self.directory, self.count, self.cube, self.variants = directory, count, cube, tuple(variants)
        self.site_policy = site_policy  # the policy's prevalence and deferral cost: metrics_summary.json is made here too
        self.report_dir = report_dir  # where the run directory will be: results.jsonl is written there ahead
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._read: Preread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="medrcube-shard-preread", daemon=True)
        self._thread.start()

    def take(self) -> Preread | None:
        """What was read (waiting for a read under way); None if nothing was, and nothing will be."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        read, self._read = self._read, None
        return read

    def _run(self) -> None:
        try:
            self._read = self._read_when_there()
        except Exception:  # noqa: BLE001 - an optimisation: the hand-over is read as before
            self._read = None
        read = self._read
        if read is None:  # said, so that a worker holding its own shard only does not wait for it
            publish_no_read(self.directory)
            return
        # Held from here until `take`: a worker whose lines have this digest hands over the digest alone
        # (said first, before the work below, so that it is said before the workers hand over).
        with contextlib.suppress(OSError):  # unsaid, the workers hand over their lines as before
            publish_read(self.directory, read.digest)
        records, ahead = read.records, read.ahead
        if self.site_policy is not None:  # used by write_run only for these very records and the same arguments
            with contextlib.suppress(Exception):  # an optimisation: write_run makes the document itself
                from medrcube.run.plan import as_variants, variant_specs
                from medrcube.rundir.files import summary_arguments

                prevalence, costs = summary_arguments(self.site_policy())
                ahead.prepare(records, variant_specs(as_variants(self.variants)), prevalence=prevalence, costs=costs)
        if self.report_dir is not None:  # renamed into the run directory by write_run for these very records only
            with contextlib.suppress(OSError):  # an optimisation: write_run writes the file itself
                self.report_dir.mkdir(parents=True, exist_ok=True)
                ahead.prewrite(records, self.report_dir)

    def _read_when_there(self) -> Preread | None:
        from medrcube.run import shard_exchange
        from medrcube.run.plan import as_variants
        from medrcube.rundir.files import GradedAhead
        from medrcube.service import stable_shard

        count, directory = self.count, self.directory
        paths = [directory / f"{FIRST_PASS}-{j}.jsonl" for j in range(count)]
        ids = [it.id for it in self.cube.items]
        shards: list[list[str]] = [[] for _ in range(count)]
        for item_id in ids:
            shards[stable_shard(item_id, count)].append(item_id)
        # Each file read as soon as it is there (written once, renamed into place): the shards end
        # seconds apart, and the read is done the sooner after the last, which the workers wait for.
        read: list[shard_exchange.Shard | None] = [None] * count
        pending = list(range(count))
        while pending:
            for j in [j for j in pending if paths[j].exists()]:
                read[j] = shard_exchange.read_shard(paths[j], FIRST_PASS, j, count, shards[j])
                if read[j] is None:
                    return None
                pending.remove(j)
            if not pending:
                break
            if any((directory / f"{FIRST_PASS}-{j}.withdrawn").exists() for j in pending):
                return None
            if self._stop.wait(POLL_S) and not all(paths[j].exists() for j in pending):
                return None  # taken before every file was there (a file written since is still read)
        line_of = {id(r): line for s in read if s is not None for r, line in zip(s.records, s.lines, strict=True)}
        records = shard_exchange.in_plan_order([r for s in read if s is not None for r in s.records], ids,
                                               shard_exchange.variant_positions(as_variants(self.variants)))
        if records is None:
            return None
        lines = [line_of[id(r)] for r in records]
        ahead = GradedAhead()
        ahead.rows.add(records, lines=lines)
        ahead.tally.add(records)
        return Preread(records, ahead, hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest())
