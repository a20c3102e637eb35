"""Figures derived from a cube's content, cached on disk across runs: authenticated, keyed by content.

The gate's start-up computes things that depend only on the cube's items, the policy and
the code (the leakage audit: seconds of CPU; the feasibility pass). They are cached by a
key that is the SHA-256 of everything they are computed from (the caller passes the
parts: a digest of the items' content, the policy's digest, a digest of the source code
that computes them), so a changed cube, policy or algorithm is a miss, never a stale hit.

An adversary who can write files must not be able to plant an entry that passes a leaky
cube: every entry carries an HMAC-SHA256 of its key and value under a secret of 32 random
bytes (`secret.key`, created 0600 in a 0700 cache directory on first use), so an entry is
trusted only if this user's cache wrote it. An entry that is missing, unreadable, not
JSON, under another key or with a wrong MAC is treated as absent: recomputed and
rewritten. The value is JSON, never pickle (reading an entry runs no code).

Where: `MEDRCUBE_CACHE_DIR`, else `$XDG_CACHE_HOME/medrcube`, else `~/.cache/medrcube`;
`MEDRCUBE_CACHE_DIR=off` (or a directory that cannot be written) computes every time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import hmac
import importlib.util
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from medrcube.cube.item import Item

T = TypeVar("T")
OFF = "off"


def cache_root() -> Path | None:
    """The cache directory, or None when caching is off (module docstring)."""
    env = os.environ.get("MEDRCUBE_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in (OFF, "") else Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "medrcube"


def user_secret() -> bytes | None:
    """This user's secret (the cache's `secret.key`): it also authenticates the response
    store's answers and the ledger of attempts (run/signing.py). Kept in the cache directory,
    or where the cache would be when caching is off; None where it cannot be kept."""
    root = cache_root()
    if root is None:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = (Path(xdg) if xdg else Path.home() / ".cache") / "medrcube"
    try:
        return _secret(root)
    except OSError:
        return None


def source_digest(files: Iterable[str | os.PathLike[str]]) -> str:
    """SHA-256 over the bytes of the given source files (the code a cached value came from)."""
    h = hashlib.sha256()
    for f in sorted(str(p) for p in files):
        h.update(Path(f).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def module_file(name: str) -> str:
    """The source file of module `name`, found without importing it: for a key over code
    whose import a hit does not need (numpy) or that would make a cycle."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"no source file for {name}")
    return spec.origin


def items_digest(items: Iterable[Item]) -> str:
    """SHA-256 over every item's full content, in order: the key of what is derived from a
    cube's items (here, not in audit_cache.py, so that keying needs no audit code or numpy)."""
    h = hashlib.sha256()
    for it in items:
        h.update(json.dumps(it.to_dict(), sort_keys=True, default=str).encode())
        h.update(b"\n")
    return h.hexdigest()


