"""The ledger of attempts, pytest side: the controller records this run as the next attempt
on its cube before the first request, its xdist workers receive the number, every process
makes its pass claims at that attempt's share of alpha, and the controller records the
verdict at the end.

What the ledger is and what it cannot see: run/ledger.py; the spending rule and the
guarantee across attempts: gate/attempts.py and docs/guarantees.md.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

ATTEMPT_KEY = "medrcube_attempt"  # in an xdist worker's workerinput: this run's attempt number
LEDGER_PROFILES = ("deployment",)  # profiles that run only with their ledger (or --new-ledger)


def reserve(config: pytest.Config, session: Any) -> None:
    """The controller: this run's attempt on its cube, recorded in the ledger (a usage
    error when the ledger is broken, or missing where the profile needs it); any process:
    the attempt's share of alpha applied to the session's pass claims."""
    from medrcube.gate.attempts import share

    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        number = workerinput.get(ATTEMPT_KEY)
    else:
        if session.attempt is None:
            session.attempt = _begin(session)
        number = session.attempt.number
    session.pass_share = share(int(number)) if number else 1.0
    session.checks = with_share(session.checks, session.pass_share)
    session._by_id = {c.id: c for c in session.checks}


def with_share(checks: list[Any], pass_share: float) -> list[Any]:
    """The checks with their pass claims at `pass_share` of their alpha (site checks have none)."""
    return [replace(c, pass_share=pass_share) if hasattr(c, "pass_share") else c for c in checks]


def _begin(session: Any) -> Any:
    from medrcube.gate.record import policy_digest
    from medrcube.models.urls import redact_urls  # the one rule (rundir.files.redact_spec), without rundir's imports
    from medrcube.run.ledger import LedgerError, begin

    opts = session.options
    identity = {"model": None if opts.model is None else redact_urls(opts.model), "model_fingerprint": session.adapter.fingerprint,
                "policy_digest": policy_digest(session.thresholds_path) if session.thresholds_path else None,
                "profile": opts.profile}
    try:
        return begin(opts.ledger or opts.response_store, session.cube.fingerprint, run=str(session.run_token),
                     identity=identity, must_exist=opts.profile in LEDGER_PROFILES, new_ledger=opts.new_ledger)
    except LedgerError as e:
        raise pytest.UsageError(f"--ledger={opts.ledger or opts.response_store}: {e}") from None


def worker_input(session: Any, node: Any) -> None:
    """The controller hands its attempt number to an xdist worker (none when no gate runs)."""
    if session is not None and session.attempt is not None:
        node.workerinput[ATTEMPT_KEY] = session.attempt.number


def attempt_meta(session: Any) -> dict[str, Any] | None:
    """gate.json's `attempt` block: the number, the ledger, who signs it, the earlier
    attempts' verdicts, this attempt's pass level and the bound across attempts."""
    from medrcube.gate.attempts import ACROSS, AttemptLevel, share

    attempt = session.attempt
    if attempt is None:
        return None
    required = [c for c in session.checks if getattr(c, "required", False)]
    alpha = max((c.alpha for c in required), default=0.025)
    level = AttemptLevel(attempt.number, alpha)
    return {**attempt.to_json(), "share": share(attempt.number), "alpha": alpha, "pass_level": level.pass_level,
            "across": level.across, "across_any": ACROSS * alpha, "guarantee": level.sentence()}


def conclude(session: Any, verdict: str, run_id: str) -> str | None:
    """Record the verdict of this run's attempt; a warning when the ledger cannot take it."""
    from medrcube.run.ledger import LedgerError
    from medrcube.run.ledger import conclude as record

    attempt = session.attempt
    if attempt is None:
        return None
    try:
        record(attempt, run=str(session.run_token), verdict=verdict, run_id=run_id)
    except (LedgerError, OSError) as e:
        return f"the verdict was not recorded in the ledger {attempt.path}: {e}"
    return None
