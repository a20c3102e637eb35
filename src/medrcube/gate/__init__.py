"""The pure decision core (docs/architecture.md). Its registry of check kinds
(gate/kinds.py) finds the kinds through the entry-point group `medrcube.kinds` when it is
first read, so importing the package registers nothing and imports nothing more."""
