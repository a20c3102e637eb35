"""service.exit_without_final_collection (issue 29): registered once per process, and a
process that used it exits normally with its atexit handlers run and its files complete."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import atexit, sys
from pathlib import Path
out = Path(sys.argv[1])
atexit.register(lambda: out.write_text("handler ran"))
from medrcube.service import exit_without_final_collection
before = atexit._ncallbacks()
exit_without_final_collection(); exit_without_final_collection()
assert atexit._ncallbacks() == before + 1, "registered more than once"
keep = [[i, {"x": [i]}] for i in range(10000)]  # live objects at exit
keep.append(keep)  # a cycle
with open(sys.argv[1] + ".data", "w") as fh:
    fh.write("x" * 100000)
"""


def test_registered_once_and_the_process_exits_complete(tmp_path: Path) -> None:
    out = tmp_path / "flag.txt"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == "handler ran"
    assert (tmp_path / "flag.txt.data").read_text() == "x" * 100000



KEPT = """
import atexit, gc, os, sys
from medrcube.service import exit_without_final_collection, keep_until_exit
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT)

class Data:
    def __init__(self, name):
        self.name, self.rows = name.encode(), [[i] for i in range(1000)]
    def __del__(self, _write=os.write):  # says when it was freed
        _write(fd, self.name + b" freed\\n")

atexit.register(lambda: os.write(fd, b"handler ran\\n"))  # registered first: runs after the freeze
kept, gone = Data("kept"), Data("gone")
exit_without_final_collection()
keep_until_exit(kept, gone, None)
del gone
gc.collect()  # held weakly: freed as soon as nothing else holds it
os.write(fd, b"collected\\n")
sys.exit(7)
"""


def test_data_kept_until_exit_is_held_weakly_and_the_exit_is_the_processs_own(tmp_path: Path) -> None:
    """keep_until_exit holds nothing that dies before the exit (a long-lived process that wrote runs
    keeps none of them), and the process exits with its own status, its atexit handlers run."""
    out = tmp_path / "events.txt"
    proc = subprocess.run([sys.executable, "-c", KEPT, str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 7, proc.stderr
    assert not proc.stderr
    events = out.read_text().splitlines()
    assert events[:2] == ["gone freed", "collected"]
    assert "handler ran" in events[2:]
