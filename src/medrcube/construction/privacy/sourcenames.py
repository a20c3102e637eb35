"""Source paths by coded names: nothing a console line or a log says names a patient's folder.

An archive is often laid out by patient ("VOGONSKY_JELTZINA/CT/IM0001.dcm"), and such a
folder name appears in no header, so the header-based redaction cannot know it. Every
message a build prints about its sources goes through `SourceNames.scrub`, which replaces
every source folder and every folder and file below it by a coded name (a labels file
named by the recipe keeps its name, unless it lies inside a source folder): `demo-dicom file 17` is the 17th file of the source in sorted order (`find SRC -type
f | sort | sed -n 17p` finds it), `demo-dicom folder 3` the 3rd folder, and the source's own
folder `<demo-dicom source>`.

The same names are identifying values for the final scan of the exported pixels (a
folder's name burned into a frame is a leak too): `values()`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from medrcube.construction.recipe import Recipe

PATH_SOURCE = "folder or file name"


def _walk(root: Path) -> tuple[list[Path], list[Path]]:
    """(folders, files) below `root`, sorted the way `find ROOT | sort` lists them."""
    folders: list[Path] = []
    files: list[Path] = []
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        folders += [Path(folder) / d for d in dirs]
        files += [Path(folder) / n for n in names]
    return sorted(folders), sorted(files)


@dataclass
class SourceNames:
    """Coded names of every path of a recipe's sources."""

    codes: dict[str, str] = field(default_factory=dict)  # a spelling of a path (absolute, relative, a name) -> its code
    names: set[str] = field(default_factory=set)  # folder and file names below the sources (for the pixel scan)

    @classmethod
    def of(cls, recipe: Recipe) -> SourceNames:
        out = cls()
        for spec in recipe.sources:
            if spec.path is None or not spec.path.is_dir():
                continue
            root = spec.path
            folders, files = _walk(root.resolve())
            for kind, paths in (("folder", folders), ("file", files)):
                for i, p in enumerate(paths, start=1):
                    rel = p.relative_to(root.resolve())
                    code = f"{spec.dataset} {kind} {i}"
                    out._add(p, code, rel.as_posix(), str(root / rel))
                    out.names.add(p.name)
            out._add(root, f"<{spec.dataset} source>", str(root.resolve()))
        return out

    def _add(self, path: Path, code: str, *spellings: str) -> None:
        for s in (str(path), *spellings):
            if s and s != ".":
                self.codes.setdefault(s, code)

    def scrub(self, text: str) -> str:
        """`text` with every spelling of every source path replaced by its coded name (longest first),
        then any folder or file name left on its own (a message quoting a part of a path)."""
        out = str(text)
        for s in sorted(self.codes, key=len, reverse=True):
            if s in out:
                out = out.replace(s, self.codes[s])
        for name in sorted(self.names, key=len, reverse=True):
            if len(name) >= 3 and name in out:
                out = re.sub(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", "[source name]", out)
        return out

    def values(self) -> dict[str, str]:
        """Folder and file names below the sources (extensions dropped), as identifying values -> source."""
        out = {}
        for name in sorted(self.names):
            stem = name.split(".", 1)[0] if "." in name else name
            if len(stem) >= 4 and not name.startswith("."):
                out[stem.replace("_", " ")] = PATH_SOURCE
        return out
