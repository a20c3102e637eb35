"""plugin/speed/early_teardown.py: the workers of a finished xdist session told to exit before the
controller writes its run directory; pytest-xdist's own teardown still waits for them.

Real execnet gateways (subprocesses, as pytest-xdist's workers are), held the way pytest-xdist's
controller holds them (its DSession's node manager's group), and a real gate run with `-n 2`."""

from __future__ import annotations

import types

import execnet

from medrcube.plugin.speed.early_teardown import exit_workers_now


class _PluginManager:
    def __init__(self, dsession: object) -> None:
        self.dsession = dsession

    def getplugin(self, name: str) -> object | None:
        return self.dsession if name == "dsession" else None


def _controller(group: execnet.Group, active: set) -> types.SimpleNamespace:
    dsession = types.SimpleNamespace(_active_nodes=active, nodemanager=types.SimpleNamespace(group=group))
    return types.SimpleNamespace(pluginmanager=_PluginManager(dsession))


def test_the_workers_exit_when_told_and_the_teardown_still_waits_for_them() -> None:
    group = execnet.Group()
    gateways = [group.makegateway("popen") for _ in range(2)]
    assert [gw.remote_exec("channel.send(42)").receive() for gw in gateways] == [42, 42]
    try:
        assert exit_workers_now(_controller(group, active={"a node still running"})) == 0  # an interrupted session
        assert exit_workers_now(_controller(group, active=set())) == 2
        for gw in gateways:
            assert gw._io.wait() == 0  # each process ends by itself, before any teardown
        assert len(group) == 2  # still registered: xdist's teardown waits for them as before
    finally:
        group.terminate(timeout=30)  # pytest-xdist's teardown (NodeManager.teardown_nodes)
    assert len(group) == 0


def test_not_the_xdist_controller() -> None:
    assert exit_workers_now(types.SimpleNamespace(pluginmanager=_PluginManager(None))) == 0


def test_a_gate_run_with_workers_ends_as_without_them(gate_ws, gate_server) -> None:
    """Decided, and its leak entries judged (by the controller while its workers ran), as without workers."""
    model = gate_ws.openai(gate_server)
    alone = gate_ws.run_subprocess("-n", "0", "--variants=standard,blind", model=model)
    first = gate_ws.gate_json()
    with_workers = gate_ws.run_subprocess("-n", "2", "--variants=standard,blind", model=model)
    second = gate_ws.gate_json()
    assert with_workers.ret == alone.ret and with_workers.ret in (0, 10, 11)
    assert len(gate_ws.run_dirs()) == 2
    assert {c["id"]: c["verdict"] for c in second["checks"]} == {c["id"]: c["verdict"] for c in first["checks"]}
    for key in ("leak_flags", "leaking"):
        assert second[key] == first[key]

    def prior(doc: dict) -> object:
        return next(c for c in doc["checks"] if c["kind"] == "image_dependence")["details"]["options_only_prior"]

    assert prior(second) == prior(first) is not None
