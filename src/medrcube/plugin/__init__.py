"""plugin: the pytest room.

Imported first by the pytest11 entry point (`medrcube.plugin.hooks`), so it narrows
pytest's assertion rewriting to what needs it before the room's modules are imported
(plugin/speed/assert_rewriting.py).
"""

from medrcube.plugin.speed.assert_rewriting import narrow_installed

narrow_installed()
