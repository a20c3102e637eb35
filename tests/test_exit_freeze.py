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
