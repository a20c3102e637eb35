"""What the end of a gate run needs and its answers do not, done while they come in
(docs/speed.md, "The time after the last answer").

With the inference on its own thread (plugin/speed/early_inference.py) the main thread waits for the last
answer with nothing to do; without this it would do the following between the last answer
and the exit status: the garbage collection before the heap is frozen (most of the heap,
the cube and the modules, is alive already), the leakage audit of the cube (gate.json's
leak flags: read here when this user's cache holds it, else started in a child process on
another core, `start_leak_audit`; computed on this thread it would take the interpreter
from the requests, and delay the end of a run whose server died), the installed packages'
versions (run.json) and the import of the modules that decide and write the outputs. None
of it depends on an answer.
On a fast server the main thread's work delays the inference thread by as much (the
interpreter's lock), so the run's wall time is the same; on a slow one it is free.
"""

from __future__ import annotations

import contextlib
from typing import Any

from medrcube.plugin.speed.frozen_heap import settle_heap


def prepare_outputs(session: Any) -> None:
    """Done on the main thread before it waits for the inference thread's end."""
    settle_heap()
    import medrcube.gate.evaluate  # noqa: F401  (the verdicts)
    import medrcube.plugin.allure  # noqa: F401  (the cases' labels and attachments)
    import medrcube.plugin.render  # noqa: F401
    import medrcube.plugin.run_meta  # noqa: F401  (gate.json and run.json)
    import medrcube.report.after_exit  # noqa: F401
    import medrcube.rundir.conforms  # noqa: F401
    import medrcube.rundir.seal  # noqa: F401
    from medrcube.rundir.files import versions

    versions()
    start_leak_audit(session)  # from the cache, or started in a child: never computed on this thread
    judge_leaks(session)


def judge_leaks(session: Any) -> None:
    """With the cube's leakage audit at hand (this user's cache held it), what gate.json's leak
    entries read of it, judged now: each assessed check's scope (`leaking`) and each image-dependence
    check's options-only prior (plugin/leakage.py). Nothing without the audit (it is then read at the end)."""
    audit = session.leak_audit
    if audit is None:
        return
    from medrcube.gate.kinds import entry_of
    from medrcube.gate.leaking import ASSESSED_KINDS, Scope, leak_reasons, options_only_prior

    items = list(session.cube.items_by_content)
    scopes = (Scope(c.part, c.modality, c.task) for c in session.checks if str(c.kind) in ASSESSED_KINDS)
    session.leak_reasons = (audit, leak_reasons(scopes, items, audit))
    blind = {(c.part, c.modality, c.task) for c in session.checks
             if (entry := entry_of(str(c.kind))) is not None and entry.against == "blind"}
    session.blind_priors = (audit, {scope: options_only_prior(items, audit, *scope) for scope in blind})


# A child costs its interpreter and imports (numpy, scipy: about 0.8 s of CPU) wherever it
# runs; below this many items the audit itself costs less than that (about 0.8 ms of CPU an
# item, with scipy's imports 0.5 s, once per process), so it is computed after the answers.
AUDIT_CHILD_MIN_ITEMS = 400


def start_leak_audit(session: Any) -> Any:
    """The cube's leakage audit if this user's cache holds it; else None, its computation
    started in a child process (cube/audit_child.py) that `leak_audit` takes it from. Called
    where the process that decides has nothing to do until the answers are in (here, and on
    the xdist controller as its workers start): on a fast server a thread would slow
    the requests by as much as it computes (the interpreter's lock), and after the last
    answer it was the whole of a first run's tail (3.7 s of CPU at the paper's scale)."""
    if session.leak_audit is None and session.audit_child is None:
        from medrcube.cube import audit_child
        from medrcube.cube.audit_cache import items_digest, stored_audit

        items = list(session.cube.items_by_content)
        session.leak_audit = stored_audit(items, digest=session.items_digest)
        if session.leak_audit is None and len(items) >= AUDIT_CHILD_MIN_ITEMS:
            session.audit_child = audit_child.start(items, session.items_digest or items_digest(items))
    return session.leak_audit


def leak_audit(session: Any) -> Any:
    """The cube's leakage audit (cube/audit_cache.py: from this user's cache when it holds
    this cube), once per session: the child's (`start_leak_audit`) when one was started and
    did not fail, else computed here."""
    if session.leak_audit is None:
        from medrcube.cube.audit_cache import cached_audit

        child, session.audit_child = session.audit_child, None
        made = child.take() if child is not None else None
        session.leak_audit = cached_audit(list(session.cube.items_by_content), digest=session.items_digest, made=made)
    return session.leak_audit


def stop_leak_audit(session: Any) -> None:
    """The child of `start_leak_audit` ended, if the run ends without taking its audit."""
    child, session.audit_child = session.audit_child, None
    if child is not None:
        child.stop()


def prepare_run_files_ask(session: Any, result: Any) -> None:
    """What `ask_for_run_files` will ask of `result`'s records, found while the evidence child collects
    its share (this process's wait for its answer: forked_evidence.collect_forked's `meanwhile`): the
    offsets of their lines, and the files the run files child will fill."""
    ahead = session.graded_ahead
    if ahead is not None:
        ahead.prepare_ask(result.records, session.options.report_dir, result.delivery)


def ask_for_run_files(session: Any, result: Any) -> None:
    """A large run's results.jsonl and metrics_summary.json asked, once the verdicts are taken (the other
    core is the evidence child's before: forked_evidence.py), of the child that read their lines as they
    came (rundir/mirror.py): made on another core while this process runs its cases, renamed into the run directory by its writer when they
    are of the very records it writes, and written by it otherwise."""
    ahead = session.graded_ahead
    if ahead is None:
        return
    from medrcube.plugin.run_meta import site_policy
    from medrcube.rundir.files import summary_arguments

    with contextlib.suppress(Exception):  # an optimisation: the writer makes the files itself
        prevalence, costs = summary_arguments(site_policy(session))
        ahead.ask_mirror(result.records, session.options.report_dir, result.info.get("variants"),
                         prevalence=prevalence, costs=costs, delivery=result.delivery)
