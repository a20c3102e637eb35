"""The gate's evidence on record, pytest side: the policy on record and its
refusals, the baseline run directory checked before it is read, the run's token shared
by its xdist workers, `--fresh`, and the lines and properties that show them.

What the pieces guarantee is said where they live: the store's provenance in
run/store, the seal in rundir/seal.py, the policy record in gate/record.py.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

RUN_TOKEN_KEY = "medrcube_run_token"  # in an xdist worker's workerinput
_TOKEN = pytest.StashKey[str]()
FRESH_PROFILES = ("deployment",)  # profiles that ask every item live unless --no-fresh
STRICT_MODEL_PROFILES = ("deployment",)  # profiles where an answer from another model is an error


def run_token(config: pytest.Config) -> str:
    """This gate run's token: the controller makes it, its xdist workers receive it."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput and workerinput.get(RUN_TOKEN_KEY):
        return str(workerinput[RUN_TOKEN_KEY])
    if _TOKEN not in config.stash:
        from medrcube.run.provenance import new_run_token

        config.stash[_TOKEN] = new_run_token()
    return config.stash[_TOKEN]


def fresh_wanted(fresh: bool | None, profile: str | None) -> bool:
    """--fresh / --no-fresh as given; otherwise on in the deployment profile."""
    return fresh if fresh is not None else profile in FRESH_PROFILES


def served_error(session: Any, result: Any) -> str | None:
    """In the deployment profile, answers naming another model than the one asked for are
    an error of the whole run: no check is graded on them (the verdict block says so)."""
    mismatches = result.info.get("served_model_mismatches") if result is not None else None
    if not mismatches or session.options.profile not in STRICT_MODEL_PROFILES:
        return None
    named = ", ".join(f"{n} answer(s) from {name!r}" for name, n in mismatches.items())
    return (f"another model answered ({named}; requested {session.adapter.model!r}): the {session.options.profile} "
            "profile grades only answers of the model on record. Fix: point --model at the endpoint serving that "
            "model, or name the model the endpoint serves")


# -- the policy on record --------------------------------------------------------------------


def refuse_at_chance(thresholds: Path, checks: list[Any], cube: Any) -> list[Any]:
    """Raise UsageError for a bound at or below chance that its entry does not allow;
    return the entries that allow one (gate.json's `at_chance`). A usage error of the
    user's policy: checked before the first request (plugin/speed/early_inference.py)."""
    from medrcube.gate.record import below_chance, chance_levels

    chance = chance_levels(checks, ((it.cell, len(it.options)) for it in cube.items))
    refused, allowed = below_chance(checks, chance, thresholds)
    if refused:
        more = f" (and {len(refused) - 5} more)" if len(refused) > 5 else ""
        raise pytest.UsageError(
            f"--thresholds={thresholds}: " + "; ".join(refused[:5]) + more + ": a model that guesses passes such a "
            "check. Fix: raise the bound, set `above_chance` (e.g. 0.1), or write `at_chance: true` in the entry to "
            "allow it explicitly"
        )
    return list(allowed)


def policy_record(
    thresholds: Path, profile: str | None, checks: list[Any], build_default: Any, allowed: list[Any]
) -> dict[str, Any]:
    """gate.json's `policy` block (gate/record.py). `build_default(profile)` builds the
    shipped default policy's checks on this run; `allowed` is what `refuse_at_chance`
    returned for `checks`."""
    from medrcube.gate.record import differences, differences_summary, policy_digest
    from medrcube.plugin.options import packaged_thresholds

    default = packaged_thresholds()
    digest = policy_digest(thresholds)
    default_digest = policy_digest(default) if default is not None else None
    # The shipped file itself (or a byte-for-byte copy: a policy reads no path relative to
    # its file) builds the very checks this run built, assessed alike: no difference, and
    # building them again would cost the run's CPU while its requests are out
    # (6 ms of CPU on the bundled cube, 9 ms at paper scale).
    same_file = digest == default_digest
    diffs = differences(checks, build_default(profile)) if default is not None and not same_file else []
    return {
        "file": str(thresholds),
        "digest": digest,
        "profile": profile,
        "default_digest": default_digest,
        "differs": bool(diffs),
        "summary": differences_summary(diffs),
        "differences": diffs,
        "at_chance": allowed,
    }


