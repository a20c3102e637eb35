"""report.html drawn after the run's exit status, by a detached child process.

Drawing the page (its matplotlib figures most of all) costs about two seconds of CPU,
which a run would otherwise spend between its last answer and its exit status. The run's
files are written and sealed before the exit status (results.jsonl, metrics_summary.json,
run.json, gate.json, the policy copy, manifest.json); report.html and plots/ are a view of
those files under a seal of their own, report.seal.json, which the child writes once the
page is drawn (rundir/seal.py: `seal_page`; `medrcube verify` checks both, and that the
verdict the page shows is gate.json's).

At the end of a run (`start`):
1. a short placeholder report.html is written (atomically) that says the page is being
   drawn and how to draw it if it stays (`medrcube report RUN_DIR`), with
   the marker `PENDING_MARK`;
2. this module's `main(RUN_DIR)` is spawned (a new Python process) in a new session, its
   standard streams on /dev/null (a caller reading the run's output to its end, such as
   a CI log or a benchmark, does not wait for it), and the run exits.
The child verifies nothing new: it draws from the sealed files as `medrcube report`
does, and replaces the placeholder atomically (a reader never sees half a page); if
drawing fails, the page it leaves says why and how to retry. While it draws it holds a
lock that the run took before spawning it (`drawer_alive`), so that `medrcube verify`
waits for the page only while someone is drawing it: a copy of the directory taken at the
run's exit keeps the placeholder, and was waited for a minute in vain.

`MEDRCUBE_REPORT_HTML=now` draws the page before the exit status (a CI job that archives
the directory the moment the run exits and wants the page in the archive); `after`
(the default) as above. Where a process cannot be spawned this way (no posix_spawn),
the page is drawn before the exit status.
"""

from __future__ import annotations

import html
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from medrcube.rundir.seal import PAGE_FAILED, PAGE_PENDING

if TYPE_CHECKING:
    from medrcube.cube.item import Cube

ENV = "MEDRCUBE_REPORT_HTML"
MODES = ("after", "now")
REPORT_NAME = "report.html"  # report.html's REPORT_NAME, without importing the page's code
# The placeholders' marks: rundir/seal.py lets a page carrying one (and no verdict) stand unsealed.
PENDING_MARK = PAGE_PENDING
FAILED_MARK = PAGE_FAILED


class ReportModeError(ValueError):
    pass


def mode() -> str:
    value = os.environ.get(ENV, "after").strip().lower() or "after"
    if value not in MODES:
        raise ReportModeError(f"{ENV}={value!r}: expected one of {', '.join(MODES)} "
                              "(after: report.html drawn after the exit status; now: before it)")
    return value


def _page(run_dir: Path, mark: str, title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{mark}<title>{html.escape(title)}</title>'
            f"</head><body><h1>{html.escape(title)}</h1>{body}<p>The run's sealed files (gate.json, run.json, "
            f"results.jsonl, metrics_summary.json, manifest.json) are complete. To draw this page: "
            f"<code>medrcube report {html.escape(str(run_dir))}</code>.</p></body></html>\n")


def pending_page(run_dir: Path) -> str:
    return _page(run_dir, PENDING_MARK, f"report.html of {run_dir.name}: being drawn",
                 "<p>This page is being drawn by a process started when the run ended; it replaces this "
                 "text when done (reload).</p>")


def failed_page(run_dir: Path, error: str) -> str:
    return _page(run_dir, FAILED_MARK, f"report.html of {run_dir.name}: not drawn",
                 f"<p>Drawing this page failed: <code>{html.escape(error)}</code>.</p>")


def state(run_dir: str | os.PathLike[str]) -> str:
    """'drawn', 'pending', 'failed' or 'missing': what report.html of `run_dir` is now."""
    path = Path(run_dir) / REPORT_NAME
    try:
        head = path.read_text(encoding="utf-8")[:400]
    except (OSError, UnicodeDecodeError):
        return "missing"
    return "pending" if PENDING_MARK in head else "failed" if FAILED_MARK in head else "drawn"


def wait_drawn(run_dir: str | os.PathLike[str], timeout_s: float = 300.0) -> str:
    """Wait (bounded) until report.html is no longer pending, as long as a process is
    drawing it (`drawer_alive`); return its state. A copy of a run directory taken while
    its page was pending (an archive made the moment the run exited) is not waited for."""
    deadline = time.monotonic() + timeout_s
    while (now := state(run_dir)) == "pending" and time.monotonic() < deadline and drawer_alive(run_dir):
        time.sleep(0.05)
    return state(run_dir) if now == "pending" else now


# Who is drawing a page: the drawer holds an exclusive lock on a file named by its run
# directory's identity on this machine (device and inode, so a copy of the directory has
# another name), taken by the run before it spawns the drawer and inherited by the drawer,
# so that it is held from the run's exit to the drawer's. The drawer removes the file when
# done; a drawer that died leaves it unlocked.
def drawing_lock_path(run_dir: str | os.PathLike[str]) -> Path | None:
    try:
        st = os.stat(run_dir)
    except OSError:
        return None
    return Path(tempfile.gettempdir()) / f"medrcube-drawing-{st.st_dev}-{st.st_ino}.lock"


