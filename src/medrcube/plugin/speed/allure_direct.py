"""A gate case's Allure labels, parameters, title and description set on its test result at once.

Each `allure.dynamic` call is a pluggy hook call that allure-pytest's listener answers by
looking up the running case's test result again (through allure-commons' per-thread item
table) and appending one label or parameter to it: about 20 us a call, and a gate case makes
about 17 of them (plugin/allure.py), 35-50 ms for the 110 cases of the paper's scale after the
last answer (docs/speed.md). Here the listener's test result is looked up once a case and
given the very objects the listener's hook implementations would append (`Label`, and a
`Parameter` with allure's `represent`), in the same order, with the same rule for a parameter
set twice (its value replaced).

Only when allure-pytest's listener is the one implementation of every hook concerned: a
plugin that also implements one (its own Allure extension) gets the hook calls as before
(`labels_target` returns None and plugin/allure.py calls `allure.dynamic`).
tests/plugin/test_allure_direct.py compares the result files of real gate runs made both ways.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# The hooks whose work is done here; each must be answered by the listener alone.
_HOOKS = ("add_label", "add_parameter", "add_title", "add_description")


def allure_active() -> bool:
    """Whether anything in this process answers Allure's dynamic calls (allure-pytest with
    --alluredir): without it every call is a no-op, and what it would be given need not be made."""
    try:
        from allure_commons import plugin_manager
    except ImportError:
        return False
    return bool(plugin_manager.hook.add_label.get_hookimpls())


def labels_target() -> Any | None:
    """The running case's test result held by allure-pytest's listener, when that listener
    is the only implementation of each dynamic hook this module stands in for; else None."""
    try:
        from allure_commons import plugin_manager
        from allure_pytest.listener import AllureListener
    except ImportError:
        return None
    listener = None
    for name in _HOOKS:
        impls = getattr(plugin_manager.hook, name).get_hookimpls()
        if len(impls) != 1 or type(impls[0].plugin) is not AllureListener:
            return None
        if listener is None:
            listener = impls[0].plugin
        elif impls[0].plugin is not listener:
            return None
    assert listener is not None
    return listener.allure_logger.get_test(None)


def apply(result: Any, *, labels: Iterable[tuple[str, Any]] = (), parameters: Iterable[tuple[str, Any]] = (),
          excluded: bool = False, title: str | None = None, description: str | None = None) -> None:
    """What the listener's add_label, add_parameter, add_title and add_description would do
    to `result`, call by call in this order (parameters with `excluded` and no mode)."""
    from allure_commons.model2 import Label, Parameter
    from allure_commons.utils import represent

    for label_type, value in labels:
        result.labels.append(Label(label_type, value))
    for name, value in parameters:
        shown = represent(value)
        existing = next((p for p in result.parameters if p.name == name), None)
        if existing is not None:
            existing.value = shown
        else:
            result.parameters.append(Parameter(name=name, value=shown, excluded=excluded or None, mode=None))
    if title is not None:
        result.name = title
    if description is not None:
        result.description = description
