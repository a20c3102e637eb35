"""README.md and NOTICE of the mini cube, written by the builder so that they always match it."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Protocol

from medrcube.taxonomy import KNOWN_PARTS, MODALITIES, TASK_NAMES, task_abbrev


class _Report(Protocol):
    """What the README needs of the builder's report (assembly.BuildReport)."""

    items: int
    images: int
    bytes: int
    per_task: Counter[str]
    per_modality: Counter[str]
    per_part: Counter[str]
    cells: Counter[tuple[str, str, str]]

    def cells_with(self, n: int) -> int: ...

README_TITLE = "# The bundled mini cube"

_INTRO = """\
{title}

A small MedRCube-layout cube made only of real medical images that install offline with
PyPI packages (pydicom, pydicom-data, nibabel, dipy). It lets the qualification gate run
on a fresh machine with no network. It is far too small to qualify a model: it exercises
the machinery (loading, prompting, grading, metrics, credibility chains, the gate) on
real pixels.

**Rebuild** (deterministic: same installed packages, same bytes; about 20 seconds):

    python -m medrcube.construction.mini fixtures/mini
    medrcube build recipes/mini.yaml            # the same, through the build pipeline

`tests/construction/test_build_mini_fixture.py` and `tests/construction/test_build_command.py`
rebuild into a temporary directory and check that every file is byte-identical to what is
committed here. The recipe is `src/medrcube/construction/mini/`, one module per source
family (`volumes`, `dicom_mr`, `dicom_ct`, `radiographs`, `ultrasound`), with the lesion
placements in `placement` and the items and files in `assembly`.

**Layout** (the MedRCube release layout): `<dataset>/test.json` is a list of records
(`id, dataset, image_path, question, option_A..option_D, gt_answer, correct_index, task,
modality, parts, original_task, restricted, meta`), `image_path` is relative to that
`test.json`'s folder, and `<dataset>/images/NNN.png` are 8-bit PNG files (grayscale; RGB
only for colour-Doppler ultrasound) at most 512 px on a side. Each record's `meta` says
where its image came from (`source`: package, file, frame or slice), how its answer was
derived (`derivation`), whether that answer rests on a synthetic modification
(`synthetic`), whether the image carries a synthetic lesion (`synthetic_image`) and, for
lesion items, where the lesion was drawn (`lesion`).
"""

