"""The qualification suite's conftest: it declares this directory a medrcube gate suite.

The medrcube pytest plugin (loaded through its pytest11 entry point) stays idle in every
other pytest run; when this conftest is part of the run it loads the cube, the
thresholds and the model spec at session start, so that any mistake in them is one
usage error before the first model call. Options: `pytest --help`, group "medrcube".
"""

MEDRCUBE_SUITE = True
