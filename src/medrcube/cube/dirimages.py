"""Images of a cube that lives in a directory (release layout or JSON Lines beside images).

A path read from a cube file is untrusted: it must be relative, stay inside the cube
root lexically (no `..` escape) and physically (no symlink pointing out). The key of an
image is its posix path relative to the root. Every distinct image is read exactly once,
on the calling thread (a pool of threads is optional: from the page cache it cost more CPU
than it saved), unless this user's cache remembers the check of that very file
(cube/image_cache.py: same device, inode, size, mtime and ctime); the header checks run
on the calling thread (Pillow's warnings state is global).

Every read goes through one handle (`read_regular`), checked before a byte is read: a
regular file (a FIFO would block the read forever, a device never end), no larger than
`MAX_IMAGE_BYTES` (a sparse 1 GiB "PNG" costs nothing on disk and a gigabyte in memory).
At run time (`reader`) the file is opened at the real path resolved at load with
O_NOFOLLOW, so an image swapped for a symlink during a run is refused, and its bytes must
hash to the digest taken at load: what is sent is what was validated and keyed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from medrcube.cube.image_cache import SETTLE_NS, ImageChecks
from medrcube.cube.images import DEFAULT_MAX_PIXELS, ImageCheck, check_image_bytes, sha256

# The largest image file read (bytes). A 16-bit 4,000 x 5,000 mammogram stored
# uncompressed is 40 MB; anything past this is a mistake or an attack.
MAX_IMAGE_BYTES = 128 * 1024 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # opening a FIFO must not wait for a writer


class ImageFileError(OSError):
    """An image path that is not a readable regular file within the limit."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.strerror = message


def read_regular(path: str, *, nofollow: bool = False, max_bytes: int = MAX_IMAGE_BYTES) -> bytes:
    """The bytes of the regular file at `path`, read once through one handle whose type
    and size are checked (fstat) before reading. Raises ImageFileError (or OSError)."""
    return read_regular_stat(path, nofollow=nofollow, max_bytes=max_bytes)[0]