def canonical(x: Any) -> Any:
    """`x` as JSON that is the same in every process: dataclasses as their fields, sets
    sorted, enums as their values (a repr would differ where a set's order does)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: canonical(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, enum.Enum):
        return canonical(x.value)
    if isinstance(x, Mapping):
        return {str(k): canonical(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, (set, frozenset)):
        return sorted((canonical(v) for v in x), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(x, (list, tuple)):
        return [canonical(v) for v in x]
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    return repr(x)


def digest_of(x: Any) -> str:
    """SHA-256 of `canonical(x)`."""
    return hashlib.sha256(json.dumps(canonical(x), sort_keys=True).encode()).hexdigest()


def package_sources(*dirs: str | os.PathLike[str]) -> list[Path]:
    """The Python files under the given package directories (for `source_digest`)."""
    return [p for d in dirs for p in sorted(Path(d).rglob("*.py"))]


# The secret last read from each cache directory, with the identity of its file (device, inode,
# size, modification time): every entry of the cache is opened with the secret (the image
# checks' once per image prepared, while the requests are out), and one stat that finds the
# same file stands for the directory's creation, the exclusive create and the read (4 system
# calls and a read: docs/speed.md). Another file there (replaced, deleted and made afresh) is read.
_SECRETS: dict[str, tuple[tuple[int, int, int, int], bytes]] = {}


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _secret(root: Path) -> bytes:
    path = root / "secret.key"
    seen = _SECRETS.get(str(path))
    with contextlib.suppress(OSError):
        if seen is not None and seen[0] == _identity(os.stat(path)):
            return seen[1]
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        with open(path, "rb") as fh:
            key = fh.read()
            st = os.fstat(fh.fileno())
        if len(key) != 32:
            raise OSError(f"{path}: not a cache secret (delete it to start the cache afresh)") from None
    else:
        key = os.urandom(32)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
            f.flush()
            st = os.fstat(f.fileno())
    _SECRETS[str(path)] = (_identity(st), key)
    return key


def _mac(secret: bytes, key: str, value_json: str) -> str:
    return hmac.new(secret, f"{key}\n{value_json}".encode(), hashlib.sha256).hexdigest()


def cached(kind: str, parts: Any, compute: Callable[[], T], encode: Callable[[T], Any],
           decode: Callable[[Any], T]) -> T:
    """`compute()`, or the value this user's cache holds for (`kind`, `parts`).

    `parts` is JSON (the digests the value is a function of); `encode` turns the value into
    JSON and `decode` back (it may raise on a malformed value: that entry is then absent)."""
    slot = Slot.open(kind, parts)
    if slot is None:
        return compute()
    hit = slot.read(decode)
    if hit is not None:
        return hit[0]
    value = compute()
    slot.write(encode(value))
    return value


@dataclasses.dataclass(frozen=True)
class Slot:
    """One entry of the cache, for a caller that reads it and writes it at different times
    (the image checks of a cube: read before the images are looked at, rewritten after)."""

    path: Path
    secret: bytes
    key: str

    @classmethod
    def open(cls, kind: str, parts: Any) -> Slot | None:
        """The entry for (`kind`, `parts`); None when caching is off or cannot be used."""
        root = cache_root()
        if root is None:
            return None
        key = hashlib.sha256(json.dumps([kind, parts], sort_keys=True).encode()).hexdigest()
        try:
            secret = _secret(root)
        except OSError:
            return None
        return cls(root / kind / f"{key}.json", secret, key)

    def read(self, decode: Callable[[Any], T]) -> tuple[T] | None:
        """(the value,) when this user's cache wrote it under this key, else None."""
        return _read(self.path, self.secret, self.key, decode)

    def read_as(self, decode: Callable[[Any], T], mac: str) -> tuple[T] | None:
        """`read`, only if the entry's MAC is `mac` (what a caller recorded when it wrote the
        entry: so that the value read is that very one, not one written since)."""
        try:
            text = self.path.read_text(encoding="utf-8")
            laid = _LAYOUT.fullmatch(text)
            if laid is None or laid[1] != self.key or laid[2] != mac or not hmac.compare_digest(
                    laid[2], _mac(self.secret, self.key, laid[3])):
                return None
            return (decode(json.loads(laid[3])),)
        except Exception:  # noqa: BLE001 - a corrupt entry of any shape is simply absent
            return None

    def write(self, value: Any) -> None:
        _write(self.path, self.secret, self.key, value)

    def mac(self, *, verify: bool) -> str | None:
        """The MAC of the entry as it lies in its file, if good (`verify`: the whole entry
        read and checked), else None. What names the value the entry holds: another value
        under this key has another MAC (cube/snapshot.py records it)."""
        if not verify:
            return entry_mac(self.path)
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        laid = _LAYOUT.fullmatch(text)
        if laid is None or laid[1] != self.key or not hmac.compare_digest(laid[2], _mac(self.secret, self.key, laid[3])):
            return None
        return laid[2]


def entry_mac(path: Path) -> str | None:
    """The MAC at the head of the entry file `path` (in `_write`'s layout, under the key its
    name gives), not verified: only its head is read. For a caller that recorded a verified
    MAC and asks whether the entry still holds the same value."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
    except OSError:
        return None
    m = _HEAD_LAYOUT.match(head)
    return m[2].decode() if m is not None and path.name == m[1].decode() + ".json" else None


# How `_write` lays an entry out (json.dumps of {"key", "mac", "value"} with sorted keys).
# `_read` takes the value's text from between these and checks the MAC over that very
# text: one parse of the value and no second serialisation (the cost of a large entry).
_LAYOUT = re.compile(r'\{"key": "([0-9a-f]{64})", "mac": "([0-9a-f]{64})", "value": (.*)\}', re.DOTALL)
_HEAD_LAYOUT = re.compile(rb'\{"key": "([0-9a-f]{64})", "mac": "([0-9a-f]{64})", "value": ')
_HEAD = 160  # bytes: the layout's head, up to the value


def _read(path: Path, secret: bytes, key: str, decode: Callable[[Any], T]) -> tuple[T] | None:
    try:
        text = path.read_text(encoding="utf-8")
        laid = _LAYOUT.fullmatch(text)
        if laid is not None:
            if laid[1] != key or not hmac.compare_digest(laid[2], _mac(secret, key, laid[3])):
                return None
            return (decode(json.loads(laid[3])),)
        doc = json.loads(text)  # any other layout of the same document
        value_json = json.dumps(doc["value"], sort_keys=True)
        if doc.get("key") != key or not hmac.compare_digest(str(doc.get("mac", "")), _mac(secret, key, value_json)):
            return None
        return (decode(doc["value"]),)
    except Exception:  # noqa: BLE001 - a corrupt entry of any shape is simply absent
        return None


def _write(path: Path, secret: bytes, key: str, value: Any) -> None:
    value_json = json.dumps(value, sort_keys=True)
    # json.dumps({"key": key, "mac": ..., "value": value}, sort_keys=True), the value's
    # text made once (json.dump to a file would encode it again, in pure Python)
    text = f'{{"key": {json.dumps(key)}, "mac": {json.dumps(_mac(secret, key, value_json))}, "value": {value_json}}}'
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written costs a recomputation next time, nothing else
