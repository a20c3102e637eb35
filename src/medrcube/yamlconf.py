"""Reading the project's YAML configuration files (thresholds.yaml, models.yaml, recipes).

Safe loading only (a configuration file never constructs Python objects), and duplicate
keys are refused: PyYAML silently keeps the last of two equal keys, which would turn a
typo'd copy-paste into a silently different gate policy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys."""


def _mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}: each key may appear once in a mapping", key_node.start_mark
            )
        seen[key] = loader.construct_object(value_node, deep=deep)
    return seen


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


class YamlFileError(Exception):
    """A configuration file that cannot be read or parsed: `problem` says what, `fix` how
    to mend it; callers re-raise it as their own error type with their own wording."""

    def __init__(self, path: str, problem: str, fix: str):
        self.path, self.problem, self.fix = path, problem, fix
        super().__init__(f"{path}: {problem}. Fix: {fix}")


def read_yaml_file(path: str | os.PathLike[str], *, missing_fix: str) -> Any:
    """The parsed document of a YAML file; YamlFileError when it is missing, unreadable,
    not UTF-8 or not valid YAML (the message carries the line and column)."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise YamlFileError(name, "file not found", missing_fix) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise YamlFileError(name, f"cannot read the file: {exc}", "check the path and that the file is UTF-8 text") from None
    try:
        return yaml.load(text, Loader=StrictLoader)
    except yaml.YAMLError as exc:
        raise YamlFileError(
            name, f"not valid YAML: {' '.join(str(exc).split())}", "correct the YAML syntax at the line shown"
        ) from None
