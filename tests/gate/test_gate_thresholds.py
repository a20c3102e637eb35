"""thresholds.yaml: the repository's file, strict validation with actionable messages."""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

import pytest

from medrcube.gate.checks import build_checks
from medrcube.gate.evaluate import evaluate
from medrcube.gate.thresholds import ThresholdsError, load_policy, policy_from_dict, validate_against_cells
from medrcube.gate.verdict import Status

REPO_THRESHOLDS = Path(__file__).resolve().parents[2] / "thresholds.yaml"

CELLS = [
    ("Chest", "X-Ray", "Disease Diagnosis"),
    ("Chest", "X-Ray", "Modality Recognition"),
    ("Chest", "CT", "Organ Recognition"),
    ("Brain", "MRI", "Imaging Protocol Recognition"),
    ("Brain", "MRI", "Severity Grading"),
]


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "thresholds.yaml"
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


def test_repository_file_and_its_profiles_load():
    base = load_policy(REPO_THRESHOLDS)
    assert set(base.profiles) >= {"screening", "deployment"}
    assert base.overall.bound == 0.5 and base.overall.rule == "lower_bound"
    dep = load_policy(REPO_THRESHOLDS, "deployment")
    assert dep.overall.bound > base.overall.bound
    assert dep.defaults.max_error_rate < base.defaults.max_error_rate
    # Profile cells are appended after the base ones and win; their key says where they were written.
    assert dep.cells[-1].key.startswith("profiles.deployment.cells[")
    b = dep.cell_bound(("Chest", "X-Ray", "Disease Diagnosis"))
    assert b.bound == 0.6 and b.rule == "lower_bound" and b.source.startswith("profiles.deployment.cells[")
    assert load_policy(REPO_THRESHOLDS, "screening").defaults.rule == "point"


def test_random_baseline_fails_or_skips_most_checks(rec):
    """The repository's policy must not qualify a model that answers at random."""
    rng = random.Random(20260413)
    cells = [(p, m, t) for p in ("Chest", "Brain", "Lungs") for m in ("X-Ray", "CT", "MRI")
             for t in ("Modality Recognition", "Organ Recognition", "Disease Diagnosis", "Severity Grading")]
    records = []
    for i in range(1200):
        part, modality, task = cells[i % len(cells)]
        image = f"{part}-{modality}-{(i // len(cells)) % 25}"
        answer = rng.randrange(4)
        for variant, rotation in (("standard", 0), ("blind", 0), ("shuffled", 1), ("shuffled", 2), ("shuffled", 3)):
            ok = rng.randrange(4) == answer
            records.append(rec(f"q{i}", "correct" if ok else "wrong", part=part, modality=modality, task=task,
                               image=image, variant=variant, rotation=rotation, answer=answer))
    policy = load_policy(REPO_THRESHOLDS)
    checks = build_checks(cells, policy, variants="standard,blind,shuffled:3")
    verdicts = [evaluate(c, records) for c in checks]
    passed = [v.check_id for v in verdicts if v.status is Status.PASS]
    assert len(checks) > 40
    assert len(passed) <= 0.1 * len(checks), passed
    by_id = {v.check_id: v for v in verdicts}
    for cid in ("overall", "credibility/overall", "image-dependence/overall", "position/overall"):
        assert by_id[cid].status is Status.FAIL, by_id[cid].message


BAD = [
    # (file text, key path in the message, further substrings)
    ("version: 1\ncell: []\n", "cell: unknown key", ["did you mean 'cells'"]),
    ("version: 1\ndefaults: {min_N: 5}\n", "defaults.min_N: unknown key", ["did you mean 'min_n'?"]),
    ("version: 1\noverall: 60\n", "overall: a bound must be between 0 and 1", ["(got 60)", "write 0.6"]),
    ("version: 1\noverall: '0.5'\n", "overall: must be a bound", ["(got '0.5')"]),
    ("version: 1\ndefaults: {min_n: 2.5}\n", "defaults.min_n: must be a whole number", ["(got 2.5)"]),
    ("version: 1\ndefaults: {rule: lowerbound}\n", "defaults.rule: unknown decision rule",
     ["did you mean 'lower_bound'?", "point, lower_bound"]),
    ("version: 1\ndefaults: {confidence: 1.0}\n", "defaults.confidence: a confidence level must be strictly", []),
    ("version: 1\ncells:\n  - {match: '*/*/*', bound: 0.4}\n  - {match: 'Chest/X-Ray', bound: 0.5}\n",
     "cells[1].match: must have exactly three", ["'Chest/X-Ray'", "use * for any value"]),
    ("version: 1\ncells:\n  - {match: '*/*/*'}\n", "cells[0]: has no `bound`", ["bound: null"]),
    ("version: 1\ncells:\n  - {match: '*/*/*', bound: 0.4, rul: point}\n", "cells[0].rul: unknown key",
     ["did you mean 'rule'?"]),
    ("version: 1\ncells: {match: '*/*/*'}\n", "cells: must be a list", []),
    ("defaults: {rule: point}\n", "version: missing", ["version: 1"]),
    ("version: 2\n", "version: unsupported schema version", ["(got 2)"]),
    ("version: 1\noverall: 0.5\noverall: 0.6\n", "not valid YAML: duplicate key 'overall'", []),
    ("version: 1\noverall: [0.5\n", "not valid YAML", ["line"]),
    ("version: 1\ncredibility:\n  parts:\n    Chest: {min_grounding: 1.5}\n",
     "credibility.parts.Chest.min_grounding: a grounding difference must be between 0 and 1", []),
    ("version: 1\nslices:\n  part: {default: {bound: 0.4, min_n: 0}}\n", "slices.part.default.min_n: must be at least 1",
     []),
    ("version: 1\nprofiles:\n  deployment:\n    overal: 0.7\n", "profiles.deployment.overal: unknown key",
     ["did you mean 'overall'"]),
    ("version: 1\ncells:\n  - {match: '*/*/*', bound: 0.4, above_chance: -0.1}\n",
     "cells[0].above_chance: a margin over chance must be between 0 and 1", []),
    ("version: 1\nregression: {alpha: 0}\n", "regression.alpha: a significance level must be strictly", []),
    ("version: 1\nimage_dependence: {enabled: 'yes'}\n", "image_dependence.enabled: must be true or false", []),
    ("version: 1\ncredibility: {exclude_low_tasks: View Recognition}\n",
     "credibility.exclude_low_tasks: must be a list", []),
    ("", "the file is empty", ["version: 1"]),
]


