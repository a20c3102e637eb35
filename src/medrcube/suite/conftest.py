"""Declares this directory a medrcube qualification suite.

The medrcube pytest plugin (pytest11 entry point) is loaded by every pytest run where
medrcube is installed and stays idle until a suite declares itself with this flag; then
it loads the cube, the thresholds and the model spec at session start, so that any
mistake in them is one usage error before the first model call.
"""

MEDRCUBE_SUITE = True

# The bundled cube (mini/: records and images) holds nothing to collect; pytest need not walk it.
collect_ignore = ["mini"]
