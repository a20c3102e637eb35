"""Construction pipeline: real sources -> metadata-derived facts -> multiple-choice items -> a cube.

- `sources`: locate files in installed packages, read DICOM/NIfTI into 2-D arrays, and
  derive planes, windows and ultrasound modes from metadata;
- `deid`: the de-identification profile, leak search, crops and masks for burned-in text;
- `lesions`: synthetic lesions with known quadrant and size class;
- `questions`: Facts, question templates, distractor pools, balanced answer letters;
- `imageio`: windowing, resampling and a metadata-free, deterministic PNG writer;
- `mini`: the bundled mini cube's recipe (`python -m medrcube.build.mini OUT_DIR`).
"""