_RULES = """\
## How answers are derived

Answers come from metadata or from construction, never from a guess:

- **Modality Recognition**: the DICOM Modality tag (CR, computed radiography, counts as
  X-ray). NIfTI files have no modality field; for them the answer is the documented source
  (nibabel's and dipy's brain MRI test volumes).
- **View Recognition**: for NIfTI volumes, the plane is known from the affine: the volume
  is cut along a voxel axis, `nibabel.aff2axcodes` says whether that axis runs L-R
  (sagittal), A-P (coronal) or S-I (axial), and the slice normal computed from the affine
  must lie within 20 degrees of that axis (dipy's aniso_vox volume is tilted 35 degrees,
  so only its sagittal cuts are used). For DICOM slices, from ImageOrientationPatient
  under the same 20-degree rule (oblique slices get no view item). For radiographs, from
  ViewPosition (PA, AP).
- **Imaging Protocol Recognition**: MRI sequence tags (ImageType, AcquisitionContrast,
  PulseSequenceName, ProtocolName, ScanningSequence, ScanOptions, TR/TE); the CT
  ImageType (PERFUSION, RCBF); the ultrasound mode bitmap in ImageType value 4 (0001 = 2D,
  0010 = colour Doppler). NIfTI volumes carry no sequence tags: a volume gets a protocol item only where its documentation names the acquisition (nibabel's functional series: BOLD EPI; dipy's S0 volume: the b = 0 image of a diffusion acquisition).
- **Organ Recognition**: BodyPartExamined, an AnatomicRegionSequence code, a reviewed
  Study/Series description, the position reference (sternal notch) and slice location,
  or the documented source; the distractors are body regions far from the answer.
- **Abnormality Diagnosis / ROI Grounding / Severity Grading**: synthetic round lesions
  drawn into real slices by `medrcube.construction.stages.lesions` with a fixed seed: present or
  absent, which image quadrant (the whole disc lies inside it, clear of the midlines),
  and a size class by diameter relative to the shorter image side (small under 8%,
  medium 8-14%, large 14-25%, very large over 25%; drawn at 5.5%, 11%, 18% and 30%).
  Lesions are placed inside the anatomy (inside the lungs for the chest CT, cropped to
  its lung fields so that every quadrant holds lung, and the radiograph). "No lesion" is asked only of unmodified images from sources with no
  documented pathology and none visible on review (never of the CT perfusion study, the
  liver MRI with its marked lesion, or the chest radiograph). The chest radiograph shows
  several real round opacities of its own (no finding is documented for it), so its
  synthetic nodules support only a presence item: a location or size item about "the
  lesion" would be ambiguous there. One real finding is used as it is: the abdominal MRI
  whose series is titled "marked lesion" and whose overlay circles a liver lesion.
- **Lesion placements**: sources with many slices or frames (the NIfTI volumes, the head
  volume, the echocardiogram cine) alternate an unmodified slice and a slice with a lesion,
  so every image there is a different slice. Sources with one or two slices (the chest,
  abdominal and perfusion CT, the shoulder MRI, the colour-Doppler frame, the pelvic scan)
  carry many lesion placements on the same slice: each copy is a new image whose location
  and size answers differ. Only as many copies of a slice ask "is there a lesion?" as it
  has unmodified copies asked "no lesion", so the presence items stay balanced between Yes
  and No (the perfusion study, never asked "no lesion", asks it once per frame); the
  other copies ask where the lesion is and how large.
- **Disease Diagnosis**: the one real diagnosis that ships, the distal tibia radiograph
  whose StudyDescription reads "Non-ossifying fibroma of distal tibia", asked of one image
  of the film (a second crop would repeat the diagnosis, and each item would give the
  other away to a text model). Its part, "Lower Limb", is not one of the five MedRCube
  regions: the axes are open sets and the honest name is kept.
- Distractors are other values of the same axis (other modalities, planes, projections,
  protocols, body regions, bone lesions, quadrants, size classes), mutually exclusive with
  the answer and with each other. The correct letter is spread evenly over A-D per task.

Every image carries a chain: at least one low- or mid-level item and one high-level item
on the same image, so the credibility analysis has pairs.

Copies of one slice repeat that slice's modality, protocol and region items (its view item
is asked once per slice). Those repeats are near-duplicates: a model that misreads the
slice misreads every copy, so in the cells of single-slice sources the effective number
of independent observations is smaller than the item count. Every copy's `meta.source`
(package, file and `where`) is the same, which is what a grouping by source slice keys on.
The cube exercises the gate on real pixels; it is not evidence for qualifying a model.

## Coverage and honesty notes

- No breast image ships in any package that installs offline (pydicom, pydicom-data,
  nibabel, dipy, nilearn and scikit-image were surveyed), so the cube has no Breast part.
  Nor does any cardiac MRI or CT ship: the heart is covered by ultrasound only.
- Parts outside the five MedRCube regions are kept under honest names: Abdomen,
  Shoulder, Lower Limb, Pelvis. The taxonomy knows them (`taxonomy.EXTRA_PARTS`: no
  "unknown part" warning), but they are not MedRCube parts.
- The brain MRI volumes of nibabel and dipy are small research test volumes (2-4 mm
  voxels), shown upsampled.

## Privacy

- Nothing from a DICOM header is copied into this directory except the technical
  attributes quoted in derivations (Modality, ImageType, BodyPartExamined, ViewPosition,
  sequence parameters, orientation) and four descriptions that were reviewed and are
  checked against their expected value at every build. No patient, staff or
  institution name, identifier, date or UID is written; a test searches every file here
  for the identifying values of every source file.
- The PNG files carry only IHDR, IDAT and IEND chunks (no text, time or profile chunk).
- Burned-in text is removed from the pixels: ultrasound frames are cropped inside their
  tissue regions (SequenceOfUltrasoundRegions), away from all on-screen text and labels,
  and the lead side marker burned into the tibia radiograph is masked.
- Excluded sources: pydicom-data's `693_*` files (CQ500, a non-commercial licence) and
  `J2K_pixelrep_mismatch.dcm` (a patient ID without a de-identification flag). Files that
  need a GPL decoder (JPEG lossless, JPEG-LS) are refused by the reader; uncompressed
  copies are used where a lossy JPEG 2000 copy also exists.

Licences of the sources: see `NOTICE`.
"""


