"""Reading the project's YAML configuration files (thresholds.yaml, models.yaml, recipes).

Safe loading only (a configuration file never constructs Python objects), and duplicate
keys are refused: PyYAML silently keeps the last of two equal keys, which would turn a
typo'd copy-paste into a silently different gate policy.

Anchors and aliases are refused too: a few hundred bytes of nested aliases (the "billion
laughs") expand to 10**9 values, which every later walk over the document (validation,
an error message quoting a value) would take forever to visit. Configuration files never
need them. A document nested beyond Python's recursion limit, or an integer longer than
Python's integer-string limit, is "not valid YAML" as well, never a traceback.
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path
from typing import Any

import yaml


class _Refused(yaml.MarkedYAMLError):
    """A refusal with its own remedy (a value beyond a reader limit, a construct configuration
    files do not accept): `fix` says what to write instead."""

    def __init__(self, problem: str, mark: yaml.Mark, fix: str):
        super().__init__(problem=problem, problem_mark=mark)
        self.fix = fix

    def __str__(self) -> str:  # the line, without PyYAML's snippet of a possibly huge line
        mark = self.problem_mark  # always set by __init__; None only in PyYAML's own signature
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"{self.problem}{where}"


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, anchors and aliases, and over-long integers."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        # Refused while composing, before an alias could be expanded anywhere.
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            found = f"alias '*{event.anchor}'" if isinstance(event, yaml.AliasEvent) else f"anchor '&{event.anchor}'"
            raise _Refused(
                f"YAML anchors and aliases are not allowed in configuration files: {found}",
                event.start_mark,
                "write the value out in full wherever it is needed",
            )
        return super().compose_node(parent, index)


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


def _int(loader: StrictLoader, node: yaml.ScalarNode) -> int:
    try:
        return yaml.SafeLoader.construct_yaml_int(loader, node)
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
        raise _Refused(
            f"not valid YAML: an integer longer than {sys.get_int_max_str_digits()} digits",
            node.start_mark,
            "write a shorter number (or quote it if it is text)",
        ) from None


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
StrictLoader.add_constructor("tag:yaml.org,2002:int", _int)


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
    key = (text, sys.get_int_max_str_digits())  # the parse is a function of these alone
    hit = _PARSED.get(key)
    if hit is not None:
        return copy.deepcopy(hit)  # the caller's own copy: the memo's is never handed out
    try:
        doc = yaml.load(text, Loader=StrictLoader)
    except _Refused as exc:
        raise YamlFileError(name, str(exc), exc.fix) from None
    except yaml.YAMLError as exc:
        raise YamlFileError(
            name, f"not valid YAML: {' '.join(str(exc).split())}", "correct the YAML syntax at the line shown"
        ) from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise YamlFileError(
            name, "not valid YAML: lists or mappings nested too deeply to read", "flatten the structure: a configuration file needs only a few levels"
        ) from None
    except ValueError as exc:  # a constructor's conversion that PyYAML does not wrap in a YAMLError
        raise YamlFileError(name, f"not valid YAML: {exc}", "correct the value") from None
    while len(_PARSED) >= _PARSED_MAX:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[key] = copy.deepcopy(doc)
    return doc


# Documents parsed in this process by their text: the gate reads the packaged policy
# again after the first answer (gate.json's comparison with the shipped default), and
# the composer costs ~16 ms of CPU for it; a copy costs a tenth of that. Keyed by the
# whole text, so an edited file is parsed again; failures are not remembered (their
# message names the file).
_PARSED: dict[tuple[str, int], Any] = {}
_PARSED_MAX = 8
