"""The build recipe: a YAML file saying which sources to read, what their labels mean, which
tasks to derive, how many items per cell, who reviews, and how to export.

The schema is strict: an unknown key, a wrong type or an unknown value is an error that
names the file, the key, the value, and the fix (with "did you mean" for near misses).
Paths are relative to the recipe file. `recipes/site-example.yaml` documents every key;
`recipes/mini.yaml` rebuilds the bundled mini cube.

spec.py holds the values (`Recipe` and its parts), parse.py reads a file into them
(sources.py the `sources` entries), node.py is the strict reader of one mapping. The
names below are the package's interface: import them from `medrcube.construction.recipe`.
"""

from __future__ import annotations

from medrcube.construction.recipe.parse import load_recipe, parse_recipe
from medrcube.construction.recipe.spec import (
    LABEL_FIELDS,
    PACKAGE_BUILDERS,
    PLANES,
    SOURCE_KINDS,
    AttributesSpec,
    ExportSpec,
    LabelsFile,
    PrivacySpec,
    Recipe,
    RecipeError,
    ReviewSpec,
    SeveritySpec,
    SourceSpec,
)

__all__ = [
    "LABEL_FIELDS", "PACKAGE_BUILDERS", "PLANES", "SOURCE_KINDS", "AttributesSpec", "ExportSpec", "LabelsFile", "PrivacySpec", "Recipe",
    "RecipeError", "ReviewSpec", "SeveritySpec", "SourceSpec", "load_recipe", "parse_recipe",
]  # fmt: skip
