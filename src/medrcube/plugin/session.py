"""Per-run state of the pytest gate: options, cube, policy, checks, model, records, verdicts.

One `GateSession` per pytest process, kept in `config.stash`. Building it is cheap (the cube's
items and the policy: what collection needs, identical on every xdist worker); inference runs
lazily, once per process, the first time a test asks for a verdict or for the records, through
the one run service (medrcube.service.infer, which `medrcube run` uses too). With pytest-xdist
every worker needs every record; the store's claims make each request reach the model once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from medrcube.gate import kinds
from medrcube.plugin.evidence import served_error
from medrcube.plugin.ledger import reserve, with_share
from medrcube.plugin.options import GateOptions, _parse_variants, _usage, packaged_thresholds, resolve_cube_spec
from medrcube.plugin.speed.forked_evidence import collect_forked
from medrcube.plugin.speed.frozen_heap import collection_paused, settle_heap
from medrcube.plugin.speed.tail_ahead import ask_for_run_files, prepare_outputs, prepare_run_files_ask
from medrcube.records import GradedRecord

if TYPE_CHECKING:
    from medrcube.run.runner import RunResult

OPTIONS_KEY = pytest.StashKey["GateOptions"]()
SESSION_KEY = pytest.StashKey["GateSession"]()


class GateError(Exception):
    """A check could not be decided: too many API errors, or inference itself failed. Raised in
    the `verdict` fixture (test setup): an *error*, never a failed gate (an outage says nothing
    about the model's competence)."""


def is_controller(config: pytest.Config) -> bool:
    """True in the process that writes reports: the xdist controller, or the only process."""
    return not hasattr(config, "workerinput")


def kind_of_test(function_name: str) -> str | None:
    """The kind a suite test function is parametrized with (the kind registry, gate/kinds.py)."""
    return kinds.kind_of_test(function_name)


# -- the session --------------------------------------------------------------------------


# In an xdist worker's workerinput: the directory the workers of the run hand each other their
# shards' records in (run/shard_exchange.py), made and removed by the controller.
EXCHANGE_KEY = "medrcube_exchange"


def exchange_dir(config: pytest.Config) -> Path | None:
    """The run's shard-exchange directory in an xdist worker; None elsewhere, and where this
    worker cannot see it (a worker on another host: it reads the store, as before)."""
    wi = getattr(config, "workerinput", None)
    value = wi.get(EXCHANGE_KEY) if wi else None
    return Path(value) if value and Path(value).is_dir() else None


def worker_slot(config: pytest.Config) -> tuple[int, int]:
    """(index, count) of this xdist worker; (0, 1) without xdist."""
    wi = getattr(config, "workerinput", None)
    if not wi:
        return 0, 1
    count = max(int(wi.get("workercount", 1)), 1)
    wid = str(wi.get("workerid", "gw0"))
    index = int(wid[2:]) if wid.startswith("gw") and wid[2:].isdigit() else 0
    return index % count, count


@dataclass
class GateSession:
    """Everything one pytest process knows about the run. Built by `open_session`."""

    options: GateOptions
    cube: Any  # medrcube.cube.item.Cube
    policy: Any  # medrcube.gate.thresholds.Policy
    checks: list[Any]  # medrcube.gate.checks.Check
    adapter: Any  # ModelAdapter of the candidate
    variants: tuple[Any, ...]
    thresholds_label: str = ""
    thresholds_path: Path | None = None
    policy_record: dict[str, Any] = field(default_factory=dict)  # gate.json's `policy` (plugin/evidence.py)
    run_token: str | None = None  # shared by the xdist workers of this run (plugin/evidence.py)
    fresh: bool = False  # --fresh, or the deployment profile: no stored answer of another run
    judge: Any = None
    baseline_adapter: Any = None
    baseline_dir: Path | None = None
    worker: tuple[int, int] = (0, 1)
    exchange_dir: Path | None = None  # an xdist worker's shard-exchange directory (service.infer)
    _by_id: dict[str, Any] = field(default_factory=dict, repr=False)
    _result: RunResult | None = field(default=None, repr=False)
    _baseline_records: list[GradedRecord] | None = field(default=None, repr=False)
    _failure: str | None = field(default=None, repr=False)
    _verdicts: dict[str, Any] = field(default_factory=dict, repr=False)
    # An xdist worker's: the payloads the run's deciding worker wrote (plugin/speed/shared_verdicts.py;
    # None until looked at, empty when this worker decides itself), and its records' lines' SHA-256 once taken.
    shared_payloads: dict[str, Any] | None = field(default=None, repr=False)
    # The deciding worker's payloads, taken while this worker's inference ended: it decided on this
    # worker's shard file as written, so this worker need not read the other shards (shared_verdicts.taker);
    # empty when none came in time (this worker decides itself).
    decider_payloads: dict[str, Any] | None = field(default=None, repr=False)
    _lines_digest: str | None = field(default=None, repr=False)
    _family: tuple[Any, ...] = field(default=(), repr=False)  # the built-in checks' Evidence (site checks join it)
    questions: dict[str, str] = field(default_factory=dict, repr=False)  # item id -> question
    progress: Any = None  # a medrcube.plugin.progress.GateProgress, set by the plugin
    _inference: Any = field(default=None, repr=False)  # medrcube.service.Inference
    served: dict[str, str | None] = field(default_factory=dict, repr=False)  # spec -> as its endpoint lists it
    decider: Any = field(default=None, repr=False)  # medrcube.sequential.Decider: full or --sequential
    _digest: list[str] = field(default_factory=list, repr=False)  # cube/derived_cache.items_digest, once taken
    _finish: Any = field(default=None, repr=False)  # the assessed checks and policy_record (complete)
    early: Any = field(default=None, repr=False)  # a medrcube.plugin.speed.early_inference.EarlyInference, once started
    leak_audit: Any = field(default=None, repr=False)  # cube/audit.py's Audit, once taken (plugin/speed/tail_ahead.py)
    audit_child: Any = field(default=None, repr=False)  # cube/audit_child.AuditChild computing it, until taken
    # (that Audit, gate/leaking.leak_reasons of the checks' scopes), taken while the answers come in (tail_ahead.py)
    leak_reasons: tuple[Any, dict[Any, str | None]] | None = field(default=None, repr=False)
    # (that Audit, each image-dependence check's scope -> its items' options-only prior), taken with them
    blind_priors: tuple[Any, dict[tuple[Any, Any, Any], float | None]] | None = field(default=None, repr=False)
    attempt: Any = None  # the controller's run/ledger.Attempt on this cube (plugin/ledger.py); its pass
    pass_share: float = 1.0  # claims spend this share of alpha in every process (gate/attempts.py)
    outside: dict[str, tuple[str, ...]] = field(default_factory=dict)  # axis -> the cube's values outside the scope

    def __post_init__(self) -> None:
        from medrcube.sequential import decider_for

        self._by_id = {c.id: c for c in self.checks}
        self.questions = {it.id: it.question for it in self.cube.items}
        if self.decider is None:
            self.decider = decider_for(self.options.sequential, partial(collect_forked, meanwhile=self._run_files_meanwhile))

    # -- collection-time questions: cheap, identical on every worker ---------------------

    def checks_of(self, kind: str) -> list[Any]:
        return [c for c in self.checks if c.kind == kind]

    def check(self, check_id: str) -> Any:
        return self._by_id[check_id]

    def why_no_checks(self, kind: str) -> str:
        return kinds.off_reason(kind, self.thresholds_label)

    def kinds_off(self) -> dict[str, str]:
        """Kinds of check with no case in this run, each with how to turn it on."""
        return {e.name: self.why_no_checks(e.name) for e in kinds.registered() if e.test and not self.checks_of(e.name)}

    @property
    def has_baseline(self) -> bool:  # a baseline model, or a run directory
        return self.baseline_adapter is not None or self.baseline_dir is not None

    def complete(self) -> None:
        """Build what the session left for later (the feasibility pass, gate.json's policy block), once."""
        from medrcube.gate.thresholds import ThresholdsError

        if (finish := self._finish) is None:
            return
        self._finish = None
        try:
            checks, self.policy_record = finish()
        except ThresholdsError as e:  # the shipped policy itself: as a usage error, as it was before
            raise _usage("--thresholds", self.thresholds_label, str(e)) from None
        self.checks = with_share(checks, self.pass_share)
        self._by_id = {c.id: c for c in self.checks}

    # -- inference: lazy, once per process ------------------------------------------------

    def _infer(self, stop: Any = None, taken: Any = None) -> None:
        """Run the candidate (and a baseline) through the one run service; `stop` cancels it, `taken` is
        called once the run's outcome is this session's, before the run's end closes its adapters, event
        loop and store (plugin/speed/early_inference.py)."""
        from medrcube.plugin.costs import price_of
        from medrcube.plugin.speed.shared_verdicts import shares_verdicts, taker
        from medrcube.service import infer

        baseline_records = None
        if self.baseline_dir is not None:
            try:  # a previous run, read before asking (a sequential run's looks need it)
                baseline_records = self.baseline_records()
            except GateError:
                pass  # the regression checks say so (verdict)
        specs = {"candidate": self.options.model, "judge": self.options.judge, "baseline": self.options.baseline}
        prices = {role: p for role, spec in specs.items() if (p := price_of(spec, self.options.models_file))}
        def take(inference: Any) -> None:
            self._take(inference)
            if taken is not None:
                taken()

        self._take(infer(
            self.cube,
            self.adapter,
            variants=self.variants,
            store_dir=self.options.response_store,
            judge=self.judge,
            baseline=self.baseline_adapter,
            concurrency=self.options.concurrency,
            progress=self.progress if self.progress is not None else False,
            shard=self.worker,
            # An xdist worker whose controller died stops asking at once (run/orphan.py).
            stop_when_orphaned=bool(os.environ.get("PYTEST_XDIST_WORKER")),
            decider=self.decider,
            checks=self.checks,
            baseline_records=baseline_records,
            prices=prices,
            run_token=self.run_token,
            fresh=self.fresh,
            stop=stop,
            exchange_dir=self.exchange_dir,
            # A sharded worker asks on this thread, with none waiting beside it to settle the heap
            # (plugin/speed/early_inference.wait_settling does that for the single process).
            settle=settle_heap if self.worker[1] > 1 else None,
            mirror=True,  # the single process asks for its run files as it decides (plugin/speed/tail_ahead.py)
            take_whole=taker(self),  # an xdist worker that will take another's verdicts reads no other shard
            shard_digests=shares_verdicts(self),  # the deciding worker names the files it read (shared_verdicts.py)
            on_result=take if taken is not None else None,
        ))

    def _take(self, inference: Any) -> None:
        """The run's outcome as this session's (service.Inference; taken once `infer` has it whole, and again,
        the same, as `infer` returns)."""
        if inference is self._inference:
            return
        self._inference = inference
        self._result = inference.result
        if inference.baseline is not None:
            self._baseline_records = list(inference.baseline.records)

    @property
    def graded_ahead(self) -> Any:
        """The run directory's lines and sums this process made as it graded (service.Inference.ahead), or None."""
        return self._inference.ahead if self._inference is not None else None

    @property
    def items_digest(self) -> str | None:  # the cube's items digest if taken (the audit's cache key reuses it)
        return self._digest[0] if self._digest else None

    def records(self) -> list[GradedRecord]:
        """Every graded record of the candidate (runs inference on the first call)."""
        result = self.inferred()
        if self._inference is not None and not self._inference.complete:
            if not self._inference.completed():
                self._failure = ("the other xdist workers' records of this run cannot be read from their shard "
                                 "files any more; the answers are in the response store: run again")
                raise GateError(self._failure)
            result = self._result = self._inference.result
        # After an early stop the asks never sent are records too (tally.NOT_ASKED), counted against each
        # check's max_error_rate; another model's answers are no evidence under deployment (served_error).
        if (why := served_error(self, result)) is not None:
            self._failure = why
            raise GateError(why)
        return result.records

    def inferred(self) -> RunResult:
        """The candidate's run, inferring on the first call (its failure a GateError). In an xdist worker
        that took the deciding worker's verdicts, its own shard's records only (`records` reads the rest)."""
        if self._failure is not None:
            raise GateError(self._failure)
        if self._result is None:
            try:
                if self.early is not None:  # started before collection: its outcome, waited for
                    prepare_outputs(self)  # while the answers come in (plugin/speed/tail_ahead.py)
                    self.early.wait()
                else:
                    self._infer()
            except Exception as e:  # a broken run errors every check and fails none
                self._failure = f"inference failed (--model={self.options.model}): {type(e).__name__}: {e}"
                raise GateError(self._failure) from e
            settle_heap()  # plugin/speed/frozen_heap.py
        assert self._result is not None
        return self._result

    def shard_files(self) -> dict[int, str] | None:
        """An xdist worker's: the SHA-256 of each shard file its records were made from (service.Inference), or None."""
        return self._inference.shard_files if self._inference is not None else None

    def take_decided(self, payloads: dict[str, Any], lines_sha256: str) -> None:
        """The deciding worker's payloads and its records' lines' SHA-256, taken for this worker's (shared_verdicts.taker)."""
        self.decider_payloads, self._lines_digest = payloads, lines_sha256

    def baseline_records(self) -> list[GradedRecord] | None:
        if not self.has_baseline:
            return None
        if self._baseline_records is None and self.baseline_dir is not None:
            from medrcube.rundir.files import read_results

            path = self.baseline_dir / "results.jsonl"
            try:
                self._baseline_records = read_results(path)
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise GateError(f"--baseline={self.options.baseline}: cannot read {path}: {e}") from e
        if self._baseline_records is None:
            self.records()  # a baseline model runs with the candidate
        return self._baseline_records

    def verdict(self, check: Any) -> Any:
        """The verdict of one check; every check decided at once, as one family (Holm over
        the fail claims: gate/family.py), and cached. GateError if inference failed."""
        if not self._verdicts:
            records = self.records()
            baseline, missing = None, None
            try:
                baseline = self.baseline_records() if any(kinds.needs_baseline(c.kind) for c in self.checks) else None
            except GateError as e:  # an unreadable baseline errors the regression checks only
                missing = str(e)
            with collection_paused():  # plugin/speed/frozen_heap.py
                self._verdicts = self.decider.verdicts(self.checks, records, baseline, baseline_error=missing)
            self._family = self.decider.family()
            if (result := self._run_files_result()) is not None:
                # Asked now, not as the records became final: the other core collected a share of the
                # verdicts' evidence meanwhile (plugin/speed/forked_evidence.py); it makes them while this
                # process runs its cases.
                ask_for_run_files(self, result)
        return self._verdicts[check.id]

    def _run_files_result(self) -> RunResult | None:
        """The run whose files the run files child is asked for: once the run is over, in the process
        that writes the run directory (no xdist worker)."""
        return self._result if self.worker[1] == 1 else None

    def _run_files_meanwhile(self) -> None:
        """The run files' ask prepared while the evidence child collects its share (forked_evidence's
        `meanwhile`), for the run `verdict` asks about."""
        if (result := self._run_files_result()) is not None:
            prepare_run_files_ask(self, result)

    def lines_sha256(self) -> str:
        """The SHA-256 of results.jsonl's lines of this process's records (plugin/handover.lines_sha256),
        taken once (runs inference on the first call)."""
        if self._lines_digest is None:
            from medrcube.plugin.handover import lines_sha256

            self._lines_digest = lines_sha256(self.records(), self._lines_made())
        return self._lines_digest

    def _lines_made(self) -> Any:
        """results.jsonl's lines this process made or read as it exchanged shards (service.Inference.lines), or None."""
        return self._inference.lines if self._inference is not None else None

    def shared_payload(self, check: Any, payload_of: Any) -> dict[str, Any] | None:
        """An xdist worker's: the check's payload as the run's deciding worker decided it, or None
        (decide it here: plugin/speed/shared_verdicts.py); `payload_of(check, verdict)` makes one."""
        from medrcube.plugin.speed.shared_verdicts import shared_payload

        return shared_payload(self, check, payload_of)

    def site_verdict(self, check: Any, records: Any, hit: Any) -> Any:
        """A site check's verdict (plugin/site.py), decided in the built-in checks' family (decide_joining)."""
        from medrcube.gate.evaluate import decide_joining
        from medrcube.gate.evidence import collect_site

        if self.checks and not self._verdicts:
            self.verdict(self.checks[0])  # decide the family first (once per process)
        return decide_joining(self._family, collect_site(check, records, hit))

    # -- hand-over to the controller -------------------------------------------------------

    def handover(self, *, live: bool = False) -> dict[str, Any] | None:
        """What this process tells the controller (records, counts, usage: JSON for xdist), or None;
        `live`: to this process's own controller, the (frozen) records themselves, not their dicts."""
        if self._result is None:
            return None
        r = self._result
        usage = self._inference.usage if self._inference is not None else {}
        from medrcube.plugin.handover import READ_WAIT_S, asked_out, digest_out, records_out

        out = None
        if self._inference is not None and not self._inference.complete:
            # This worker took the deciding worker's verdicts and read no other shard: the run's lines'
            # digest when the controller holds those lines, else the whole run read from the files now.
            out = digest_out(r.records, self.exchange_dir, self._lines_digest)
            if out is None:
                if self._inference.completed():
                    r = self._result = self._inference.result
                else:  # its own asks only: the controller takes the records of a worker that has them
                    out = asked_out(r.records)
        return {
            "worker": f"gw{self.worker[0]}" if self.worker[1] > 1 else "main",
            # Live: with their (outcome, cached) counts from the grading (RunResult.outcome_pairs).
            **({"records": list(r.records), "outcome_pairs": r.outcome_pairs} if live else out if out is not None else
               records_out(r.records, self._lines_made(), self.exchange_dir, self._lines_digest,
                           # read from every shard file, as the controller's read is: wait for it, not send the lines
                           wait_s=READ_WAIT_S if self.shard_files() is not None else 0.0)),
            "requests_sent": r.requests_sent,
            "judge_requests": r.judge_requests,
            "usage": {name: u.to_dict() for name, u in usage.items()},
            "started": r.started,
            "finished": r.finished,
            "wall_s": r.wall_s,
            "aborted": r.aborted,
            "info": r.info,
            "sampling": self.decider.sampling(),
        }


def open_session(config: pytest.Config, *, defer: bool = False) -> GateSession:
    """The process's GateSession, built on the first call. Every problem is a UsageError.
    `defer`: leave what asking the model does not need for `GateSession.complete`."""
    existing = config.stash.get(SESSION_KEY, None)
    if existing is not None:
        return existing
    from medrcube.plugin.evidence import run_token

    gate = _build(config.stash[OPTIONS_KEY])
    gate.worker = worker_slot(config)
    gate.exchange_dir = exchange_dir(config)
    gate.run_token = run_token(config)
    reserve(config, gate)  # this run's attempt on the cube (plugin/ledger.py)
    if not defer:
        gate.complete()
    config.stash[SESSION_KEY] = gate
    return gate


def _build(options: GateOptions) -> GateSession:
    from medrcube.cube import item_strata, load_cube
    from medrcube.cube.item import CubeError
    from medrcube.gate.checks import build_checks
    from medrcube.gate.scope import scoped_items
    from medrcube.gate.thresholds import ThresholdsError, validate_against_cells
    from medrcube.models.registry import ModelSpecError, load_adapter
    from medrcube.plugin.evidence import fresh_wanted, policy_record, refuse_at_chance, split_baseline
    from medrcube.plugin.speed.policy_memo import remembered_policy

    variants = _parse_variants(options.variants)
    cube_spec = resolve_cube_spec(options)
    try:
        cube = load_cube(cube_spec)
    except CubeError as e:
        raise _usage("--cube", cube_spec, f"cannot load the cube: {e}") from None
    if not cube.items:
        raise _usage("--cube", cube_spec, "the cube has no valid item")

    thresholds = options.thresholds or packaged_thresholds()
    if thresholds is None:
        raise _usage("--thresholds", "(not given)", "no ./thresholds.yaml here and none packaged; pass --thresholds=FILE")
    baseline_dir, baseline_spec = split_baseline(options.baseline, cube)
    cells, offered = sorted({it.cell for it in cube.items}), dict[tuple[str, str, str], set[str]]()
    digest: list[str] = []  # the start-up cache's key (plugin/speed/feasibility_memo.py), computed once

    def assessed(built: list[Any], on: Any) -> list[Any]:
        """Checks this cube cannot decide, or outside the scope: reported, not required (or refused)."""
        from medrcube.cube.derived_cache import items_digest
        from medrcube.gate.feasible import assess
        from medrcube.plugin.speed.feasibility_memo import feasibility_memo

        if not digest:  # by content: copies of an image under other names are one image
            digest.append(items_digest(cube.items_by_content))
        return list(assess(built, cube.items_by_content, on, feasibility_memo(built, digest[0], on)))

    try:
        policy = remembered_policy(thresholds, profile=options.profile)  # load_policy, its parse remembered
        validate_against_cells(policy, cells)  # names of the scope too: the whole cube's and the taxonomy's
        inside, outside = scoped_items(cube.items, policy.scope, str(thresholds))  # only the scope is asked
        cube, cells = replace(cube, items=tuple(inside)), sorted({it.cell for it in inside})
        for it in cube.items:  # the option texts per cell: per-finding checks where a finding is offered
            offered.setdefault(it.cell, set()).update(it.options)
        checks = build_checks(cells, policy, variants=variants, has_baseline=bool(baseline_dir or baseline_spec),
                              cell_options=offered, strata=item_strata(cube.items))
        # The feasibility pass (gate/feasible.py) refuses the run only when the policy says
        # `when_undecidable: refuse`: then it runs now, before any request; otherwise it only
        # makes checks optional and runs with the comparison below (the at-chance refusal
        # does not depend on which checks are required).
        refusing = policy.feasibility.when_undecidable == "refuse"
        if refusing:
            checks = assessed(checks, policy)
        allowed = refuse_at_chance(Path(thresholds), list(checks), cube)
    except ThresholdsError as e:
        option = "--profile" if e.key == "profiles" and options.profile else "--thresholds"
        raise _usage(option, options.profile if option == "--profile" else thresholds, str(e)) from None

    def finish() -> tuple[list[Any], dict[str, Any]]:
        """The checks assessed on this cube, and gate.json's policy block with its differences
        from the shipped default: the checks the shipped policy (its profile of the same
        name, if any) builds on this run, assessed as the run's own are (so that only the
        policies differ). Not needed to ask the model: completed after the first answer
        when the inference starts early (plugin/speed/early_inference.py); nothing here refuses a run (the
        refusals are above)."""

        def default_checks(profile: str | None) -> list[Any]:
            shipped = remembered_policy(packaged_thresholds() or thresholds)
            if profile in shipped.profiles:
                shipped = remembered_policy(packaged_thresholds() or thresholds, profile=profile)
            built = build_checks(cells, shipped, variants=variants, has_baseline=bool(baseline_dir or baseline_spec),
                                 cell_options=offered, strata=item_strata(cube.items))
            return assessed(built, shipped)

        done = list(checks) if refusing else assessed(checks, policy)
        return done, policy_record(Path(thresholds), options.profile, done, default_checks, allowed)

    def adapter(option: str, spec: str) -> Any:
        try:
            return load_adapter(spec, cube=cube, models_file=options.models_file, concurrency=options.concurrency)
        except (ModelSpecError, ValueError) as e:  # ModelsFileError, a missing API key
            raise _usage(option, spec, str(e)) from None

    return GateSession(
        options=options,
        cube=cube,
        policy=policy,
        checks=list(checks),
        adapter=adapter("--model", options.model),
        variants=variants,
        thresholds_label=str(thresholds),
        thresholds_path=Path(thresholds),
        _finish=finish,
        fresh=fresh_wanted(options.fresh, options.profile),
        judge=adapter("--judge", options.judge) if options.judge else None,
        baseline_adapter=adapter("--baseline", baseline_spec) if baseline_spec else None,
        baseline_dir=baseline_dir,
        _digest=digest,
        outside=outside,
    )


def preflight(session: GateSession, *, quiet: bool = False) -> None:
    """One short request to each HTTP endpoint (medrcube.service.preflight): a dead URL, a refused key or
    an unknown model stops the run at once, naming the URL, the HTTP status and the provider's words
    (models/listing.py). `quiet` (an xdist worker: the controller has said what was wrong) only resolves names."""
    from medrcube.service import EndpointError
    from medrcube.service import preflight as ask_once

    try:
        session.served = ask_once([session.adapter, session.judge, session.baseline_adapter])
    except EndpointError as e:
        if quiet:
            return
        raise _usage("--model", session.options.model, str(e)) from None
