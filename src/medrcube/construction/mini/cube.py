"""The bundled mini cube: real images from installed PyPI packages, answers from real metadata.

    python -m medrcube.construction.mini [OUT_DIR]        # default: fixtures/mini
    python -m medrcube.construction.mini.cube [OUT_DIR]   # the same

rebuilds `OUT_DIR` (release layout: `<dataset>/test.json` + `<dataset>/images/*.png`,
plus README.md and NOTICE) deterministically from pydicom, pydicom-data, nibabel and
dipy: fixed seeds, sorted iteration, and a metadata-free PNG encoder, so the same
installed packages always give the same bytes.

The recipe is one module per source family, each saying which files to read, which frame
or slice to cut, how to window and crop it, and which Fact each piece of metadata supports:

    volumes      NIfTI brain volumes (nibabel, dipy), cut along true planes
    dicom_mr     MRI DICOM (head volume, angiogram, shoulder, liver)
    dicom_ct     CT DICOM (chest, abdomen, perfusion)
    radiographs  computed radiographs (chest, the tibia with its documented fibroma)
    ultrasound   echocardiograms and the pelvic scan
    placement    lesion copies of a picture, and drawing the lesions
    assembly     items, files, README.md and NOTICE

The reusable parts of the construction pipeline live beside it (`readers.sources`,
`privacy.deid`, `stages.lesions`, `stages.questions`, `imageio`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from medrcube.construction.dicom_attributes import SourceError
from medrcube.construction.mini import docs as mini_docs
from medrcube.construction.mini.assembly import BuildReport, read_pictures, write_cube
from medrcube.construction.mini.common import Picture
from medrcube.construction.mini.dicom_ct import pydicom_ct
from medrcube.construction.mini.dicom_mr import pydicom_mr
from medrcube.construction.mini.radiographs import cr_radiographs
from medrcube.construction.mini.ultrasound import echo_us, pelvis_us
from medrcube.construction.mini.volumes import dipy_brain, nibabel_brain

__all__ = ["DEFAULT_OUT", "RECIPE", "BuildReport", "build", "main", "mini_docs"]

DEFAULT_OUT = Path("fixtures/mini")
RECIPE: tuple[Callable[[], list[Picture]], ...] = (nibabel_brain, dipy_brain, pydicom_mr, pydicom_ct, cr_radiographs, echo_us, pelvis_us)


def build(out_dir: str | Path = DEFAULT_OUT) -> BuildReport:
    """Rebuild the mini cube into `out_dir` (replacing a previous build there)."""
    pictures = read_pictures(RECIPE)  # read every source before touching `out_dir`
    return write_cube(pictures, out_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m medrcube.construction.mini",
        description="Rebuild the bundled mini cube from images inside installed packages (pydicom, pydicom-data, nibabel, dipy).",
    )
    parser.add_argument("out_dir", nargs="?", default=str(DEFAULT_OUT), help="output directory (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        report = build(args.out_dir)
    except SourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
