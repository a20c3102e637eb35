"""The cube: Items, loaders (release directory, JSON Lines, Hugging Face datasets),
validation, fingerprint and statistics.

    from medrcube.cube import load_cube
    cube = load_cube("path/to/MedRCube")        # or "cube.jsonl", "hf:Flmc/MedRCube", ...

`datasets` is imported only by the Hugging Face loaders (`to_hf_dataset` included).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from medrcube.cube.attributes import strata as item_strata
from medrcube.cube.fingerprint import cube_fingerprint
from medrcube.cube.item import Cube, CubeError, Item, Problem
from medrcube.cube.jsonl import write_jsonl
from medrcube.cube.load import load_cube
from medrcube.cube.problems import REASONS

if TYPE_CHECKING:
    from medrcube.cube.hf import to_hf_dataset

__all__ = [
    "REASONS",
    "Cube",
    "CubeError",
    "Item",
    "Problem",
    "cube_fingerprint",
    "item_strata",
    "load_cube",
    "to_hf_dataset",
    "write_jsonl",
]


def __getattr__(name: str) -> Any:
    if name == "to_hf_dataset":
        from medrcube.cube.hf import to_hf_dataset

        return to_hf_dataset
    raise AttributeError(f"module 'medrcube.cube' has no attribute {name!r}")