@pytest.mark.parametrize(("text", "key_and_problem", "more"), BAD, ids=[b[1].split(":")[0] or "empty" for b in BAD])
def test_invalid_files_name_file_key_value_and_fix(tmp_path, text, key_and_problem, more):
    path = write(tmp_path, text)
    with pytest.raises(ThresholdsError) as exc:
        load_policy(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: "), msg
    assert key_and_problem in msg, msg
    for s in more:
        assert s in msg, msg
    if "YAML" not in msg and "empty" not in msg:
        assert "Fix: " in msg


def test_missing_file(tmp_path):
    with pytest.raises(ThresholdsError, match="file not found. Fix: pass --thresholds"):
        load_policy(tmp_path / "nope.yaml")


def test_unknown_profile_lists_the_choices(tmp_path):
    path = write(tmp_path, "version: 1\nprofiles:\n  screening: {}\n  deployment: {}\n")
    with pytest.raises(ThresholdsError) as exc:
        load_policy(path, "deploy")
    msg = str(exc.value)
    assert "profiles: unknown profile 'deploy' (did you mean 'deployment'?)" in msg
    assert "choose one of: screening, deployment" in msg


def test_profile_that_leaves_a_key_incomplete_is_named(tmp_path):
    path = write(tmp_path, "version: 1\nprofiles:\n  strict:\n    overall: {min_n: 50}\n")
    assert load_policy(path).overall is None
    with pytest.raises(ThresholdsError, match=r"overall: has no `bound` \(after applying profile 'strict'\)"):
        load_policy(path, "strict")


def test_cells_apply_in_order_field_by_field():
    policy = policy_from_dict({
        "version": 1,
        "defaults": {"rule": "lower_bound", "min_n": 7},
        "cells": [
            {"match": "*/*/*", "bound": 0.4, "rule": "point", "min_n": 10},
            {"match": "Chest/*/DD", "bound": 0.6},  # abbreviation of Disease Diagnosis
            {"match": "Brain/MRI/*", "bound": None},
            {"match": "*/xray/*", "min_n": 12, "bound": 0.45},  # alias of X-Ray
        ],
    })
    dd = policy.cell_bound(("Chest", "X-Ray", "Disease Diagnosis"))
    assert (dd.bound, dd.rule, dd.min_n, dd.source) == (0.45, "point", 12, "cells[3]")
    ct = policy.cell_bound(("Chest", "CT", "Disease Diagnosis"))
    assert (ct.bound, ct.min_n, ct.source) == (0.6, 10, "cells[1]")
    assert policy.cell_bound(("Brain", "MRI", "Severity Grading")) is None
    assert policy.cell_bound(("Brain", "CT", "Organ Recognition")).bound == 0.4
    assert policy.defaults.min_n == 7 and policy.defaults.confidence == 0.95  # built-in fills the rest


def test_slice_values_inherit_their_axis_default():
    policy = policy_from_dict({
        "version": 1,
        "slices": {"part": {"default": {"bound": 0.45, "min_n": 20}, "Chest": 0.5, "Brain": None}},
    })
    sp = policy.slices["part"]
    assert (sp.bound_for("Chest").bound, sp.bound_for("Chest").min_n) == (0.5, 20)
    assert sp.bound_for("Brain") is None
    assert sp.bound_for("Lungs").bound == 0.45


def test_validate_against_cells():
    ok = policy_from_dict({"version": 1, "cells": [{"match": "*/*/*", "bound": 0.4},
                                                   {"match": "Chest/X-Ray/*", "bound": 0.5}]})
    validate_against_cells(ok, CELLS)

    typo = policy_from_dict({"version": 1, "cells": [{"match": "*/*/*", "bound": 0.4},
                                                     {"match": "Chset/X-Ray/*", "bound": 0.5}]}, source="t.yaml")
    with pytest.raises(ThresholdsError) as exc:
        validate_against_cells(typo, CELLS)
    msg = str(exc.value)
    assert msg.startswith("t.yaml: cells[1].match: matches no cell of the cube")
    assert "no part matches 'Chset' (did you mean 'Chest'?)" in msg
    assert "Chest/X-Ray/Disease Diagnosis" in msg  # the existing cells are listed

    combo = policy_from_dict({"version": 1, "cells": [{"match": "Brain/X-Ray/*", "bound": 0.5}]})
    with pytest.raises(ThresholdsError, match=r"no cell has this combination"):
        validate_against_cells(combo, CELLS)

    slices = policy_from_dict({"version": 1, "slices": {"part": {"default": 0.4, "Chets": 0.5}}})
    with pytest.raises(ThresholdsError, match=r"slices.part.Chets: is not a part of the cube \(did you mean 'Chest'\?\)"):
        validate_against_cells(slices, CELLS)

    # A pattern meant for other cubes may match nothing, but never with a typo in it.
    general = policy_from_dict({"version": 1, "cells": [{"match": "*/*/AD", "bound": 0.5, "optional": True}]})
    validate_against_cells(general, CELLS)
    typo = policy_from_dict({"version": 1, "cells": [{"match": "*/*/Abnormaly Diagnosis", "bound": 0.5,
                                                      "optional": True}]})
    with pytest.raises(ThresholdsError, match=r"no task matches 'Abnormaly Diagnosis'"):
        validate_against_cells(typo, CELLS)
    # A named slice value the cube lacks is fine when the taxonomy knows it.
    validate_against_cells(policy_from_dict({"version": 1, "slices": {"task": {"Abnormality Diagnosis": 0.5}}}),
                           CELLS)

    cred = policy_from_dict({"version": 1, "credibility": {"min_grounding": 0.1, "parts": {"Brian": {}}}})
    with pytest.raises(ThresholdsError, match=r"credibility.parts.Brian: is not a part of the cube \(did you mean 'Brain'"):
        validate_against_cells(cred, CELLS)


def test_repository_file_validates_against_a_standard_cube():
    validate_against_cells(load_policy(REPO_THRESHOLDS, "deployment"), CELLS)


def test_packaged_default_is_the_repository_file():
    """The plugin falls back to the packaged copy when no ./thresholds.yaml is around."""
    from importlib.resources import files

    packaged = files("medrcube.gate").joinpath("default_thresholds.yaml").read_text(encoding="utf-8")
    assert packaged == REPO_THRESHOLDS.read_text(encoding="utf-8"), (
        "src/medrcube/gate/default_thresholds.yaml differs from thresholds.yaml: copy the repository's file over it"
    )


@pytest.mark.parametrize(("body", "key", "fraction"), [
    ("overall: {bound: 5}", "overall.bound", "0.05"),
    ("overall: {bound: 80}", "overall.bound", "0.8"),
    ("cells:\n  - {match: '*/*/*', bound: 45}", "cells[0].bound", "0.45"),
    ("defaults: {max_error_rate: 5}", "defaults.max_error_rate", "0.05"),
])
def test_a_bound_written_as_a_percentage_is_refused_with_its_fraction(tmp_path: Path, body: str, key: str,
                                                                     fraction: str) -> None:
    with pytest.raises(ThresholdsError) as raised:
        load_policy(write(tmp_path, f"version: 1\n{body}\n"))
    said = str(raised.value)
    assert key in said and f"write {fraction}" in said and "looks like a percentage" in said


def test_the_commands_in_the_policy_comments_run_where_the_file_is_copied(tmp_path: Path) -> None:
    # The packaged policy is copied into every `medrcube init` site: a `pytest` command in
    # its comments may name no path (a site has no tests_benchmark/), only options.
    import argparse

    from medrcube.commands import init

    site = tmp_path / "site"
    assert init.run(argparse.Namespace(directory=str(site))) == 0
    for name in ("thresholds.yaml", "README.md", "conftest.py", "test_site.py"):
        for line in (site / name).read_text(encoding="utf-8").splitlines():
            words = line.split("#", 1)[1].split() if line.lstrip().startswith("#") else line.split()
            starts = [i for i, w in enumerate(words) if w == "pytest" and (i == 0 or words[i - 1] == "&&")]
            if not starts:  # prose naming pytest, not a command
                continue
            args = words[starts[0] + 1:]
            paths = [a for a in args if not a.startswith("-") and a not in ("&&", "|") and "=" not in a
                     and not a.isdigit()]  # `-n 4`
            paths = paths[:paths.index("#")] if "#" in paths else paths
            assert all((site / a).exists() or a == "medrcube.suite" for a in paths), (name, line)
    assert "tests_benchmark" not in (site / "thresholds.yaml").read_text(encoding="utf-8")