def _counts_table(title: str, counter: Counter[str]) -> list[str]:
    lines = [f"| {title} | items |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(counter.items())]
    return lines + [""]


def _rank(value: str, order: tuple[str, ...]) -> tuple[int, str]:
    return (order.index(value) if value in order else len(order), value)


def _cells_table(cells: Counter[tuple[str, str, str]]) -> list[str]:
    """Items per (part, modality) row and task column, as `medrcube cube stats` prints them."""
    tasks = [t for t in TASK_NAMES if any(c[2] == t for c in cells)]
    pairs = sorted({(c[0], c[1]) for c in cells}, key=lambda pm: (_rank(pm[0], KNOWN_PARTS), _rank(pm[1], MODALITIES)))
    lines = ["| part | modality | " + " | ".join(task_abbrev(t) for t in tasks) + " |", "|---|---|" + "---:|" * len(tasks)]
    for part, modality in pairs:
        counts = [cells.get((part, modality, t), 0) for t in tasks]
        lines.append(f"| {part} | {modality} | " + " | ".join(str(n) if n else "." for n in counts) + " |")
    return lines + [""]


def render_readme(rows: dict[str, list[dict[str, Any]]], report: _Report) -> str:
    """The README: fixed prose, generated counts, and one table per dataset folder."""
    out = [_INTRO.format(title=README_TITLE)]
    out.append("## Numbers\n")
    out.append(
        f"{report.items} items on {report.images} images in {len(rows)} dataset folders, covering "
        f"{len(report.cells)} (part, modality, task) cells, {report.cells_with(24)} of which hold 24 items "
        f"or more; every image is a chain. The PNG and JSON files total {report.bytes / 1e6:.2f} MB.\n"
    )
    per_task = {t: report.per_task[t] for t in TASK_NAMES if report.per_task[t]}
    out += ["| task | items |", "|---|---|", *[f"| {t} ({task_abbrev(t)}) | {n} |" for t, n in per_task.items()], ""]
    out += _counts_table("modality", report.per_modality)
    out += _counts_table("part", report.per_part)
    out.append("Items per cell ('.' = none):\n")
    out += _cells_table(report.cells)
    out.append(_RULES)
    out.append("## Where every image came from\n")
    for dataset in sorted(rows):
        out.append(f"### `{dataset}/`\n")
        out.append("| image | source (package: path) | where | processing | items (task: answer) |")
        out.append("|---|---|---|---|---|")
        derivations: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for row in rows[dataset]:
            pic = row["pic"]
            name = row["rel"].rsplit("/", 1)[-1]
            answers = "; ".join(f"{task_abbrev(fact.task)}: {fact.answer}" for fact, _ in row["answers"])
            lesion = row["lesion"]
            processing = pic.processing + (
                f"; synthetic {lesion['size_class']} lesion, {lesion['quadrant']}" if lesion else ""
            )
            out.append(f"| `{name}` | {pic.source.citation()} | {pic.locator} | {processing} | {answers} |")
            for fact, _ in row["answers"]:
                text = "by construction: see the item's `meta.lesion` and `meta.derivation`" if fact.synthetic and lesion else fact.derivation
                derivations[fact.task][text].append(name.removesuffix(".png"))
        out.append("")
        out.append("Derivations:\n")
        for task in TASK_NAMES:
            for text, images in derivations.get(task, {}).items():
                out.append(f"- {task} ({', '.join(images)}): {text}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


NOTICE = """\
NOTICE for fixtures/mini (the bundled mini cube of medrcube)

The images in this directory are derived (windowed, cropped, resampled, some with a
synthetic lesion drawn in) from data files distributed with the open-source packages
below. The questions, answers and README were written by medrcube's builder
(src/medrcube/construction/mini/) and are covered by medrcube's own licence. Each package's
files are redistributed here under that package's licence, as summarised below; the
licence texts themselves follow at the end, as the licences require.

1. pydicom (data/test_files): CT_small.dcm, examples_overlay.dcm, examples_ybr_color.dcm.
   Licence: MIT. Copyright (c) 2008-2020 Darcy Mason and pydicom contributors.
   pydicom's test-file notes say CT_small.dcm was downsized from the NEMA WG04 sample
   CT1, and examples_overlay.dcm was cut from MR-SIEMENS-DICOM-WithOverlays.dcm, a GDCM
   test file (see 3).

2. pydicom-data (module data_store, the pydicom project's test-data store):
   emri_small.dcm, MR2_UNCR.dcm, explicit_VR-UN.dcm, eCT_Supplemental.dcm, RG1_UNCR.dcm,
   RG3_UNCR.dcm, color-pl.dcm, gdcm-US-ALOKA-16.dcm.
   Licence: MIT. Copyright (c) 2020 Dicom in Python.
   pydicom's notes name the origins: NEMA WG04 sample sets (MR2, RG1, RG3), the NEMA
   multi-frame CT samples (eCT_Supplemental), The Cancer Imaging Archive's freely
   available de-identified data (explicit_VR-UN), and GDCM (gdcm-US-ALOKA-16, see 3).

3. Files that pydicom received from GDCM (Grassroots DICOM): examples_overlay.dcm and
   gdcm-US-ALOKA-16.dcm. They are under GDCM's BSD-style licence:
   Copyright (c) 2006-2016 Mathieu Malaterre; Copyright (c) 1993-2005 CREATIS (Centre de
   Recherche et d'Applications en Traitement de l'Image). All rights reserved. The
   licence text (conditions and disclaimer) is reproduced below.

4. nibabel: tests/data/anatomical.nii, tests/data/example4d.nii.gz,
   nicom/tests/data/slicethickness_empty_string.dcm.
   Licence: MIT. Copyright (c) 2009-2019 Matthew Brett, (c) 2010-2013 Stephan Gerhard,
   (c) 2006-2014 Michael Hanke, (c) 2011 Christian Haselgrove, (c) 2010-2011 Jarrod
   Millman, (c) 2011-2019 Yaroslav Halchenko, (c) 2015-2019 Chris Markiewicz.

5. dipy: data/files/S0_10slices.nii.gz, data/files/aniso_vox.nii.gz.
   Licence: BSD 3-clause ("new BSD"). Copyright (c) 2008-2026, dipy developers.
   All rights reserved.

None of the packages' authors endorses medrcube or this derived data.

----------------------------------------------------------------------------------------
MIT licence (applies to 1, 2 and 4 with their copyright lines above)

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.

----------------------------------------------------------------------------------------
GDCM licence (applies to 3)

Program: GDCM (Grassroots DICOM). A DICOM library

Copyright (c) 2006-2016 Mathieu Malaterre
Copyright (c) 1993-2005 CREATIS
(CREATIS = Centre de Recherche et d'Applications en Traitement de l'Image)
All rights reserved.

Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are met:

 * Redistributions of source code must retain the above copyright notice,
   this list of conditions and the following disclaimer.

 * Redistributions in binary form must reproduce the above copyright notice,
   this list of conditions and the following disclaimer in the documentation
   and/or other materials provided with the distribution.

 * Neither name of Mathieu Malaterre, or CREATIS, nor the names of any
   contributors (CNRS, INSERM, UCB, Universite Lyon I), may be used to
   endorse or promote products derived from this software without specific
   prior written permission.

THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS ``AS IS''
AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE
ARE DISCLAIMED. IN NO EVENT SHALL THE AUTHORS OR CONTRIBUTORS BE LIABLE FOR
ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL
DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR
SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER
CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY,
OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.

----------------------------------------------------------------------------------------
dipy licence (applies to 5)

Copyright (c) 2008-2026, dipy developers
All rights reserved.

Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are
met:

    * Redistributions of source code must retain the above copyright
       notice, this list of conditions and the following disclaimer.

    * Redistributions in binary form must reproduce the above
       copyright notice, this list of conditions and the following
       disclaimer in the documentation and/or other materials provided
       with the distribution.

    * Neither the name of the dipy developers nor the names of any
       contributors may be used to endorse or promote products derived
       from this software without specific prior written permission.

THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS
"AS IS" AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT
LIMITED TO, THE IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR
A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT
OWNER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL,
SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT
LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE,
DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY
THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
(INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
"""
