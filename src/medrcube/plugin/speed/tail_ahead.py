"""What the end of a gate run needs and its answers do not, done while they come in
(docs/speed.md, "The time after the last answer").

With the inference on its own thread (plugin/speed/early_inference.py) the main thread waits for the last
answer with nothing to do; without this it would do the following between the last answer
and the exit status: the garbage collection before the heap is frozen (most of the heap,
the cube and the modules, is alive already), the leakage audit of the cube (gate.json's
leak flags: read here when this user's cache holds it; computing it here would delay the
end of a run whose server died), the installed packages' versions (run.json) and the
import of the modules that decide and write the outputs. None of it depends on an answer.
On a fast server the main thread's work delays the inference thread by as much (the
interpreter's lock), so the run's wall time is the same; on a slow one it is free.
"""

from __future__ import annotations

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
    audit = leak_audit(session, compute=False)  # computed now, it could delay the end of a run whose server died
    if audit is not None:  # each assessed check's scope judged against it now: gate.json's `leaking` reads them
        from medrcube.gate.leaking import ASSESSED_KINDS, Scope, leak_reasons

        scopes = (Scope(c.part, c.modality, c.task) for c in session.checks if str(c.kind) in ASSESSED_KINDS)
        session.leak_reasons = (audit, leak_reasons(scopes, list(session.cube.items_by_content), audit))


def leak_audit(session: Any, *, compute: bool = True) -> Any:
    """The cube's leakage audit (cube/audit_cache.py: from this user's cache when it holds
    this cube), once per session; with `compute=False` only if the cache holds it (else None)."""
    if session.leak_audit is None:
        from medrcube.cube.audit_cache import cached_audit, stored_audit

        take = cached_audit if compute else stored_audit
        session.leak_audit = take(list(session.cube.items_by_content), digest=session.items_digest)
    return session.leak_audit
