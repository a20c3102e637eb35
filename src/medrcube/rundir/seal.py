"""The seal of a run directory: manifest.json, and its verification (`medrcube verify`).

The writer of a run (the gate's controller, `medrcube run`) seals its directory last:
manifest.json lists every file with its SHA-256, and the run's identity (the policy's
digest and profile, the cube's fingerprint, the model's spec, fingerprint and served
name, the software version, the seed, the run id and token), and is signed with
HMAC-SHA256 under the site key (MEDRCUBE_SIGNING_KEY) when one is set, else bound by a
plain SHA-256 and marked unsigned (run/signing.py).

`verify_run_dir` recomputes everything and says exactly what changed: a file changed,
removed or added, the manifest itself edited, a signed seal that cannot be checked
because no key is set, an unsigned seal while a key is set (re-sealed by someone without
the key). What the seal proves, and what it does not: docs/guarantees.md.

report.html and its plots/ are not sealed: they are a view drawn from the sealed files,
and `medrcube report` redraws them (after verifying them).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from medrcube.run import signing
from medrcube.rundir.files import atomic_write

MANIFEST = "manifest.json"
MANIFEST_SCHEMA_VERSION = 1
# The report's view of the sealed files (report.html and its figures): drawn again by
# `medrcube report` after it verifies them, so never sealed themselves.
UNSEALED = frozenset({MANIFEST, "report.html"})
# dossier/: the validation dossier (`medrcube dossier`), a view of the sealed files too.
UNSEALED_DIRS = ("plots/", "dossier/")


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _sealed_files(run_dir: Path) -> dict[str, str]:
    """{path relative to run_dir (POSIX): sha256} of every file the seal covers."""
    out: dict[str, str] = {}
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir).as_posix()
        # atomic_write's temporary files (".name.xxx.tmp") are in flight, never part of a run.
        if rel in UNSEALED or rel.startswith(UNSEALED_DIRS) or (path.name.startswith(".") and path.name.endswith(".tmp")):
            continue
        if path.is_file():
            out[rel] = file_digest(path)
    return out


def _body_digest(body: Mapping[str, Any], key: bytes | None) -> str:
    return signing.digest(signing.canonical(body), key)


def seal_run_dir(run_dir: str | os.PathLike[str], identity: Mapping[str, Any]) -> Path:
    """Write manifest.json over every file now in `run_dir` (module docstring)."""
    run_dir = Path(run_dir)
    key = signing.signing_key()
    body = {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "sealed_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "identity": dict(identity),
        "files": _sealed_files(run_dir),
    }
    doc = {**body, "signature": {"method": signing.method(key), "digest": _body_digest(body, key)}}
    path = run_dir / MANIFEST
    atomic_write(path, lambda fh: json.dump(doc, fh, indent=2, ensure_ascii=False))
    return path


@dataclass
class SealCheck:
    """What `verify_run_dir` found: `problems` empty means the directory verifies."""

    run_dir: Path
    problems: list[str] = field(default_factory=list)
    method: str | None = None  # hmac-sha256 (signed) or sha256 (unsigned), as the manifest says
    identity: dict[str, Any] = field(default_factory=dict)
    files: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def signed(self) -> bool:
        return self.method == signing.HMAC

    def describe(self) -> str:
        """One line: verified (signed or unsigned) or what failed."""
        if self.ok:
            how = "signed with the site key (HMAC-SHA256)" if self.signed else (
                "UNSIGNED (plain SHA-256: finds accidental and naive edits only; set MEDRCUBE_SIGNING_KEY to sign)")
            return f"{self.run_dir}: verified, {self.files} files sealed, {how}"
        return f"{self.run_dir}: FAILED verification: " + "; ".join(self.problems)


def verify_run_dir(run_dir: str | os.PathLike[str]) -> SealCheck:
    """Check `run_dir` against its manifest.json (module docstring) under the key now set."""
    from medrcube.rundir.reading import RunDirError, read_json_object

    run_dir = Path(run_dir)
    check = SealCheck(run_dir)
    manifest = run_dir / MANIFEST
    if not manifest.is_file():
        check.problems.append(f"{MANIFEST}: missing, the directory is not sealed (written before medrcube sealed "
                              "runs, or the manifest was removed): its files cannot be verified")
        return check
    try:
        doc = read_json_object(manifest)
    except RunDirError as e:
        check.problems.append(f"{MANIFEST}: {e}")
        return check
    signature = doc.pop("signature", None)
    files = doc.get("files")
    if not isinstance(signature, dict) or not isinstance(files, dict) or not isinstance(doc.get("identity"), dict):
        check.problems.append(f"{MANIFEST}: not a manifest (no signature, files or identity)")
        return check
    check.method, check.identity, check.files = signature.get("method"), dict(doc["identity"]), len(files)
    _check_signature(check, doc, signature)
    now = _sealed_files(run_dir)
    for name, digest in sorted(files.items()):
        if name not in now:
            check.problems.append(f"{name}: removed after sealing")
        elif now[name] != digest:
            check.problems.append(f"{name}: changed after sealing (sha256 {now[name][:12]}..., sealed {str(digest)[:12]}...)")
    check.problems += [f"{name}: added after sealing" for name in sorted(set(now) - set(files))]
    return check


def _check_signature(check: SealCheck, body: Mapping[str, Any], signature: Mapping[str, Any]) -> None:
    key = signing.signing_key()
    method, digest = signature.get("method"), signature.get("digest")
    if method not in (signing.HMAC, signing.PLAIN) or not isinstance(digest, str):
        check.problems.append(f"{MANIFEST}: unknown signature method {method!r}")
    elif method == signing.HMAC and key is None:
        check.problems.append(f"{MANIFEST}: sealed with a site key, and MEDRCUBE_SIGNING_KEY is not set here: set it "
                              "to the site's key to verify the seal")
    elif method == signing.PLAIN and key is not None:
        check.problems.append(f"{MANIFEST}: sealed without the site key (an unsigned, plain SHA-256 seal) while "
                              "MEDRCUBE_SIGNING_KEY is set: the directory was re-sealed by someone without the key, "
                              "or sealed before the key was set; it cannot be trusted as this site's record")
    elif not signing.matches(signing.canonical(body), digest, key if method == signing.HMAC else None):
        check.problems.append(f"{MANIFEST}: its signature does not verify: the manifest was edited after sealing"
                              + (", or sealed with another key" if method == signing.HMAC else ""))
