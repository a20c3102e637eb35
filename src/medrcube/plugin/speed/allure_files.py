"""Allure's result files encoded by the C JSON encoder: the same bytes in about half the CPU.

allure-python-commons writes each test result and fixture container with `json.dump(data,
file)`. `json.dump` always runs the json module's pure-Python encoder (only `json.dumps`
without an indent takes the C one), and a gate run writes three such files a case, after the
last answer: 332 files at the paper's scale (0.101 -> 0.065 ms an item on a gate case's items,
benchmarks/allure_writer.py; docs/speed.md). Here the one file logger allure-pytest
registered gets, as an attribute of that instance, an item writer that encodes the very
dict allure's would (`attr.asdict` with allure's filter) with `json.dumps` and writes it the
way allure's does (a `.tmp` file beside it, then renamed). `json.dump` and `json.dumps` make
the same text for the same arguments, so the files are the same; tests/plugin/test_allure_files.py
compares them with allure's own.

Only an `AllureFileLogger` instance of allure-python-commons is changed, and only while its
indented output (ALLURE_INDENT_OUTPUT) is off; anything else is left as allure made it.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

_ATTRIBUTE = "_report_item"  # the method allure's hooks call, through the instance, for every item


def _keep(_attribute: Any, value: Any) -> bool:
    return bool(value) or value is False  # allure's own filter: empty values are not written


def encode_results_in_c() -> int:
    """Give allure's registered file loggers the C-encoding item writer; how many were given it."""
    try:
        import allure_commons
        from allure_commons.logger import AllureFileLogger
        from attr import asdict
    except ImportError:  # allure-pytest not installed: nothing to speed up
        return 0
    if os.environ.get("ALLURE_INDENT_OUTPUT"):
        return 0  # indented files: allure's own writer (an indent takes the pure-Python encoder anyway)
    given = 0
    for plugin in allure_commons.plugin_manager.get_plugins():
        if type(plugin) is not AllureFileLogger or _ATTRIBUTE in vars(plugin):
            continue
        directory = os.fspath(plugin._report_dir)

        def report_item(item: Any, directory: str = directory) -> None:
            text = json.dumps(asdict(item, filter=_keep), ensure_ascii=False)
            name = item.file_pattern.format(prefix=uuid.uuid4())
            temporary = os.path.join(directory, f"{name}.tmp")
            with open(temporary, "w", encoding="utf8") as fh:
                fh.write(text)
            os.replace(temporary, os.path.join(directory, name))

        setattr(plugin, _ATTRIBUTE, report_item)
        given += 1
    return given
