"""The leakage audit of a cube computed in a child process, while a gate's answers come in.

On a cube this user's cache has not seen, the audit (cube/audit.py) takes seconds of CPU
(3.7 s at the paper's scale), and computed after the last answer it was the whole of a
first run's time from the last answer to the exit status. On a thread beside the requests
it would take the interpreter's lock from them; a child process computes it on another
core instead (`start`):

- the parent writes the items as their canonical records (`Item.to_dict`, which
  `Item.from_dict` inverts exactly) into a private folder;
- the child reads them back, checks their digest against the parent's
  (derived_cache.items_digest), computes the audit and writes it beside them
  (audit_cache.encode), through a temporary name, so a half-written file is never read;
- the parent takes it when it needs it (`AuditChild.take`), waiting for what is left, if
  the child is computing by then; a child still starting (its interpreter and imports,
  about 0.8 s, more than the parent's own imports for the audit) is stopped and the parent
  computes the audit itself, so a run whose answers took less than that (a replay from the
  store, a baseline model) ends no later than it did.

A child that failed (killed, an error, another digest) gives None and the caller computes
the audit itself: it is never lost, only moved. The child reads its standard input, a pipe
the parent never writes to, on a thread, and ends when the pipe closes: whatever ends the
parent (Ctrl-C, a kill) ends the child, which removes the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from medrcube.cube.audit import Audit
from medrcube.cube.item import Item

ITEMS = "items.jsonl"
AUDIT = "audit.json"
LOG = "child.log"  # the child's own output (an error's traceback), removed with the folder
COMPUTING = "computing"  # made by the child once started and its items read: from then on it is waited for


@dataclass
class AuditChild:
    """A started child (`start`): `take` its audit once, or `stop` it."""

    process: subprocess.Popen[bytes]
    folder: Path

    def take(self) -> Audit | None:
        """The audit, once the child has ended; None if it failed, or if it was still starting
        (module docstring). The folder is removed."""
        from medrcube.cube.audit_cache import decode

        try:
            if self.process.poll() is None and not (self.folder / COMPUTING).exists():
                return None  # still starting: computing it here ends sooner (the `finally` stops it)
            if self.process.wait() != 0:
                return None
            return decode(json.loads((self.folder / AUDIT).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        finally:
            self.stop()

    def stop(self) -> None:
        """End the child if it still runs, and remove the folder (again: nothing)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def start(items: Sequence[Item], digest: str) -> AuditChild | None:
    """The audit of `items` (default bounds), whose items_digest is `digest`, started in a
    child process; None where no child can be started (the caller computes it then)."""
    if getattr(sys, "frozen", False):  # a frozen application's executable is not a Python running `-c`
        return None
    folder = Path(tempfile.mkdtemp(prefix="medrcube-audit-"))  # 0700: the items are the cube's text
    try:
        with open(folder / ITEMS, "w", encoding="utf-8") as fh:
            for it in items:
                fh.write(json.dumps(it.to_dict(), ensure_ascii=False) + "\n")
        # The child inherits the environment (PYTHONPATH included); medrcube's own directory is
        # appended to its path for a parent that found medrcube through an edited sys.path.
        package_root = str(Path(__file__).resolve().parents[2])
        code = ("import sys; sys.path.append(sys.argv[1]); from medrcube.cube.audit_child import main; "
                "raise SystemExit(main(sys.argv[2:]))")
        with open(folder / LOG, "wb") as log:
            process = subprocess.Popen([sys.executable, "-c", code, package_root, str(folder), digest],
                                       stdin=subprocess.PIPE, stdout=log, stderr=log, close_fds=True)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return AuditChild(process, folder)


def main(argv: list[str]) -> int:
    """The child: the audit of the items in argv[0] (when their digest is argv[1]) into argv[0]."""
    folder, digest = Path(argv[0]), argv[1]
    threading.Thread(target=_end_with_the_parent, args=(folder,), name="medrcube-audit-parent", daemon=True).start()
    from medrcube.cube.audit import audit_items
    from medrcube.cube.audit_cache import encode
    from medrcube.cube.derived_cache import items_digest

    with open(folder / ITEMS, encoding="utf-8") as fh:
        items = [Item.from_dict(json.loads(line)) for line in fh]
    if items_digest(items) != digest:
        print(f"medrcube: the items read back are not the parent's (digest {items_digest(items)}, expected {digest})",
              file=sys.stderr)
        return 3
    # What the audit imports (numpy, scipy), imported before the parent is told it computes.
    import scipy.optimize  # noqa: F401
    import scipy.sparse  # noqa: F401
    import scipy.stats  # noqa: F401

    import medrcube.cube.audit_model  # noqa: F401

    (folder / COMPUTING).touch()
    text = json.dumps(encode(audit_items(items)))
    tmp = folder / f".{AUDIT}.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, folder / AUDIT)
    return 0


def _end_with_the_parent(folder: Path) -> None:
    # The parent holds the pipe's other end and never writes: end of file is its end (or its
    # `stop`), and a child left computing for nobody would hold a core.
    # On the descriptor, not sys.stdin: a buffered reader's lock held by this daemon thread
    # stops the interpreter's own exit ("could not acquire lock ... at interpreter shutdown").
    with contextlib.suppress(OSError):
        while os.read(0, 4096):
            pass
    shutil.rmtree(folder, ignore_errors=True)
    os._exit(1)
