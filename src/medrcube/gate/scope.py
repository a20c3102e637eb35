"""The intended-use scope applied to a cube's items, before anything is asked.

A scoped run (`scope: {parts: [Heart], modalities: [US]}`) asks only the items inside
the scope, so that every check the policy builds on them (overall, the slices, the cells,
credibility) is computed within the scope and required as the policy says: the scope
narrows what is qualified, never what is checked within it. The cube's values left
outside are kept per axis, for the coverage every output states (gate/coverage.py).
Names are checked against the cube and the taxonomy when the policy is read against the
cube (gate/thresholds.validate_against_cells); a scope that selects no item of this
cube is refused here, naming the cube's values.
"""

from __future__ import annotations

from collections.abc import Sequence

from medrcube.cube.item import Item
from medrcube.gate.policy import ScopePolicy, ThresholdsError

AXIS_OF = {"part": "parts", "modality": "modalities", "task": "tasks"}


def scoped_items(items: Sequence[Item], scope: ScopePolicy, policy_file: str = "") -> tuple[
        list[Item], dict[str, tuple[str, ...]]]:
    """The items inside `scope` and, per axis, the values of `items` left outside
    (nothing is left outside by an empty scope). ThresholdsError when none is inside."""
    if scope.everything:
        return list(items), {}
    inside = [it for it in items if scope.covers(it.part, it.modality, it.task)]
    if not inside:
        values = {axis: sorted({getattr(it, axis) for it in items}) for axis in AXIS_OF}
        choices = "; ".join(f"{AXIS_OF[a]}: {', '.join(v)}" for a, v in values.items())
        raise ThresholdsError(policy_file, scope.source, f"selects no item of this cube ({scope.describe()})",
                              show_value=False, fix=f"name values the cube holds together ({choices})")
    outside: dict[str, tuple[str, ...]] = {}
    for axis in AXIS_OF:
        kept = {getattr(it, axis) for it in inside}
        left = []
        for it in items:
            value = getattr(it, axis)
            if value not in kept and value not in left:
                left.append(value)
        if left:
            outside[axis] = tuple(left)
    return inside, outside
