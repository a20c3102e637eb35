"""The built-in checks of the gate, imported from the packaged suite (medrcube/suite/test_gate.py)."""

from medrcube.suite.test_gate import *  # noqa: F401,F403
