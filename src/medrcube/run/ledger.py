"""The ledger of attempts: every gate run on a cube, numbered, in a tamper-evident chain.

One file per cube fingerprint, `<directory>/ledger-<fingerprint>.jsonl` (the directory is
the response store's by default, or `--ledger=DIR`: beside the site cube). Each line is an
entry: an `attempt` (number, run token, model, policy, time), the `verdict` that attempt
ended in, or `opened` (the first line: when, and how many attempts an earlier ledger of
this cube held that this one carries on from). Each entry names the previous entry's
digest and is bound by its own (run/signing.py): HMAC-SHA256 under the site key
(MEDRCUBE_SIGNING_KEY) when set, else under this user's secret, else a plain SHA-256.
An entry edited, removed or moved breaks the chain; an entry whose key is not held here
(the site key unset, another account's secret) cannot be checked.

A ledger cut at its end, or deleted, leaves no break in a chain. So the number of entries
and the last digest are also kept in this user's cache (`ledger-heads`, authenticated
like every entry there: cube/derived_cache.py), and a ledger shorter than its head, or
missing while its head is there, is refused. What no ledger can see: a run on another
machine or account, or a ledger deleted together with that user's cache. The guarantee
across attempts (gate/attempts.py) covers the attempts in the ledger; docs/guarantees.md
says what a hospital does about the rest.

Entries are appended under an exclusive lock on the file, so two runs started at once get
two numbers.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from medrcube.run import signing

LEDGER_VERSION = 1
GENESIS = "0" * 64  # the `prev` of the first entry


class LedgerError(RuntimeError):
    """The ledger is missing where it must be, broken, or cannot be checked here: names the
    file, the entry, what is wrong and the fix."""


@dataclass(frozen=True)
class Attempt:
    """This run's place in the ledger of its cube."""

    number: int  # 1 for the first attempt on the cube
    path: Path
    signer: str  # who signs the ledger's entries here (run/signing.SITE, USER, NONE)
    key_id: str | None
    earlier: Mapping[str, int] = field(default_factory=dict)  # verdicts of the earlier attempts
    unchecked: int = 0  # entries whose key is not held here (counted, not verified)
    opened: bool = False  # this run started the ledger

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "ledger": str(self.path), "signer": self.signer, "key_id": self.key_id,
                "earlier": dict(self.earlier), "unchecked": self.unchecked, "opened": self.opened}


def ledger_path(directory: str | os.PathLike[str], fingerprint: str) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in fingerprint)[:96]
    return Path(directory) / f"ledger-{safe}.jsonl"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _body_digest(body: Mapping[str, Any], signer: signing.Signer) -> str:
    return signing.digest(signing.canonical(body), signer.key)


@dataclass
class _Read:
    entries: list[dict[str, Any]]
    last: str
    attempts: int
    verdicts: dict[int, str]
    unchecked: int
    carried: int = 0  # attempts an earlier ledger of the cube held (the `opened` entry)


def _read(path: Path) -> _Read:
    """Every entry of the ledger, its chain checked (LedgerError at the first break)."""
    entries: list[dict[str, Any]] = []
    prev, attempts, unchecked, carried = GENESIS, 0, 0, 0
    verdicts: dict[int, str] = {}
    fix = (f"keep {path} as evidence (move it away) and start a new ledger with --new-ledger; the guarantee "
           "across attempts then covers only the attempts recorded from then on")
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            where = f"ledger {path}, line {line_no}"
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as e:
                raise LedgerError(f"{where}: not JSON ({e.msg}): the ledger was edited or damaged; {fix}") from None
            if not isinstance(entry, dict) or not isinstance(entry.get("digest"), str):
                raise LedgerError(f"{where}: not a ledger entry (no digest); {fix}")
            body = {k: v for k, v in entry.items() if k != "digest"}
            if body.get("prev") != prev:
                raise LedgerError(f"{where}: its `prev` does not name the entry before it: an entry was removed, "
                                  f"inserted or reordered; {fix}")
            checker = signing.checker_for(str(body.get("signer")))
            if checker is None or checker.key_id != body.get("key_id"):
                unchecked += 1  # a key not held here: counted, not verified
            elif not signing.matches(signing.canonical(body), entry["digest"], checker.key):
                raise LedgerError(f"{where}: its digest does not verify under the {checker.who}: the entry was "
                                  f"edited after it was written; {fix}")
            if body.get("event") == "opened":
                carried = int(body.get("carried") or 0)
                attempts = max(attempts, carried)
            elif body.get("event") == "attempt":
                attempts = int(body.get("number") or 0)
            elif body.get("event") == "verdict":
                verdicts[int(body.get("number") or 0)] = str(body.get("verdict"))
            entries.append(entry)
            prev = entry["digest"]
    return _Read(entries, prev, attempts, verdicts, unchecked, carried)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # not POSIX: two runs started in the same second may share a number
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _head_slot(path: Path) -> Any:
    from medrcube.cube.derived_cache import Slot

    return Slot.open("ledger-heads", [str(path.resolve())])


def _head(path: Path) -> dict[str, Any] | None:
    slot = _head_slot(path)
    if slot is None:
        return None
    hit = slot.read(lambda v: dict(v))
    return hit[0] if hit is not None else None


