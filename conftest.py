"""Project-local pytest defaults of this checkout (thin on purpose: the gate itself is the
medrcube plugin, loaded through its pytest11 entry point).

`pytester` drives the plugin's own tests (tests/plugin/). pytest only accepts
`pytest_plugins` in a top-level conftest, hence here.
"""

pytest_plugins = ["pytester"]
