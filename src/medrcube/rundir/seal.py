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

The page a reader sees, report.html and its plots/, is drawn after the seal (at the end of a
run by a detached process, report/after_exit.py; again by `medrcube report`), so it has a
seal of its own, written by whoever draws it (`seal_page`): report.seal.json lists the
page's files with their SHA-256, the verdict the page shows and the SHA-256 of manifest.json
(the page belongs to this run's seal), signed as the manifest is. `verify_run_dir` checks it
too: a page file changed, removed or added fails; a page that is not sealed fails, unless it
is the placeholder shown while the page is being drawn (or after drawing failed), which shows
no verdict; and a page whose verdict differs from gate.json's fails whatever its seal says
(a plain seal can be recomputed; gate.json is under the run's seal).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from medrcube.run import signing
from medrcube.rundir.files import Landed, atomic_write, file_identity, file_sha256
from medrcube.rundir.jsontext import indented

MANIFEST = "manifest.json"
MANIFEST_SCHEMA_VERSION = 1
PAGE_SEAL = "report.seal.json"  # the page's own seal (module docstring)
PAGE = "report.html"
# The page a reader sees (report.html and its figures): drawn after the run's seal, so under
# the page's seal instead (`seal_page`).
UNSEALED = frozenset({MANIFEST, PAGE_SEAL, PAGE})
UNSEALED_DIRS = ("plots/",)
# dossier/: the validation dossier (`medrcube dossier`), made later from the sealed files and
# checked on its own by `medrcube verify` (commands/verify.py): under neither seal.
OWN_CHECK_DIRS = ("dossier/",)
# The placeholders report/after_exit.py writes while the page is drawn, or when drawing failed.
PAGE_PENDING = '<meta name="medrcube-report" content="pending">'
PAGE_FAILED = '<meta name="medrcube-report" content="failed">'
VERDICT_WORDS = ("NOT QUALIFIED", "QUALIFIED", "UNDECIDED", "NO GATE RUN")
_SHOWN = re.compile(r'<div class="word">\s*([^<]*?)\s*</div>')


file_digest = file_sha256


def _sealed_files(run_dir: Path, *, page: bool = False, landed: Mapping[Path, Landed] | None = None) -> dict[str, str]:
    """{path relative to run_dir (POSIX): sha256} of every file the run's seal covers, or
    (`page`) of the page's files (report.html, plots/). `landed`: digests taken as files were
    put in place (rundir/files.Landing), used for a file whose identity has not changed since."""
    out: dict[str, str] = {}
    landed = landed or {}
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir).as_posix()
        # atomic_write's temporary files (".name.xxx.tmp") are in flight, never part of a run.
        if (path.name.startswith(".") and path.name.endswith(".tmp")) or rel.startswith(OWN_CHECK_DIRS):
            continue
        in_page = rel == PAGE or rel.startswith(UNSEALED_DIRS)
        if (in_page if page else rel not in UNSEALED and not in_page) and path.is_file():
            known = landed.get(path)
            out[rel] = known.sha256 if known is not None and known.identity == file_identity(path) else file_digest(path)
    return out


def shown_verdicts(page_text: str) -> list[str]:
    """The gate verdicts a drawn report.html shows in its verdict block(s)."""
    return _SHOWN.findall(page_text)


def _placeholder(page_text: str) -> bool:
    """The page shown while report.html is drawn (or after drawing failed): no verdict in it."""
    upper = page_text.upper()
    return (PAGE_PENDING in page_text or PAGE_FAILED in page_text) and not any(w in upper for w in VERDICT_WORDS)


def seal_page(run_dir: str | os.PathLike[str], text: str | None = None) -> Path:
    """Write report.seal.json over the page's files (module docstring). `text`: the page about
    to be written as report.html (its figures are in place): sealed first, so that while the
    page is written the directory shows the placeholder with its seal, never a drawn page
    without one."""
    run_dir = Path(run_dir)
    key = signing.signing_key()
    manifest = run_dir / MANIFEST
    files = _sealed_files(run_dir, page=True)
    if text is None:
        text = (run_dir / PAGE).read_text(encoding="utf-8") if (run_dir / PAGE).is_file() else ""
    else:
        files[PAGE] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    body = {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "sealed_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "manifest": file_digest(manifest) if manifest.is_file() else None,
        "verdicts_shown": shown_verdicts(text),
        "files": dict(sorted(files.items())),
    }
    doc = {**body, "signature": {"method": signing.method(key), "digest": _body_digest(body, key)}}
    path = run_dir / PAGE_SEAL
    atomic_write(path, lambda fh: fh.write(indented(doc)))
    return path


def _body_digest(body: Mapping[str, Any], key: bytes | None) -> str:
    return signing.digest(signing.canonical(body), key)


def seal_run_dir(run_dir: str | os.PathLike[str], identity: Mapping[str, Any], *,
                 landed: Mapping[Path, Landed] | None = None) -> Path:
    """Write manifest.json over every file now in `run_dir` (module docstring); `landed`, the
    digests its Landing took of the files it put in place (read again if changed since)."""
    run_dir = Path(run_dir)
    key = signing.signing_key()
    body = {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "sealed_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "identity": dict(identity),
        "files": _sealed_files(run_dir, landed=landed),
    }
    doc = {**body, "signature": {"method": signing.method(key), "digest": _body_digest(body, key)}}
    path = run_dir / MANIFEST
    atomic_write(path, lambda fh: fh.write(indented(doc)))
    return path


@dataclass
class SealCheck:
    """What `verify_run_dir` found: `problems` empty means the directory verifies."""

    run_dir: Path
    problems: list[str] = field(default_factory=list)
    method: str | None = None  # hmac-sha256 (signed) or sha256 (unsigned), as the manifest says
    identity: dict[str, Any] = field(default_factory=dict)
    files: int = 0
    page: str = "absent"  # report.html: sealed, absent, pending (being drawn) or failed (drawing failed)
    page_files: int = 0  # the page's files under its seal

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
            page = {"sealed": f"; report.html and {self.page_files - 1} figure(s) under the page's seal",
                    "pending": "; report.html: NOT SEALED, still being drawn (verify again once it is drawn)",
                    "failed": "; report.html: NOT SEALED, drawing failed (`medrcube report` draws and seals it)",
                    }.get(self.page, "; no report.html")
            return f"{self.run_dir}: verified, {self.files} files sealed, {how}{page}"
        return f"{self.run_dir}: FAILED verification: " + "; ".join(self.problems)


def verify_run_dir(run_dir: str | os.PathLike[str], *, page: bool = True, drawing: bool = True) -> SealCheck:
    """Check `run_dir` against its manifest.json (module docstring) under the key now set;
    `page`: the page's seal and verdict too (a reader of the run's data, which draws the page
    again, passes False); `drawing`: while the placeholder says the page is being drawn, its
    figures may already be there, unsealed (False: they fail, as after a drawer that died)."""
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
    if page:
        _check_page(check, manifest, drawing)
    return check


def _check_page(check: SealCheck, manifest: Path, drawing: bool) -> None:
    """The page's seal and the verdict it shows (module docstring)."""
    from medrcube.rundir.reading import RunDirError, read_json_object

    run_dir = check.run_dir
    now = _sealed_files(run_dir, page=True)
    text = (run_dir / PAGE).read_text(encoding="utf-8", errors="replace") if PAGE in now else ""
    try:
        gate = read_json_object(run_dir / "gate.json") if (run_dir / "gate.json").is_file() else {}
    except RunDirError:
        gate = {}  # the strict reader says what is wrong with it (commands/verify.py)
    expected = str(gate.get("verdict")) if gate.get("verdict") else "NO GATE RUN"
    shown = shown_verdicts(text)
    if any(v != expected for v in shown):
        check.problems.append(f"{PAGE}: shows the verdict {', '.join(sorted(set(shown)))}, gate.json says {expected}")
    if PAGE in now and _placeholder(text):  # being drawn, or drawing failed: the page shows no verdict
        check.page = "pending" if PAGE_PENDING in text else "failed"
        if not (drawing and check.page == "pending"):
            check.problems += [f"{name}: not sealed (report.html is the placeholder: `medrcube report` draws and "
                               "seals the page)" for name in sorted(set(now) - {PAGE})]
        return
    if not (run_dir / PAGE_SEAL).is_file():
        check.problems += [f"{name}: not sealed (no {PAGE_SEAL}: drawn or added after the run, by someone else than "
                           "medrcube)" for name in sorted(now)]
        return
    try:
        doc = read_json_object(run_dir / PAGE_SEAL)
    except RunDirError as e:
        check.problems.append(f"{PAGE_SEAL}: {e}")
        return
    signature, files = doc.pop("signature", None), doc.get("files")
    if not isinstance(signature, dict) or not isinstance(files, dict):
        check.problems.append(f"{PAGE_SEAL}: not a seal (no signature or files)")
        return
    before = len(check.problems)
    _check_signature(check, doc, signature, PAGE_SEAL)
    if manifest.is_file() and doc.get("manifest") != file_digest(manifest):
        check.problems.append(f"{PAGE_SEAL}: sealed over another manifest.json: the page is not this run's")
    for name, digest in sorted(files.items()):
        if name not in now:
            check.problems.append(f"{name}: removed after the page was sealed")
        elif now[name] != digest:
            check.problems.append(f"{name}: changed after the page was sealed (sha256 {now[name][:12]}..., sealed "
                                  f"{str(digest)[:12]}...)")
    check.problems += [f"{name}: added after the page was sealed" for name in sorted(set(now) - set(files))]
    if len(check.problems) == before:
        check.page, check.page_files = "sealed", len(files)


def _check_signature(check: SealCheck, body: Mapping[str, Any], signature: Mapping[str, Any],
                     name: str = MANIFEST) -> None:
    key = signing.signing_key()
    method, digest = signature.get("method"), signature.get("digest")
    if method not in (signing.HMAC, signing.PLAIN) or not isinstance(digest, str):
        check.problems.append(f"{name}: unknown signature method {method!r}")
    elif method == signing.HMAC and key is None:
        check.problems.append(f"{name}: sealed with a site key, and MEDRCUBE_SIGNING_KEY is not set here: set it "
                              "to the site's key to verify the seal")
    elif method == signing.PLAIN and key is not None:
        check.problems.append(f"{name}: sealed without the site key (an unsigned, plain SHA-256 seal) while "
                              "MEDRCUBE_SIGNING_KEY is set: the directory was re-sealed by someone without the key, "
                              "or sealed before the key was set; it cannot be trusted as this site's record")
    elif not signing.matches(signing.canonical(body), digest, key if method == signing.HMAC else None):
        check.problems.append(f"{name}: its signature does not verify: it was edited after sealing"
                              + (", or sealed with another key" if method == signing.HMAC else ""))
