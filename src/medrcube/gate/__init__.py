"""The pure decision core (docs/architecture.md). Importing any part of it registers the
product's kinds of check that live in modules of their own (gate/kinds.py): the subgroup
kinds of gate/subgroups.py, whose module imports nothing at its top that imports it back."""

from medrcube.gate import subgroups as _subgroups  # noqa: F401  (registers its kinds and policy section)
