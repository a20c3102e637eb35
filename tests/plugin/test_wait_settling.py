"""The main thread, waiting for the inference's outcome, settles the heap while it waits
(plugin/speed/early_inference.wait_settling), and returns once the outcome is there."""

from __future__ import annotations

import threading

from medrcube.plugin.speed.early_inference import wait_settling


def test_the_wait_settles_until_the_outcome_is_there() -> None:
    done = threading.Event()
    settles: list[bool] = []

    def settle() -> None:  # the outcome comes once the wait has settled twice
        settles.append(done.is_set())
        if len(settles) == 2:
            threading.Timer(0.0, done.set).start()

    wait_settling(done, 0.001, settle)
    assert done.is_set()
    assert settles[:2] == [False, False]  # each settle while the outcome was still awaited


def test_an_outcome_already_there_is_taken_without_a_settle() -> None:
    done = threading.Event()
    done.set()
    settles: list[int] = []
    wait_settling(done, 0.001, lambda: settles.append(1))
    assert settles == []
