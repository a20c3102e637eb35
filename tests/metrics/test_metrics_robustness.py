"""Image dependence (standard vs blind) and position robustness (circular accuracy)."""

from __future__ import annotations

import pytest

from medrcube.metrics.robustness import image_dependence, position_robustness


def test_image_dependence_hand_computed(rec):
    records = []
    # 10 items: standard right on 8, blind right on 3 (items 0-2), item 9 blind errored.
    for i in range(10):
        records.append(rec(f"i{i}", "correct" if i < 8 else "wrong"))
        records.append(rec(f"i{i}", "error" if i == 9 else ("correct" if i < 3 else "wrong"), variant="blind"))
    d = image_dependence(records)
    assert d.counts.n == 9 and d.counts.dropped == 1
    assert d.standard_acc == pytest.approx(8 / 9)
    assert d.blind_acc == pytest.approx(3 / 9)
    assert d.drop == pytest.approx(5 / 9)
    assert d.interval[0] < 5 / 9 < d.interval[1]
    assert d.blind_right == ("i0", "i1", "i2")


def test_position_robustness_hand_computed(rec):
    records = []
    # 6 items, 2 rotations each. i0-i2 right everywhere; i3 right in standard, wrong in r=2;
    # i4 wrong in standard; i5 has an errored rotation (incomplete).
    for i in range(6):
        records.append(rec(f"i{i}", "wrong" if i == 4 else "correct", image=f"img{i // 2}"))
        for r in (1, 2):
            outcome = "correct"
            if i == 3 and r == 2:
                outcome = "wrong"
            if i == 5 and r == 1:
                outcome = "error"
            records.append(rec(f"i{i}", outcome, variant="shuffled", rotation=r, image=f"img{i // 2}"))
    p = position_robustness(records, rotations=2)
    assert (p.n, p.incomplete, p.rotations) == (5, 1, 2)
    assert p.standard_acc == pytest.approx(4 / 5)
    assert p.circular_acc == pytest.approx(3 / 5)
    assert p.gap == pytest.approx(1 / 5)
    assert p.inconsistent == ("i3",)
    assert p.circular_interval.clusters == 3


def test_position_missing_rotation_is_incomplete(rec):
    records = [rec("a", "correct"), rec("a", "correct", variant="shuffled", rotation=1)]
    assert position_robustness(records, rotations=2).incomplete == 1
    # Without K, the largest count seen is expected.
    assert position_robustness(records).n == 1