def _write_head(path: Path, read: _Read) -> None:
    slot = _head_slot(path)
    if slot is not None:
        slot.write({"entries": len(read.entries), "last": read.last, "attempts": read.attempts})


def _append(path: Path, read: _Read, body: dict[str, Any]) -> None:
    signer = signing.default_signer()
    body = {"v": LEDGER_VERSION, **body, "at": _now(), "prev": read.last, "signer": signer.who,
            "key_id": signer.key_id}
    entry = {**body, "digest": _body_digest(body, signer)}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    read.entries.append(entry)
    read.last = entry["digest"]


def _check_head(path: Path, read: _Read | None, new_ledger: bool) -> int:
    """The attempts this user's cache says the ledger held; LedgerError when the ledger is
    shorter than that, or gone (unless `new_ledger`: then the count carries on)."""
    head = _head(path)
    if head is None:
        return 0
    held = int(head.get("attempts") or 0)
    if read is None:
        if new_ledger:
            return held
        raise LedgerError(f"the ledger of attempts {path} is gone, and this account's cache recorded {held} "
                          f"attempt(s) in it: restore it from your copy, or pass --new-ledger to start a new one, "
                          f"which counts on from attempt {held + 1}")
    n = int(head.get("entries") or 0)
    if n and (len(read.entries) < n or read.entries[n - 1]["digest"] != head.get("last")):
        raise LedgerError(f"the ledger of attempts {path} holds {len(read.entries)} entries where this account's "
                          f"cache recorded {n} ending in {str(head.get('last'))[:12]}...: it was cut or replaced. "
                          "Restore it from your copy, or keep it as evidence (move it away) and start a new ledger "
                          f"with --new-ledger, which counts on from attempt {held + 1}")
    return held


def begin(directory: str | os.PathLike[str], fingerprint: str, *, run: str, identity: Mapping[str, Any],
          must_exist: bool = False, new_ledger: bool = False) -> Attempt:
    """Record a new attempt on the cube `fingerprint` and return its number.

    `must_exist` (the deployment profile): a missing ledger is refused unless `new_ledger`
    (the operator says this is the first attempt on this cube here). `identity` is what the
    entry records about the run (model, its fingerprint, the policy's digest and profile)."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LedgerError(f"cannot create the ledger's directory {directory}: {e.strerror or e}; pass a writable "
                          "--ledger=DIR") from None
    path = ledger_path(directory, fingerprint)
    with _locked(path):
        read = _read(path) if path.is_file() else None
        carried = _check_head(path, read, new_ledger)
        if read is not None and read.unchecked and must_exist:
            raise LedgerError(
                f"the ledger of attempts {path} holds {read.unchecked} entries signed with a key not held here (the "
                "site key not set, or another account's secret), so its count cannot be checked: run where the "
                "ledger was written, or with its MEDRCUBE_SIGNING_KEY")
        opened = read is None
        if read is None:
            if must_exist and not new_ledger:
                raise LedgerError(
                    f"no ledger of attempts for this cube (fingerprint {fingerprint}) at {path}: the deployment "
                    "profile runs only with the ledger that counts every earlier attempt on the cube. Pass "
                    "--ledger=DIR where the site keeps it, or, if this is the first qualification run on this cube "
                    "at this site, --new-ledger to start it")
            read = _Read([], GENESIS, carried, {}, 0, carried)
            _append(path, read, {"event": "opened", "cube": fingerprint, "carried": carried})
        number = read.attempts + 1
        _append(path, read, {"event": "attempt", "number": number, "run": run, **dict(identity)})
        read.attempts = number
        _write_head(path, read)
        signer = signing.default_signer()
        earlier = Counter(read.verdicts.values())
        unfinished = number - 1 - sum(earlier.values()) - read.carried
        if unfinished > 0:
            earlier["no verdict"] = unfinished
        if read.carried:
            earlier["carried from an earlier ledger"] = read.carried
        return Attempt(number, path, signer.who, signer.key_id, dict(earlier), read.unchecked, opened)


def conclude(attempt: Attempt, *, run: str, verdict: str, run_id: str) -> None:
    """Record the verdict attempt `attempt` ended in (the run's directory names it)."""
    with _locked(attempt.path):
        read = _read(attempt.path)
        _append(attempt.path, read, {"event": "verdict", "number": attempt.number, "run": run, "verdict": verdict,
                                     "run_id": run_id})
        _write_head(attempt.path, read)


def read_ledger(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The entries of a ledger, its chain checked (LedgerError at a break)."""
    return _read(Path(path)).entries


def ledger_line(attempt: Mapping[str, Any] | None) -> str | None:
    """The verdict block's line: attempt k on this cube, the earlier verdicts, the ledger."""
    if not attempt:
        return None
    earlier = attempt.get("earlier") or {}
    before = ("; earlier: " + ", ".join(f"{n} {v}" for v, n in earlier.items())) if earlier else ""
    key = f" {attempt['key_id']}" if attempt.get("key_id") else ""
    unchecked = f"; {attempt['unchecked']} entries not checkable here" if attempt.get("unchecked") else ""
    return (f"attempt {attempt['number']} on this cube{before} (ledger {attempt['ledger']}, chained under the "
            f"{attempt['signer']}{key}{unchecked}): pass claims at {attempt['pass_level']:.3g}; over these "
            f"{attempt['number']} attempt(s) a false QUALIFIED has probability at most {attempt['across']:.3g}")
