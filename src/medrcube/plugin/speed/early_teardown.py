"""Under pytest-xdist, the workers told to exit as soon as the controller's session ends, before it
writes the run directory (docs/speed.md, "Fifteenth pass").

When the last worker has reported its end, the controller ends its session: the medrcube plugin
writes the run directory (about 0.2 s of CPU at the paper's scale), and only then does
pytest-xdist's own sessionfinish tear the workers down: it sends each worker's gateway its
termination message and waits for the process to exit, which frees its heap first (about 0.15 s
with `-n 8` on two cores). Every worker is done by then (each reported its end, its hand-over
taken), so here the termination message goes out first, when every node is down, and the workers
exit while the run directory is written. xdist's teardown then waits for them as before: its own
termination message finds the stream closed, which execnet's `Gateway.exit` tolerates.

Reads pytest-xdist's controller (`DSession`: its node manager's execnet group and its active
nodes) and sends what execnet's `Gateway.exit` sends, without unregistering the gateway, so that
xdist still waits for each process; anything not found as expected and nothing is sent.
"""

from __future__ import annotations

import contextlib
from typing import Any


def exit_workers_now(config: Any) -> int:
    """Send every worker of a finished xdist session its termination; how many were told (0 without
    xdist, with a node still active, or where pytest-xdist or execnet are not as expected)."""
    dsession = config.pluginmanager.getplugin("dsession")
    if dsession is None or getattr(dsession, "_active_nodes", None) != set():
        return 0  # not the xdist controller, or a worker still running (an interrupted session)
    group = getattr(getattr(dsession, "nodemanager", None), "group", None)
    try:
        from execnet.gateway_base import Message

        terminate = Message.GATEWAY_TERMINATE
    except (ImportError, AttributeError):
        return 0
    told = 0
    for gateway in list(group or ()):
        with contextlib.suppress(Exception):  # a gateway already gone: xdist's teardown deals with it
            gateway._send(terminate)
            gateway._io.close_write()
            told += 1
    return told
