"""Images of a cube that lives in a directory (release layout or JSON Lines beside images).

A path read from a cube file is untrusted: it must be relative, stay inside the cube
root lexically (no `..` escape) and physically (no symlink pointing out). The key of an
image is its posix path relative to the root. Every distinct image is read exactly once;
the reads and hashes run on a few threads (hashlib releases the GIL), the header checks on
the calling thread (Pillow's warnings state is global).

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
    flags = os.O_RDONLY | _NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (_NOFOLLOW if nofollow else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if nofollow and exc.errno == 40:  # ELOOP: the last component became a symlink
            raise ImageFileError("image_symlink_escapes", f"{path} is now a symlink; refused") from exc
        raise
    with os.fdopen(fd, "rb", buffering=0) as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                    else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise ImageFileError("image_not_a_file", f"is {kind}, not a regular file; expected an image file")
        if st.st_size > max_bytes:
            raise ImageFileError("image_too_large", f"is {st.st_size} bytes, over the limit of {max_bytes} bytes "
                                 f"({max_bytes // (1024 * 1024)} MiB); expected an image file of a sensible size")
        data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:  # grew while being read
            raise ImageFileError("image_too_large", f"grew past the limit of {max_bytes} bytes while being read")
        return bytes(data)


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
    """Resolves, reads and checks the image files of one directory cube."""

    def __init__(self, root: str | os.PathLike[str], *, max_pixels: int = DEFAULT_MAX_PIXELS, workers: int = 4):
        self.root = os.path.realpath(root)
        self.max_pixels = max_pixels
        self.workers = workers
        self._prefix = self.root.rstrip(os.sep) + os.sep
        self._memo: dict[tuple[str, str], Resolved] = {}

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
        real = os.path.realpath(lexical)
        if not self._inside(real):
            return Resolved(
                None,
                "image_symlink_escapes",
                f"image_path {ref!r} goes through a symlink to {real!r}, outside the cube root {self.root!r}; "
                "expected the image file itself inside the cube",
            )
        return Resolved(os.path.relpath(lexical, self.root).replace(os.sep, "/"))

    def path(self, key: str) -> str:
        return os.path.join(self.root, *key.split("/"))

    def _read(self, key: str) -> tuple[str, FileCheck | None, bytes | None, str | None]:
        """(key, a final FileCheck when the read failed, else the bytes and their sha256)."""
        try:
            data = read_regular(self.path(key))
        except FileNotFoundError:
            return key, FileCheck(missing=True), None, None
        except ImageFileError as exc:
            return key, FileCheck(read_error=str(exc), read_reason=exc.reason), None, None
        except OSError as exc:  # a directory, no permission, an I/O error
            return key, FileCheck(read_error=f"{type(exc).__name__}: {exc.strerror or exc}"), None, None
        return key, None, data, sha256(data)

    def check_all(self, keys: Iterable[str]) -> dict[str, FileCheck]:
        """Read each distinct key once: hash and header from the same bytes, no decoding."""
        unique = list(dict.fromkeys(keys))
        out: dict[str, FileCheck] = {}
        # Bounded chunks keep memory at (chunk x image size) whatever the cube size.
        chunk = 64
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            for start in range(0, len(unique), chunk):
                for key, failed, data, digest in pool.map(self._read, unique[start : start + chunk]):
                    if failed is not None or data is None:
                        out[key] = failed or FileCheck(read_error="no data")
                    else:
                        out[key] = FileCheck(check=check_image_bytes(data, max_pixels=self.max_pixels, digest=digest))
        return out

    def reader(self, digests: Mapping[str, str]) -> Callable[[str], bytes]:
        """`Cube.read_image`: only keys validated at load are readable (never a path from outside)."""

        real = {k: os.path.realpath(self.path(k)) for k in digests}  # links inside the cube, resolved once

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
