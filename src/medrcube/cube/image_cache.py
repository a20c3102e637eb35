"""The image checks of a directory cube remembered across runs, per file (docs/speed.md).

Loading a directory cube reads every image, hashes it and parses its header: most of the
load's CPU. A second run on an unchanged cube need not: this user's authenticated cache
(cube/derived_cache.py: HMAC-keyed JSON, never pickle) holds, per image of a cube root,
the file's identity when it was read (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)
and what its bytes were (sha256, format, size). An image whose identity is the same is
taken from the entry; any other is read and checked as before.

Why the identity is enough, and why it need not be trusted:
- Any write to a file, and any chmod or utime, sets its ctime to the current time, which
  no user can set back (utime restores mtime, not ctime); a file replaced by another has
  another inode or another ctime. A file whose ctime is within `SETTLE_NS` of the read is
  not remembered: a write in the same tick of the file system's clock (a jiffy; a second
  on some file systems) could leave it unchanged.
- Nothing the cube sends is taken from the entry: every image read later goes through
  `DirImages.reader`, which refuses bytes whose sha256 is not the digest the load
  recorded. So an entry that is wrong all the same (a clock set back by root, a file
  system whose ctime is not the kernel's) makes the run refuse the image, never send or
  grade bytes other than those whose digest the run records.
- Only images whose check passed are remembered; a bad image is read and reported each
  time, with its message as before. The entry is keyed by the cube root, the pixel limit,
  the size limit, the code of the checks and Pillow's version (which parses the headers).

An entry that is absent, not this user's (wrong MAC), malformed or for another key is
ignored: every image is read. `MEDRCUBE_CACHE_DIR=off` reads every image every time.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from medrcube.cube.images import ImageCheck

if TYPE_CHECKING:
    from medrcube.cube.derived_cache import Slot

# A file changed less than this before it is read is not remembered (module docstring).
SETTLE_NS = 2_000_000_000
KIND = "image-checks"


def identity(st: os.stat_result) -> list[int]:
    """What must be the same for a file to be taken as unchanged."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


Entry = tuple[list[int], str, str, int, int]  # identity, sha256, format, width, height


def _decode(value: Any) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for key, (ident, digest, fmt, w, h) in value.items():
        if (not isinstance(ident, list) or len(ident) != 5 or not all(type(x) is int for x in ident)
                or not isinstance(digest, str) or len(digest) != 64 or not isinstance(fmt, str)
                or type(w) is not int or type(h) is not int):
            raise ValueError("malformed image-check entry")  # the whole entry is then absent
        out[key] = (ident, digest, fmt, w, h)
    return out


class ImageChecks:
    """The remembered checks of one cube root for one load: `get` before reading an image,
    `put` after checking one, `save` once at the end of the load."""

    def __init__(self, root: str, *, max_pixels: int, max_bytes: int, settle_ns: int = SETTLE_NS) -> None:
        from medrcube.cube.derived_cache import Slot

        self.settle_ns = settle_ns
        self.started = time.time_ns()  # before any image is read: the clock a settled ctime is older than
        self._slot = Slot.open(KIND, self._parts(root, max_pixels, max_bytes))
        hit = None if self._slot is None else self._slot.read(_decode)
        self._known: dict[str, Entry] = {} if hit is None else hit[0]
        self._now: dict[str, Entry] = {}
        self.hits = 0

    @staticmethod
    def _parts(root: str, max_pixels: int, max_bytes: int) -> dict[str, Any]:
        import PIL

        from medrcube.cube import images
        from medrcube.cube.derived_cache import module_file, source_digest

        # dirimages by its file, not its import: it imports this module (no cycle in the house)
        return {"root": root, "max_pixels": max_pixels, "max_bytes": max_bytes, "pillow": PIL.__version__,
                "code": source_digest([images.__file__, module_file("medrcube.cube.dirimages"), __file__])}

    def get(self, key: str, st: os.stat_result) -> ImageCheck | None:
        """The remembered check of `key` if its file's identity `st` is the one recorded."""
        known = self._known.get(key)
        if known is None or known[0] != identity(st):
            return None
        self._now[key] = known
        self.hits += 1
        return ImageCheck(known[1], known[2], (known[3], known[4]))

    def put(self, key: str, st: os.stat_result, check: ImageCheck) -> None:
        """Remember a passed check of the bytes read through a handle whose fstat is `st`."""
        if check.reason is None and check.format is not None and check.size is not None \
                and st.st_ctime_ns <= self.started - self.settle_ns:
            self._now[key] = (identity(st), check.digest, check.format, check.size[0], check.size[1])

    @property
    def slot(self) -> Slot | None:
        """The entry these checks are read from and saved to (None when caching is off)."""
        return self._slot

    def identities(self) -> dict[str, list[int]]:
        """The file identity of each image this load took from the entry or will save in it
        (a settled file whose check passed); an image not here was read unsettled or failed."""
        return {k: v[0] for k, v in self._now.items()}

    def save(self) -> None:
        """Write the checks of this load (only the images it saw), if they differ."""
        if self._slot is not None and self._now != self._known:
            self._slot.write({k: list(v) for k, v in sorted(self._now.items())})
