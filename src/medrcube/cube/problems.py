"""Validation findings: the stable reason codes and the collector every loader reports to.

A loader never raises on a bad item: it reports a Problem and skips the item (error) or
keeps it (warning). The collector implements the policy: by default it gathers every
problem; under `strict=True` the first error raises CubeError at once, so a strict load
stops before it reads a single image more than it has to.
"""

from __future__ import annotations

from medrcube.cube.item import CubeError, Problem

# reason code -> what it means (printed by `medrcube validate` as the group heading).
# The codes are stable: tests, reports and users' scripts count on them.
REASONS: dict[str, str] = {
    # whole files
    "malformed_json": "a file is not valid JSON (or JSON Lines)",
    "not_a_list": "a test.json does not hold a JSON list of records",
    "not_an_object": "a record is not a JSON object",
    "unreadable_file": "a cube file cannot be read",
    "non_utf8_name": "a file or folder name is not valid UTF-8",
    # record fields
    "missing_field": "a required field is missing or empty",
    "invalid_type": "a field has the wrong type",
    "invalid_value": "a field has a value outside what is allowed",
    "too_few_options": "fewer than 2 options",
    "option_gap": "options are not contiguous from option_A",
    "duplicate_options": "two options have the same text",
    "gt_answer_no_match": "gt_answer matches no option",
    "gt_answer_ambiguous": "gt_answer matches several options",
    "correct_index_mismatch": "correct_index disagrees with gt_answer",
    "duplicate_id": "an item id occurs more than once",
    # images
    "image_missing": "the image file does not exist",
    "image_path_absolute": "the image path is absolute",
    "image_path_escapes": "the image path leaves the cube through '..'",
    "image_symlink_escapes": "the image path leaves the cube through a symlink",
    "image_unreadable": "the image file cannot be read",
    "image_not_a_file": "the image path names a FIFO, device, socket or directory, not a regular file",
    "image_too_large": "the image file is larger than the size limit",
    "not_an_image": "the file is not an image of an accepted format",
    "decompression_bomb": "the image declares more pixels than the limit",
    "image_not_embedded": "a dataset row references an image file instead of embedding its bytes",
    # warnings (the item is kept)
    "image_unavailable": "restricted item without its image (asked only in the blind variant)",
    "unknown_task": "task outside the taxonomy (kept as written)",
    "unknown_modality": "modality outside the taxonomy (kept as written)",
    "unknown_part": "part outside the taxonomy (kept as written)",
}


class Collector:
    """Gathers Problems in the order they are found and applies the strict policy."""

    def __init__(self, *, strict: bool = False):
        self.strict = strict
        self.problems: list[Problem] = []

    def error(self, source: str, item_id: str | None, field: str | None, message: str, reason: str) -> None:
        self._add(Problem(source, item_id, field, message, reason, "error"))

    def warn(self, source: str, item_id: str | None, field: str | None, message: str, reason: str) -> None:
        self._add(Problem(source, item_id, field, message, reason, "warning"))

    def _add(self, problem: Problem) -> None:
        assert problem.reason in REASONS, problem.reason  # a new code must be documented above
        self.problems.append(problem)
        if self.strict and problem.severity == "error":
            raise CubeError([problem])

    @property
    def n_errors(self) -> int:
        return sum(1 for p in self.problems if p.severity == "error")
