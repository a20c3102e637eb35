"""Construction pipeline: real sources -> metadata-derived facts -> multiple-choice items -> a cube.

    medrcube build RECIPE [--out DIR]           # medrcube.construction.pipeline.prepare / run

The recipe (`recipe`) names the sources, what their labels mean, the tasks, the targets
per cell, the reviewer and the export. The stages, one module each:

- sources: `dicom_folder` (series by SeriesInstanceUID, de-identified on read),
  `nifti_folder` (true planes from the affine, BIDS suffixes), `tabular` (PNG/JPEG with a
  labels CSV: diagnoses, severities, boxes, masks); `observation` holds the values passed on;
- Stage I, `mapping`: part, modality and the tasks the metadata supports, through the
  bundled `vocabulary.yaml` and `ontology.yaml` (`ontology`); what is not mapped is reported;
- Stage II, `production` with `templates` and `distractors` (similar / normal strategies,
  mutually exclusive options);
- `review` (any model adapter, the paper's principles, strict JSON verdicts) and
  `agreement` (a clinician's judgments: per-principle, sample-level, Cohen's kappa);
- `sampling` (targets per cell, image chains kept together), `export` (release layout,
  Hugging Face dataset), `report` (the build report), `privacy` (the de-identification
  profile and manifest, `safeguards`; burned-in text read by an offline OCR model on every
  frame, `ocr` and `textscreen`; free-text screening in every spelling, `screening`; the
  final leak scan; `synthetic` frames with burned-in text for the demo, tests and benchmark);
- `demo`: a synthetic hospital archive to try all this on.

The bundled mini cube's builder is one recipe of the pipeline (`recipes/mini.yaml`):
`mini` (`python -m medrcube.construction.mini.cube OUT_DIR`) with `sources` (package files, DICOM and
NIfTI readers), `deid`, `lesions`, `questions`, `imageio` and `mini_docs`.
"""
