"""The kind registry (medrcube.gate.kinds): every built-in kind is registered once, with
its suite function, its builder and its evidence; a registered kind cannot be replaced
by accident nor a built-in one removed."""

from __future__ import annotations

import pytest

import medrcube.gate.evidence  # noqa: F401  (the built-in kinds attach their evidence on import)
from medrcube.gate import kinds
from medrcube.gate.checks import CheckKind


def test_every_built_in_kind_has_its_entry_builder_and_evidence() -> None:
    names = [e.name for e in kinds.registered()]
    # Besides the built-in kinds, the product's kinds registered by their own module (gate/subgroups.py).
    assert sorted(names) == sorted([k.value for k in CheckKind] + ["subgroup", "subgroup_gap"])
    assert len(set(names)) == len(names)
    for kind in CheckKind:
        entry = kinds.entry_of(kind)
        assert entry is not None and entry.title
        if kind is CheckKind.SITE:  # a site's own check: plugin/site.py collects it, no suite function
            assert (entry.test, entry.build, entry.evidence) == ("", None, None)
            continue
        assert entry.test == f"test_{kind.value}" and entry.doc and kinds.kind_of_test(entry.test) == kind
        assert entry.build is not None and entry.evidence is not None, kind
    assert kinds.entry_of(CheckKind.REGRESSION).needs_baseline  # type: ignore[union-attr]
    assert [n for n in names if kinds.entry_of(n).summary_line] == [  # type: ignore[union-attr]
        "robustness", "robustness_agreement", "finding", "calibration", "selective", "subgroup", "subgroup_gap"]


def test_a_kind_is_registered_once_and_a_built_in_one_stays() -> None:
    with pytest.raises(ValueError, match="registered already"):
        kinds.register(kinds.KindEntry("cell", "cells again"))
    with pytest.raises(ValueError, match="another check kind"):
        kinds.register(kinds.KindEntry("cell_copy", "cells again", test="test_cell"))
    with pytest.raises(ValueError, match="built in"):
        kinds.unregister("cell")
    assert kinds.rank("overall") < kinds.rank("cell") < kinds.rank("site") < kinds.rank("not-a-kind")
    assert kinds.title_of("not_a_kind") == "not a kind" and kinds.epic_of("not_a_kind") == "not_a_kind"