def drawer_alive(run_dir: str | os.PathLike[str]) -> bool:
    """Whether a process drawing this very directory's page still runs; True where that
    cannot be told (no file locks here, a lock file another user owns)."""
    try:
        import fcntl
    except ImportError:
        return True
    path = drawing_lock_path(run_dir)
    if path is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False  # nobody holds it: its drawer ended without removing it
    except OSError:  # held (BlockingIOError), or a lock this file system cannot take
        return True
    finally:
        os.close(fd)


def _drawing_lock(run_dir: Path) -> int | None:
    """The lock of `run_dir`'s drawer, held, on an inheritable descriptor; None when it cannot be taken."""
    try:
        import fcntl
    except ImportError:
        return None
    path = drawing_lock_path(run_dir)
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.set_inheritable(fd, True)
    except OSError:  # another drawer of this directory holds it, or no locks here
        os.close(fd)
        return None
    return fd


def _write(path: Path, text: str) -> None:
    from medrcube.rundir.files import atomic_write

    atomic_write(path, lambda fh: fh.write(text))


def _reap(pid: int) -> None:
    # A long-lived parent (pytest's pytester, a notebook) would keep the child as a zombie.
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def spawn(run_dir: Path) -> int | None:
    """The detached child drawing report.html (module docstring); its pid, or None where
    it cannot be spawned."""
    if not hasattr(os, "posix_spawn"):
        return None
    # The child inherits the environment (PYTHONPATH included); medrcube's own directory is
    # appended to its path for a parent that found medrcube through an edited sys.path, after
    # the standard library and site-packages, which it must not shadow.
    package_root = str(Path(__file__).resolve().parents[2])
    code = ("import sys; sys.path.append(sys.argv[1]); from medrcube.report.after_exit import main; "
            "raise SystemExit(main(sys.argv[2:]))")
    argv = [sys.executable, "-c", code, package_root, str(run_dir.resolve()), json.dumps(_kinds())]
    devnull = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    lock = _drawing_lock(run_dir)  # inherited: the child holds it until it exits (drawer_alive)
    try:
        pid = os.posix_spawn(sys.executable, argv, dict(os.environ), file_actions=devnull, setsid=True)
    except OSError:
        return None
    finally:
        if lock is not None:
            os.close(lock)
    threading.Thread(target=_reap, args=(pid,), name="medrcube-report-reaper", daemon=True).start()
    return pid


def start(run_dir: Path, *, cube: Cube | None = None) -> tuple[Path | None, str | None]:
    """report.html at the end of a run: drawn now (MEDRCUBE_REPORT_HTML=now, or no way to
    spawn), else a pending page and a detached child. Returns (path, warning) as
    report.html's `write_report_after_run` does."""
    note: str | None = None
    try:
        wanted = mode()
    except ReportModeError as exc:
        wanted, note = "now", f"{exc}; drawn before the exit status"
    if wanted == "after":
        try:
            _write(run_dir / REPORT_NAME, pending_page(run_dir))  # before the child: it must not be overwritten
            if spawn(run_dir) is not None:
                return run_dir / REPORT_NAME, None
        except OSError as exc:
            return None, f"report.html was not started ({exc}); draw it with `medrcube report {run_dir}`"
    from medrcube.report.html import write_report_after_run

    drawn, warning = write_report_after_run(run_dir, cube=cube)
    return drawn, "; ".join(filter(None, [note, warning])) or None


def _kinds() -> list[list[str]]:
    """The parent's kinds of check, in order: a site's own kinds (registered by its plugin
    or conftest, unknown to a fresh process) keep their title and place on the page."""
    from medrcube.gate import kinds

    return [[e.name, e.title] for e in kinds.registered()]


def _register_missing(names_titles: list[list[str]]) -> None:
    from medrcube.gate import kinds

    known = {e.name for e in kinds.registered()}
    for name, title in names_titles:
        if name not in known:
            kinds.register(kinds.KindEntry(name, title))


def main(argv: list[str]) -> int:
    """The child: draw report.html of argv[0] (the cube that run.json names, when it is
    found and unchanged; the parent's kinds of check from argv[1]), or leave a page saying
    why not."""
    run_dir = Path(argv[0])
    try:
        from medrcube.report.html import write_report_html

        _register_missing(json.loads(argv[1]) if len(argv) > 1 else [])
        write_report_html(run_dir)
        return 0
    except Exception as exc:  # noqa: BLE001 - any failure is written into the page
        _write(run_dir / REPORT_NAME, failed_page(run_dir, f"{type(exc).__name__}: {exc}"))
        return 1
    finally:  # the page drawn or failed: the lock file goes (its lock with this process)
        lock = drawing_lock_path(run_dir)
        if lock is not None:
            lock.unlink(missing_ok=True)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
