"""The main thread, waiting for the inference thread, settles the heap while it waits
(plugin/speed/early_inference.join_settling), and returns once the thread has ended."""

from __future__ import annotations

import threading

from medrcube.plugin.speed.early_inference import join_settling


def test_the_wait_settles_while_the_thread_runs_and_ends_with_it() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait, daemon=True)
    thread.start()
    settles: list[bool] = []

    def settle() -> None:  # the thread runs until the wait has settled twice
        settles.append(thread.is_alive())
        if len(settles) == 2:
            release.set()

    join_settling(thread, 0.001, settle)
    assert not thread.is_alive()
    assert settles[:2] == [True, True]  # each settle while the thread still ran


def test_a_thread_already_ended_is_joined_without_a_settle() -> None:
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
    settles: list[int] = []
    join_settling(thread, 0.001, lambda: settles.append(1))
    assert settles == []
