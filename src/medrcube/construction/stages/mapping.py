"""Stage I, competency mapping: what an image's metadata and labels say, in the cube's terms.

For each de-identified `SourceImage` this module derives its part and modality and the
tasks its metadata supports, each with an answer and a derivation that quotes the
evidence:

- Modality Recognition: the DICOM Modality tag, else a label column or the recipe's
  documented modality;
- View Recognition: the plane from ImageOrientationPatient (or a NIfTI affine), within
  20 degrees of a patient axis (oblique slices get no item); the projection of a
  radiograph from ViewPosition or a label;
- Imaging Protocol Recognition: MRI weighting from the sequence parameters (diffusion
  b-value; inversion time; TR and TE of spin-echo sequences) and the sequence names; CT
  perfusion from ImageType, contrast from ContrastBolusAgent; the ultrasound mode bitmap;
  conflicting evidence gives no item;
- Organ Recognition: BodyPartExamined, a label, or the recipe's documented organ;
- Abnormality Diagnosis, Disease Diagnosis, Severity Grading: the label columns, mapped
  to ontology concepts and severity scales;
- ROI Grounding: boxes and masks (the finding inside a region outlined on the image,
  and the quadrant of a region that lies wholly in one quadrant).

Terms are mapped to canonical names through the bundled vocabulary (vocabulary.py reads
`vocabulary.yaml`) and ontology (`ontology.yaml`); the protocol rules and the quoting of
DICOM tags are in protocol.py. What cannot be mapped is counted in a `MappingReport`,
never guessed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medrcube.construction.dicom_attributes import ultrasound_modes, view_from_iop
from medrcube.construction.observation import Competency, Mapped, SourceImage
from medrcube.construction.stages import lesions, questions
from medrcube.construction.stages.ontology import Ontology, norm_term
from medrcube.construction.stages.protocol import (
    combine,
    listify,
    mr_protocol_from_parameters,
    protocol_from_names,
    quote_tag,
    tag_name,
)
from medrcube.construction.stages.vocabulary import Vocabulary, term_key
from medrcube.taxonomy import canonical_modality, canonical_part

CROSS_SECTIONAL = ("CT", "MRI")


# -- the report ----------------------------------------------------------------------------


@dataclass
class MappingReport:
    """What Stage I could not map or derive, counted (values are technical terms and labels)."""

    images: int = 0
    mapped: int = 0
    unmapped: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (field, raw value, why) -> images
    not_derived: Counter[tuple[str, str]] = field(default_factory=Counter)  # (task, why) -> images
    skipped: Counter[str] = field(default_factory=Counter)  # why an image got no item at all -> images

    def to_dict(self) -> dict[str, Any]:
        return {
            "images": self.images,
            "mapped": self.mapped,
            "unmapped": [{"field": f, "value": v, "why": w, "images": n} for (f, v, w), n in sorted(self.unmapped.items())],
            "not_derived": [{"task": t, "why": w, "images": n} for (t, w), n in sorted(self.not_derived.items())],
            "skipped": dict(sorted(self.skipped.items())),
        }


def split_labels(raw: str) -> list[str]:
    """A label cell may hold several values separated by ';' or '|'."""
    return [p.strip() for p in re.split(r"[;|]", str(raw)) if p.strip()]


# -- the mapper ----------------------------------------------------------------------------


class Mapper:
    """Stage I for one recipe: SourceImage -> Mapped (or None, counted in the report)."""

    def __init__(self, vocab: Vocabulary, onto: Ontology, *, tasks: Sequence[str], diagnosis_values: Mapping[str, str] | None = None,
                 severity_scale: Sequence[str] | None = None, severity_values: Mapping[str, str] | None = None):  # fmt: skip
        self.vocab, self.onto = vocab, onto
        self.tasks = set(tasks)
        self.diagnosis_values = {norm_term(k): v for k, v in (diagnosis_values or {}).items()}
        self.scale = tuple(severity_scale or ())
        self.severity_values = {norm_term(k): v for k, v in (severity_values or {}).items()}
        self.report = MappingReport()

    # -- axes --

    def _modality(self, img: SourceImage) -> tuple[str, str, str] | None:
        raw = img.meta.get("Modality")
        if raw:
            hit = self.vocab.modality.get(term_key(raw))
            if hit:
                note = " (computed radiography: an X-ray technique)" if str(raw).upper() == "CR" else ""
                return hit, f"DICOM {quote_tag('Modality', raw)}{note}.", "DICOM Modality tag"
            self.report.unmapped[("modality", str(raw), "not in the vocabulary's modality table")] += 1
            return None
        h = img.hints.get("modality")
        if h:
            hit = self.vocab.modality.get(term_key(h.value)) or (canonical_modality(h.value).value if canonical_modality(h.value).known else None)
            if hit:
                return hit, f"{h.derivation}.", h.original_task
            self.report.unmapped[("modality", h.value, "not in the vocabulary's modality table")] += 1
            return None
        self.report.unmapped[("modality", "", "no Modality tag, label or documented modality")] += 1
        return None

    def _part_organ(self, img: SourceImage) -> tuple[str | None, tuple[str, str, str] | None]:
        """(part axis value, (organ answer, derivation, original task)); either may be None."""
        part = organ = None
        raw = img.meta.get("BodyPartExamined")
        if raw:
            hit = self.vocab.body_part.get(term_key(raw))
            if hit:
                part = hit[0]
                organ = (hit[1], f"{quote_tag('BodyPartExamined', raw)}.", "DICOM BodyPartExamined")
            else:
                self.report.unmapped[("body part", str(raw), "not in the vocabulary's body_part table")] += 1
        h = img.hints.get("organ")
        if h and organ is None:
            name = self.vocab.organ(h.value)
            if name:
                organ = (name, f"{h.derivation}.", h.original_task)
            else:
                self.report.unmapped[("organ", h.value, "not an organ_options entry or body part of the vocabulary")] += 1
        h = img.hints.get("part")
        if h:
            hit = self.vocab.body_part.get(term_key(h.value))
            hinted = hit[0] if hit else canonical_part(h.value).value
            if part is None:
                part = hinted
                if organ is None and hit:
                    organ = (hit[1], f"{h.derivation}.", h.original_task)
            elif hinted != part:
                self.report.unmapped[("part", h.value, f"disagrees with BodyPartExamined ({part}); the metadata is used")] += 1
        return part, organ

    # -- tasks --

    def _view(self, img: SourceImage, modality: str) -> Competency | None:
        if modality in CROSS_SECTIONAL:
            iop = img.meta.get("ImageOrientationPatient")
            if iop is not None and len(iop) == 6:
                plane = view_from_iop([float(v) for v in iop])
                if plane is None:
                    self.report.not_derived[("View Recognition", "oblique ImageOrientationPatient")] += 1
                    return None
                axis = {"axial": "head-foot", "coronal": "front-back", "sagittal": "left-right"}[plane]
                deriv = (f"ImageOrientationPatient {[round(float(v), 4) for v in iop]}: the slice normal (row x column) lies "
                         f"within 20 degrees of the patient's {axis} axis, so the slice is {plane}.")  # fmt: skip
                return self._plane(plane, deriv, "DICOM ImageOrientationPatient")
            h = img.hints.get("plane")
            if h:
                return self._plane(h.value, f"{h.derivation}.", h.original_task)
            self.report.not_derived[("View Recognition", "no orientation")] += 1
            return None
        if modality == "X-Ray":
            raw = img.meta.get("ViewPosition")
            deriv, orig = (f"DICOM {quote_tag('ViewPosition', raw)}.", "DICOM ViewPosition tag") if raw else ("", "")
            if not raw and img.hints.get("view"):
                h = img.hints["view"]
                raw, deriv, orig = h.value, f"{h.derivation}.", h.original_task
            if not raw:
                self.report.not_derived[("View Recognition", "no ViewPosition or view label")] += 1
                return None
            hit = self.vocab.view_position.get(term_key(raw))
            if hit is None:
                self.report.unmapped[("view", str(raw), "not in the vocabulary's view_position table")] += 1
                return None
            pool = tuple(p for p in self.vocab.projection_sets[hit[0]] if p != hit[1])
            return Competency("View Recognition", "projection", hit[1], deriv, orig, pool=pool)
        return None

    def _plane(self, plane: str, deriv: str, orig: str) -> Competency | None:
        answer = plane.strip().capitalize()
        if answer not in questions.PLANE_OPTIONS or answer == "Oblique":
            self.report.unmapped[("plane", plane, "not axial, coronal or sagittal")] += 1
            return None
        return Competency("View Recognition", "plane", answer, deriv, orig, pool=tuple(p for p in questions.PLANE_OPTIONS if p != answer))

    def _protocol(self, img: SourceImage, modality: str) -> Competency | None:
        meta, vocab, onto = img.meta, self.vocab, self.onto
        rule: str | None = None
        rule_why = ""
        names = [(str(meta[k]), tag_name(k)) for k in ("ProtocolName", "SequenceName") if meta.get(k)]
        h = img.hints.get("protocol")
        if h:
            names.append((h.value, h.derivation))
        if modality == "MRI":
            rule, rule_why = mr_protocol_from_parameters(meta)
            hits, quoted = protocol_from_names(names, vocab)
            hits = {c for c in hits if onto[c].category == "mr_protocol"}
            kind, orig = "mr_protocol", "DICOM sequence tags"
        elif modality == "CT":
            it = listify(meta.get("ImageType"))
            if "PERFUSION" in it:
                rule, rule_why = "ct_perfusion", f"{quote_tag('ImageType', meta['ImageType'])} (PERFUSION)"
            elif meta.get("ContrastBolusAgent"):
                rule, rule_why = "contrast_ct", "ContrastBolusAgent (0018,0010) is present: a contrast agent was given"
            hits, quoted = protocol_from_names(names, vocab)
            hits = {c for c in hits if onto[c].category == "ct_protocol"}
            kind, orig = "ct_protocol", "DICOM acquisition tags"
        elif modality == "US":
            modes = ultrasound_modes(listify(meta.get("ImageType")) or None)
            mode = "b_mode" if modes == ("2D",) else None
            if mode is None and "Color Doppler" in modes:
                mode = "color_doppler"
            elif mode is None and "Color Power Mode" in modes:
                mode = "power_doppler"
            elif mode is None and modes in (("PW Doppler",), ("2D", "PW Doppler")):
                mode = "pw_doppler"
            elif mode is None and "M-mode" in modes and "Color M-mode" not in modes:
                mode = "m_mode"
            if mode:
                rule, rule_why = mode, (f"{quote_tag('ImageType', meta['ImageType'])}: value 4 is the ultrasound mode bitmap "
                                        f"(DICOM PS3.3 C.8.5.6.1.1) = {' + '.join(modes)}")  # fmt: skip
            hits, quoted = protocol_from_names(names, vocab)
            hits = {c for c in hits if onto[c].category == "us_mode"}
            kind, orig = "us_mode", "DICOM ImageType mode bitmap"
        else:
            return None
        concept, conflict = combine(onto, rule, hits)
        if conflict:
            self.report.not_derived[("Imaging Protocol Recognition", conflict)] += 1
            return None
        if concept is None:
            self.report.not_derived[("Imaging Protocol Recognition", f"{modality}: {rule_why or 'no sequence evidence'}")] += 1
            return None
        evidence = [e for e in (rule_why if rule else "", quoted) if e]
        if h and not img.meta:
            orig = h.original_task
        return Competency("Imaging Protocol Recognition", kind, concept, "; ".join(evidence) + ".", orig, concept=True)

    def _concept(self, raw: str, part: str, categories: tuple[str, ...], field_name: str) -> str | None:
        target = self.diagnosis_values.get(norm_term(raw), raw)
        look = self.onto.lookup(target, region=part, categories=categories)
        if look.concept is None:
            self.report.unmapped[(field_name, raw, look.reason)] += 1
            return None
        return look.concept.id

    def _labels(self, img: SourceImage, part: str) -> list[Competency]:
        out: list[Competency] = []
        dx_concept: str | None = None
        normal: bool | None = None
        abn_deriv = ""
        h = img.labels.get("diagnosis")
        if h:
            values = split_labels(h.value)
            normals = [v for v in values if term_key(v) in self.vocab.normal_labels]
            others = [v for v in values if term_key(v) not in self.vocab.normal_labels]
            if normals and others:
                self.report.unmapped[("diagnosis", h.value, "both normal and abnormal labels")] += 1
            elif normals:
                normal, abn_deriv = True, f"{h.derivation} (a normal study)."
            elif others:
                concepts = [self._concept(v, part, ("disease", "finding", "lesion_class"), "diagnosis") for v in others]
                known = [c for c in concepts if c]
                if len(known) == len(concepts):  # every label mapped
                    normal, abn_deriv = False, f"{h.derivation} (a labelled abnormality)."
                    if len(set(known)) == 1:
                        dx_concept = known[0]
                        c = self.onto[dx_concept]
                        task, kind = ("Abnormality Diagnosis", "finding") if c.category == "finding" else ("Disease Diagnosis", "diagnosis")
                        out.append(Competency(task, kind, dx_concept, f"{h.derivation}.", h.original_task, concept=True))
                    else:
                        self.report.not_derived[("Disease Diagnosis", "several diagnoses on one image")] += 1
        h = img.labels.get("abnormality")
        if h:
            v = term_key(h.value)
            stated = True if v in self.vocab.normal_labels else False if v in self.vocab.abnormal_labels else None
            if stated is None:
                self.report.unmapped[("abnormality", h.value, "neither a normal nor an abnormal label of the vocabulary")] += 1
            elif normal is not None and stated != normal:
                self.report.unmapped[("abnormality", h.value, "contradicts the diagnosis label")] += 1
                normal = None
            else:
                normal, abn_deriv = stated, f"{h.derivation}."
        if normal is not None:
            answer = "No" if normal else "Yes"
            out.append(Competency("Abnormality Diagnosis", "abnormality", answer, abn_deriv, "labels", pool=tuple(x for x in questions.YES_NO if x != answer)))
        h = img.labels.get("severity")
        if h:
            if not self.scale:
                self.report.unmapped[("severity", h.value, "the recipe names no severity scale (labels.severity.scale)")] += 1
            elif normal:
                self.report.unmapped[("severity", h.value, "a severity on a normal study")] += 1
            else:
                grade = self.severity_values.get(norm_term(h.value)) or next((s for s in self.scale if norm_term(s) == norm_term(h.value)), None)
                if grade is None:
                    self.report.unmapped[("severity", h.value, f"not a grade of the scale {list(self.scale)} nor in labels.severity.values")] += 1
                else:
                    finding = self.onto[dx_concept].name if dx_concept else None
                    out.append(Competency("Severity Grading", "severity", grade, f"{h.derivation} -> {grade!r}.", h.original_task,
                                          pool=tuple(s for s in self.scale if s != grade), finding=finding))  # fmt: skip
        return out + self._rois(img, part, dx_concept)

    def _rois(self, img: SourceImage, part: str, dx_concept: str | None) -> list[Competency]:
        out: list[Competency] = []
        if not img.rois:
            return out
        h, w = img.pixels.shape[:2]
        concepts: list[str | None] = []
        for roi in img.rois:
            x0, y0, x1, y1 = roi.box
            if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
                self.report.unmapped[("roi", f"{roi.box}", f"outside the {w}x{h} image")] += 1
                concepts.append(None)
                continue
            if roi.label:
                concepts.append(self._concept(roi.label, part, ("finding", "disease", "lesion_class"), "roi label"))
            else:
                concepts.append(dx_concept if len(img.rois) == 1 else None)
        for i, (roi, cid) in enumerate(zip(img.rois, concepts, strict=True)):
            if cid is None:
                continue
            deriv = f"{'Mask' if roi.source == 'mask' else 'Box'} {list(roi.box)} (x0, y0, x1, y1 in source pixels) labelled {self.onto[cid].name!r}"
            same = [j for j, c in enumerate(concepts) if c == cid]
            if len(same) == 1:
                out.append(Competency("ROI Grounding", "roi_identify", cid, f"{deriv}; the region is outlined in red on the image.",
                                      "labelled region", concept=True, roi=i, marked=True))  # fmt: skip
                quadrant = _quadrant_of_box(roi.box, (h, w))
                if quadrant is None:
                    self.report.not_derived[("ROI Grounding", "region crosses an image midline (no quadrant item)")] += 1
                else:
                    pool = tuple(q.capitalize() for q in lesions.QUADRANTS if q != quadrant)
                    out.append(Competency("ROI Grounding", "roi_locate", quadrant.capitalize(),
                                          f"{deriv}; the whole region lies in the {quadrant} quadrant.", "labelled region",
                                          pool=pool, finding=self.onto[cid].name, roi=i))  # fmt: skip
            else:
                self.report.not_derived[("ROI Grounding", "the same finding is marked more than once")] += 1
        return out

    # -- one image --

    def map(self, img: SourceImage) -> Mapped | None:
        self.report.images += 1
        mod = self._modality(img)
        part, organ = self._part_organ(img)
        if mod is None or part is None:
            why = "modality not mapped" if mod is None else "part not mapped (no BodyPartExamined, label or recipe part)"
            if part is None and mod is not None:
                self.report.unmapped[("part", "", "no BodyPartExamined, label or documented part")] += 1
            self.report.skipped[why] += 1
            return None
        modality, mod_deriv, mod_orig = mod
        comps: list[Competency] = []
        if modality in questions.MODALITY_OPTIONS:
            answer = questions.MODALITY_OPTIONS[modality]
            comps.append(Competency("Modality Recognition", "modality", answer, mod_deriv, mod_orig,
                                    pool=tuple(v for v in questions.MODALITY_OPTIONS.values() if v != answer)))  # fmt: skip
        view = self._view(img, modality)
        if view:
            comps.append(view)
        proto = self._protocol(img, modality)
        if proto:
            comps.append(proto)
        if organ:
            name, deriv, orig = organ
            comps.append(Competency("Organ Recognition", "organ", name, deriv, orig, pool=self.vocab.organ_options[name]))
        else:
            self.report.not_derived[("Organ Recognition", "no body part, organ label or documented organ")] += 1
        comps += self._labels(img, part)
        kept = [c for c in comps if c.task in self.tasks]
        if not kept:
            self.report.skipped["no task derivable (or none of the recipe's tasks)"] += 1
            return None
        self.report.mapped += 1
        return Mapped(image=img, part=part, modality=modality, competencies=kept)


def _quadrant_of_box(box: tuple[int, int, int, int], shape: tuple[int, int]) -> str | None:
    """The quadrant that holds the whole box (end-exclusive), or None if it crosses a midline."""
    x0, y0, x1, y1 = box
    h, w = shape
    if y1 <= h / 2:
        vert = "upper"
    elif y0 >= h / 2:
        vert = "lower"
    else:
        return None
    if x1 <= w / 2:
        horiz = "left"
    elif x0 >= w / 2:
        horiz = "right"
    else:
        return None
    return f"{vert} {horiz}"