def junit_properties(config: pytest.Config, record: Mapping[str, Any]) -> None:
    """The policy on record as global properties of --junitxml's test suite."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    xml.add_global_property("medrcube_policy_digest", str(record.get("digest")))
    xml.add_global_property("medrcube_policy_profile", str(record.get("profile") or "(none)"))
    xml.add_global_property("medrcube_policy_differs", str(bool(record.get("differs"))).lower())
    if record.get("summary"):
        xml.add_global_property("medrcube_policy_differences", str(record["summary"]))


def junit_account(config: pytest.Config, account: Any) -> None:
    """The run's account (gate/account.py) as global properties of --junitxml's test suite:
    the verdict, the required checks' counts, each failed check, what the verdict covers."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    xml.add_global_property("medrcube_gate_verdict", account.verdict)
    xml.add_global_property("medrcube_account", account.counts_line())
    for c in account.failed:
        xml.add_global_property("medrcube_failed", c.id + ("" if c.required else " (reported-only)"))
    for line in account.coverage.lines(account.verdict):
        xml.add_global_property("medrcube_coverage", line)


# -- the baseline ------------------------------------------------------------------------------


def _looks_like_path(value: str) -> bool:
    """A value that is no model spec: no known provider prefix, and a path separator or a
    leading . or ~ (a bare model name has neither)."""
    from medrcube.models.providers import names as provider_names

    prefix, sep, _ = value.partition(":")
    if sep and prefix in provider_names():
        return False
    return "/" in value or os.sep in value or value.startswith((".", "~"))


def split_baseline(value: str | None, cube: Any) -> tuple[Path | None, str | None]:
    """--baseline as (a verified run directory of this cube, None) or (None, a model spec).

    A directory must verify (rundir/seal.py) and have been run on the same cube
    fingerprint; a value that looks like a path and is none is a usage error, never a
    model name sent to the endpoint."""
    if not value:
        return None, None
    path = Path(value).expanduser()

    def usage(problem: str) -> pytest.UsageError:
        return pytest.UsageError(f"--baseline={value}: {problem}")

    if not path.is_dir():
        if path.exists():
            raise usage(f"{path} is a file; pass a run directory (reports/<run-id>) or a model spec")
        if _looks_like_path(value):
            raise usage(f"no such run directory {path.resolve()}; pass an existing run directory (reports/<run-id>) "
                        "or a model spec such as openai:NAME")
        return None, value
    if not (path / "results.jsonl").is_file():
        raise usage("this directory has no results.jsonl; pass a run directory (reports/<run-id>) or a model spec")
    from medrcube.rundir.reading import RunDirError, read_run_document
    from medrcube.rundir.seal import verify_run_dir

    check = verify_run_dir(path, page=False)  # the baseline's data
    if not check.ok:
        raise usage("the baseline run directory fails verification, so its answers cannot be trusted: "
                    + "; ".join(check.problems[:5]) + f". `medrcube verify {path}` says what changed; pass an "
                    "untouched run directory")
    try:
        fingerprint = read_run_document(path / "run.json").cube_fingerprint
    except RunDirError as e:
        raise usage(str(e)) from None
    if fingerprint != cube.fingerprint:
        raise usage(f"the baseline was run on another cube (fingerprint {fingerprint}), this run's cube "
                    f"{cube.source} has fingerprint {cube.fingerprint}: items with the same ids may ask other "
                    "questions; pass a baseline run on this cube")
    return path.resolve(), None


# -- what the summary says ---------------------------------------------------------------------


def verdict_block_lines(meta: Mapping[str, Any]) -> list[str]:
    """Lines just above the verdict: where the answers came from, the policy's differences."""
    from medrcube.run.provenance import provenance_line, unsigned_line

    lines = [line] if (line := provenance_line(meta.get("provenance"))) else []
    if line := unsigned_line(meta.get("provenance")):
        lines.append(line)
    from medrcube.run.ledger import ledger_line
    from medrcube.run.provenance import served_line

    strict = meta.get("profile") in STRICT_MODEL_PROFILES
    for line in (served_line(meta.get("served_model_mismatches"), meta.get("requested_model"), strict),
                 ledger_line(meta.get("attempt"))):
        if line:
            lines.append(line)
    policy = meta.get("policy") or {}
    if policy.get("digest"):
        lines.append(f"policy {policy.get('file')} {policy['digest'][:19]}..., profile {policy.get('profile') or '(none)'}"
                     + ("" if policy.get("differs") else ", the shipped default's checks"))
    if policy.get("summary"):
        lines.append(str(policy["summary"]))
    if policy.get("at_chance"):
        lines.append(f"bounds at or below chance, allowed by `at_chance: true`: {', '.join(policy['at_chance'][:5])}")
    return lines