def read_regular_stat(path: str, *, nofollow: bool = False, max_bytes: int = MAX_IMAGE_BYTES) -> tuple[bytes, os.stat_result]:
    """`read_regular`, with the fstat of the handle taken before the read (what the image
    checks' cache keys an entry by: a write after it changes the file's ctime)."""
    flags = os.O_RDONLY | _NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (_NOFOLLOW if nofollow else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if nofollow and exc.errno == 40:  # ELOOP: the last component became a symlink
            raise ImageFileError("image_symlink_escapes", f"{path} is now a symlink; refused") from exc
        raise
    with os.fdopen(fd, "rb", buffering=0) as fh:
        st = _regular_stat(fd, max_bytes)
        # Asked for the size fstat gave plus one byte (a file that grew shows it), then,
        # only if it grew, for the rest up to the limit plus one: asking for the limit
        # itself would have the read allocate 128 MiB for every image (2.4x its CPU).
        data = fh.read(st.st_size + 1)
        if len(data) > st.st_size:
            data += fh.read(max_bytes + 1 - len(data))
        if len(data) > max_bytes:  # grew while being read
            raise ImageFileError("image_too_large", f"grew past the limit of {max_bytes} bytes while being read")
        return bytes(data), st


def _regular_stat(fd: int, max_bytes: int) -> os.stat_result:
    """The fstat of `fd`, which must be a regular file within `max_bytes`, else ImageFileError."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise ImageFileError("image_not_a_file", f"is {kind}, not a regular file; expected an image file")
    if st.st_size > max_bytes:
        raise ImageFileError("image_too_large", f"is {st.st_size} bytes, over the limit of {max_bytes} bytes "
                             f"({max_bytes // (1024 * 1024)} MiB); expected an image file of a sensible size")
    return st


def open_regular_stat(path: str, *, nofollow: bool = False, max_bytes: int = MAX_IMAGE_BYTES) -> os.stat_result:
    """The checks of `read_regular_stat` without the read: the file opens for reading as
    this process, is a regular file within the limit; its fstat. Raises as it does;
    `nofollow`: a last component that is a symlink raises OSError (ELOOP) instead."""
    fd = os.open(path, os.O_RDONLY | _NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (_NOFOLLOW if nofollow else 0))
    try:
        return _regular_stat(fd, max_bytes)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class Resolved:
    """A path checked against the root: `key` when it may be read, else an error reason."""

    key: str | None
    reason: str | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class FileCheck:
    """The outcome of reading one image file: `missing`, an ImageCheck, or a read error."""

    missing: bool = False
    check: ImageCheck | None = None
    read_error: str | None = None
    read_reason: str = "image_unreadable"  # the reason code of a read error


class DirImages:
    """Resolves, reads and checks the image files of one directory cube.

    `workers` > 1 reads and hashes on that many threads; the default, 1, reads on the
    calling thread: measured on the bundled cube from the page cache, the pool cost more
    CPU than it saved wall time (the GIL; hashing 12 MB is 8 ms). `remember` lets the
    checks of unchanged files come from this user's cache (cube/image_cache.py)."""

    def __init__(self, root: str | os.PathLike[str], *, max_pixels: int = DEFAULT_MAX_PIXELS, workers: int = 1,
                 remember: bool = True, settle_ns: int = SETTLE_NS):
        self.root = os.path.realpath(root)
        self.max_pixels = max_pixels
        self.workers = workers
        self.remember = remember
        self.settle_ns = settle_ns
        self.remembered = 0  # images whose check came from the cache in the last check_all
        self.checks_cache: ImageChecks | None = None  # the cache of the last check_all (cube/snapshot.py reads it)
        self._prefix = self.root.rstrip(os.sep) + os.sep
        self._memo: dict[tuple[str, str], Resolved] = {}
        self._real: dict[str, str] = {}  # key -> the real path checked inside the root at resolve
        self._dirs: dict[str, str] = {}  # folder -> its realpath

    def _inside(self, path: str) -> bool:
        return path == self.root or path.startswith(self._prefix)

    def resolve(self, base: str, ref: str) -> Resolved:
        """Check `ref` (as written in a cube file, relative to directory `base`).

        Memoised: the items of a chain share an image, and realpath costs a stat per
        path component."""
        hit = self._memo.get((base, ref))
        if hit is None:
            hit = self._memo[(base, ref)] = self._resolve(base, ref)
        return hit

    def _realpath(self, lexical: str) -> str:
        """os.path.realpath(lexical), its folder's part resolved once per folder.

        realpath resolves a path's components left to right, so for a last component that
        is not a symlink (or does not exist: it is kept as written) the result is the
        folder's realpath joined with the name; a symlink is resolved whole."""
        head, name = os.path.split(lexical)
        try:
            link = stat.S_ISLNK(os.lstat(lexical).st_mode)
        except OSError:
            link = False
        if link or not name:
            return os.path.realpath(lexical)
        folder = self._dirs.get(head)
        if folder is None:
            folder = self._dirs[head] = os.path.realpath(head)
        return os.path.join(folder, name)

    def _resolve(self, base: str, ref: str) -> Resolved:
        if "\x00" in ref:
            return Resolved(None, "image_path_escapes", f"image_path {ref!r} contains a NUL byte; expected a relative path")
        if os.path.isabs(ref) or ref.startswith(("/", "\\")) or (len(ref) > 1 and ref[1] == ":"):
            return Resolved(
                None, "image_path_absolute", f"image_path {ref!r} is absolute; expected a path relative to {_rel(base, self.root)!r}"
            )
        lexical = os.path.normpath(os.path.join(base, ref))
        if not self._inside(lexical):
            return Resolved(
                None,
                "image_path_escapes",
                f"image_path {ref!r} resolves to {lexical!r}, outside the cube root {self.root!r}; expected a path inside the cube",
            )
        real = self._realpath(lexical)
        if not self._inside(real):
            return Resolved(
                None,
                "image_symlink_escapes",
                f"image_path {ref!r} goes through a symlink to {real!r}, outside the cube root {self.root!r}; "
                "expected the image file itself inside the cube",
            )
        # relpath of a normalised path inside the root is the text after the root's prefix
        key = "." if lexical == self.root else lexical[len(self._prefix):].replace(os.sep, "/")
        self._real.setdefault(key, real)
        return Resolved(key)

    def plain_key(self, folder: str, ref: str) -> str | None:
        """The key `resolve(join(root, folder), ref)` gives, found from the text alone when
        it can be: `folder` (relative to the root) and `ref` relative, no component of
        either empty, "." or "..", no NUL, this system's separator "/", and the real path of
        the image's folder inside the root. Else None: resolve it. Whether the image file
        itself is a symlink is not looked at (`resolve` would follow it): the caller knows
        that by opening it without following (cube/snapshot.py)."""
        if os.sep != "/" or not ref or "\x00" in ref or "\x00" in folder or ref[0] in "/\\" or ref[1:2] == ":":
            return None
        rel = f"{folder}/{ref}" if folder else ref
        head, _, _ = rel.rpartition("/")
        if any(part in ("", ".", "..") for part in rel.split("/")):
            return None
        lexical_head = self._prefix + head if head else self.root
        real_head = self._dirs.get(lexical_head)
        if real_head is None:
            real_head = self._dirs[lexical_head] = os.path.realpath(lexical_head)
        if not self._inside(real_head):
            return None
        self._real.setdefault(rel, os.path.join(real_head, rel[len(head) + 1:] if head else rel))  # as resolve keeps it
        return rel

    def path(self, key: str) -> str:
        if os.sep == "/":
            return self._prefix + key  # a key is a normalised posix path inside the root
        return os.path.join(self.root, *key.split("/"))

    def _read(self, key: str) -> tuple[str, FileCheck | None, bytes | None, str | None, os.stat_result | None]:
        """(key, a final FileCheck when the read failed, else the bytes, their sha256 and the
        handle's fstat)."""
        try:
            data, st = read_regular_stat(self.path(key))
        except FileNotFoundError:
            return key, FileCheck(missing=True), None, None, None
        except ImageFileError as exc:
            return key, FileCheck(read_error=str(exc), read_reason=exc.reason), None, None, None
        except OSError as exc:  # a directory, no permission, an I/O error
            return key, FileCheck(read_error=f"{type(exc).__name__}: {exc.strerror or exc}"), None, None, None
        return key, None, data, sha256(data), st

    def _remembered(self, keys: list[str], cache: ImageChecks) -> dict[str, FileCheck]:
        """The keys whose file is unchanged since the cache saw it (opened and fstat'd, not
        read: a file this process cannot open, or no longer a regular file, is read below
        and reported as before)."""
        out: dict[str, FileCheck] = {}
        for key in keys:
            try:
                st = open_regular_stat(self.path(key))
            except OSError:
                continue
            check = cache.get(key, st)
            if check is not None:
                out[key] = FileCheck(check=check)
        return out

    def check_all(self, keys: Iterable[str]) -> dict[str, FileCheck]:
        """Read each distinct key once: hash and header from the same bytes, no decoding."""
        unique = list(dict.fromkeys(keys))
        cache = ImageChecks(self.root, max_pixels=self.max_pixels, max_bytes=MAX_IMAGE_BYTES,
                            settle_ns=self.settle_ns) if self.remember else None
        self.checks_cache = cache
        done = {} if cache is None else self._remembered(unique, cache)
        self.remembered = len(done)
        todo = [k for k in unique if k not in done]
        # Bounded chunks keep memory at (chunk x image size) whatever the cube size.
        chunk = 64
        pool = ThreadPoolExecutor(max_workers=self.workers) if self.workers > 1 and len(todo) > 1 else None
        try:
            for start in range(0, len(todo), chunk):
                part = todo[start : start + chunk]
                for key, failed, data, digest, st in (pool.map(self._read, part) if pool else map(self._read, part)):
                    if failed is not None or data is None:
                        done[key] = failed or FileCheck(read_error="no data")
                        continue
                    check = check_image_bytes(data, max_pixels=self.max_pixels, digest=digest)
                    done[key] = FileCheck(check=check)
                    if cache is not None and st is not None:
                        cache.put(key, st, check)
        finally:
            if pool is not None:
                pool.shutdown()
        if cache is not None:
            cache.save()
        return {k: done[k] for k in unique}

    def reader(self, digests: Mapping[str, str]) -> Callable[[str], bytes]:
        """`Cube.read_image`: only keys validated at load are readable (never a path from outside)."""

        # links inside the cube, resolved once: at resolve (checked inside the root there)
        real = {k: self._real.get(k) or os.path.realpath(self.path(k)) for k in digests}

        def read_image(key: str) -> bytes:
            if key not in digests:
                raise KeyError(f"{key!r} is not an available image of the cube at {self.root}")
            data = read_regular(real[key], nofollow=True)
            if sha256(data) != digests[key]:
                raise ImageFileError("image_changed", f"image {key!r} changed since the cube was loaded (its "
                                     "sha256 differs); refused: load the cube again")
            return data

        return read_image


def _rel(path: str, root: str) -> str:
    rel = os.path.relpath(path, root)
    return "." if rel == "." else rel.replace(os.sep, "/")
