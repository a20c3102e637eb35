"""The cost of a run: tokens x the price table of models.yaml (per million tokens, as
the adapter carries it), and the projected cost of asking the full public cube.

A model without a `price` in models.yaml has no cost (None), never a guessed one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Items of the full public MedRCube release: what a run on it would ask.
FULL_CUBE_ITEMS = 7626


def price_of(spec: str | None, models_file: Path | None) -> Mapping[str, Any] | None:
    """The `price` of the models.yaml entry a spec names (None when there is none), for a
    caller that holds a spec and no adapter (an adapter carries it as `price`)."""
    from medrcube.models.models_file import ModelsFileError, default_models_file, load_models_file

    if not spec:
        return None
    path = models_file or default_models_file()
    if path is None:
        return None
    try:
        entries = load_models_file(path)
    except ModelsFileError:
        return None  # the adapter's loading has reported it already
    entry = entries.get(spec)
    return entry.price if entry is not None else None


def cost(usage: Mapping[str, Any], price: Mapping[str, Any]) -> float:
    from medrcube.models.models_file import usage_cost

    return usage_cost(price, usage["prompt_tokens"], usage["completion_tokens"])


def priced(usage: dict[str, dict[str, Any]], session: Any, result: Any) -> dict[str, dict[str, Any]]:
    """Usage per role with `cost`, `currency` and the projected cost of the full public
    cube (this run's cost per asked item x FULL_CUBE_ITEMS x the variants' asks per item)."""
    # The models.yaml price each adapter carries (models/base.py): None for one without.
    adapters = {"candidate": session.adapter, "judge": session.judge, "baseline": session.baseline_adapter}
    items = max(len(session.cube), 1)
    for role, u in usage.items():
        adapter = adapters.get(role)
        price = adapter.price if adapter is not None else None
        u["cost"] = u["currency"] = u["projected_full_cube"] = None
        u["full_cube_items"] = FULL_CUBE_ITEMS
        if price is None:
            continue
        u["cost"] = round(cost(u, price), 6)
        u["currency"] = price.get("currency", "USD")
        # Per item of the cube, over every ask this run made (stored answers included,
        # which cost nothing now but would on a fresh cube).
        asked = max(result.asked if result is not None else 0, u["requests"], 1)
        per_ask = cost(u, price) / max(u["requests"], 1)
        u["projected_full_cube"] = round(per_ask * asked / items * FULL_CUBE_ITEMS, 2)
    return usage
