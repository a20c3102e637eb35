"""A cube's images decoded in worker processes on its first load (cube/content.py).

The first load of a cube decodes every distinct image once for its content key: at the
paper's scale (3,000 PNGs of 512 px) 12 s of CPU, all of a first run's start-up. Pillow's
PNG decoding, its conversions and the digest hold the interpreter's lock here (300 of
those images: 0.51 s decoded on one thread, 0.53 s on two), so threads do not share the
work; processes do. `Decoders` runs them:

- plain child processes (`python -c`, the way report/after_exit.py starts its drawer):
  never the parent's `__main__` run again, as multiprocessing's spawn would do with a
  user's script;
- each reads frames from its stdin (an image index and its bytes, each behind its
  length) and writes one line per image to its stdout: the index and the caller's decode
  function's key and difference hash (cube/content.decode_content, named to the worker by
  its module and name), or that it could not be decoded (the caller keys that image by its
  bytes, as it would itself);
- the parent reads the images (its reader need not be safe across threads) and hands
  each to a worker with fewer than two in hand, a thread per worker reading its answers.

What a worker did not answer (it died, it could not be started) is decoded by the caller
itself: nothing is lost, only the speed. Every image's bytes were verified against their
digest by the reader before they are sent, and the worker computes exactly what the
caller would (the same function), so the keys are the same either way.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from medrcube.cube.item import Content

# Up to this many workers: each holds one decoded image at a time (a 16-bit 4,096 px frame's
# scaling to 8 bits takes 128 MiB), and four bound what a many-core machine holds at once.
MAX_WORKERS = 4
IN_HAND = 2  # images a worker holds: one decoding, one waiting in its pipe, so it never idles between them
_FRAME = struct.Struct("!QQ")  # (index, length) before each image's bytes


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        return os.cpu_count() or 1


class Decoders:
    """Worker processes decoding images (module docstring); a context manager."""

    def __init__(self, workers: int, decode: Callable[[bytes], Content]) -> None:
        package_root = str(Path(__file__).resolve().parents[2])
        code = ("import sys; sys.path.append(sys.argv[1]); from medrcube.cube.decode_workers import main; "
                "raise SystemExit(main(sys.argv[2]))")
        target = f"{decode.__module__}:{decode.__qualname__}"  # a module-level function, imported by the worker
        self._procs: list[subprocess.Popen[bytes]] = []
        # In a frozen application sys.executable is the application, not a Python running `-c`.
        for _ in range(0 if getattr(sys, "frozen", False) else workers):
            try:
                self._procs.append(subprocess.Popen([sys.executable, "-c", code, package_root, target], stdin=subprocess.PIPE,
                                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True))
            except OSError:
                break  # fewer workers (none: the caller decodes everything)
        self._ready: queue.Queue[int] = queue.Queue()
        self.answers: dict[int, Content | None] = {}  # index -> its Content, None: could not be decoded
        self._readers = [threading.Thread(target=self._read, args=(w,), name="medrcube-decode-reader", daemon=True)
                         for w in range(len(self._procs))]
        for w, reader in enumerate(self._readers):
            reader.start()
            for _ in range(IN_HAND):
                self._ready.put(w)
        self._alive = len(self._procs)

    def __enter__(self) -> Decoders:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, index: int, data: bytes) -> bool:
        """Hand image `index` to a worker with room for it (waits for one); False when no
        worker is left (the caller decodes it)."""
        while self._alive:
            w = self._ready.get()
            if w < 0:  # a worker ended: one fewer to wait for
                self._alive -= 1
                continue
            stdin = self._procs[w].stdin
            assert stdin is not None
            try:
                stdin.write(_FRAME.pack(index, len(data)))
                stdin.write(data)
                stdin.flush()
                return True
            except OSError:  # it died: its reader says so once its stdout ends
                continue
        return False

    def close(self) -> None:
        """No more images: each worker ends after its last answer; every answer is in `answers`."""
        for p in self._procs:
            if p.stdin is not None:
                with contextlib.suppress(OSError):
                    p.stdin.close()
        for reader in self._readers:
            reader.join()
        for p in self._procs:
            p.wait()

    def _read(self, w: int) -> None:
        stdout = self._procs[w].stdout
        assert stdout is not None
        for line in stdout:
            try:
                answer = json.loads(line)
                content = Content(answer["key"], int(answer["dhash"])) if "key" in answer else None
                self.answers[int(answer["i"])] = content
            except (ValueError, KeyError, TypeError):
                break  # not this project's worker talking: the caller decodes what is left
            self._ready.put(w)
        self._ready.put(-1)  # ended (its last answer given, or died)


def decode_all(missing: Sequence[tuple[str, str]], read: Callable[[str], bytes],
               decode: Callable[[bytes], Content], workers: int) -> dict[str, Content | None]:
    """(digest, key) -> the Content of the image at `key` (None: it could not be read or
    decoded), the images read here in order and decoded by `workers` processes, and any a
    worker did not answer decoded here."""
    out: dict[str, Content | None] = {}
    sent: dict[int, str] = {}  # index -> digest
    with Decoders(workers, decode) as pool:
        for i, (d, k) in enumerate(missing):
            try:
                data = read(k)
            except Exception:  # noqa: BLE001 - a broken image is reported where it is read; here it is its bytes
                out[d] = None
                continue
            if pool.send(i, data):
                sent[i] = d
            else:
                out[d] = _decoded_here(decode, data)
    for i, d in sent.items():
        if i in pool.answers:
            out[d] = pool.answers[i]
        else:  # its worker died before answering
            try:
                out[d] = decode(read(missing[i][1]))
            except Exception:  # noqa: BLE001 - as above
                out[d] = None
    return out


def _decoded_here(decode: Callable[[bytes], Content], data: bytes) -> Content | None:
    try:
        return decode(data)
    except Exception:  # noqa: BLE001 - as above
        return None


def main(target: str) -> int:
    """A worker: frames in, one line per image out (decoded by `target`, "module:function"),
    until its stdin ends."""
    import importlib

    module, _, name = target.partition(":")
    decode_content = getattr(importlib.import_module(module), name)

    stdin: IO[bytes] = sys.stdin.buffer
    stdout: IO[bytes] = sys.stdout.buffer
    while True:
        head = stdin.read(_FRAME.size)
        if len(head) < _FRAME.size:
            return 0
        index, length = _FRAME.unpack(head)
        data = stdin.read(length)
        if len(data) < length:
            return 0
        try:
            c = decode_content(data)
            line = {"i": index, "key": c.key, "dhash": c.dhash}
        except Exception:  # noqa: BLE001 - the caller keys it by its bytes, as it would itself
            line = {"i": index, "error": True}
        stdout.write(json.dumps(line).encode() + b"\n")
        stdout.flush()
