"""Configuration files are read safely and strictly, with errors that name the file."""

from __future__ import annotations

import sys

import pytest

from medrcube.gate.thresholds import ThresholdsError, load_policy
from medrcube.models.models_file import ModelsFileError, load_models_file
from medrcube.yamlconf import YamlFileError, read_yaml_file


def test_duplicate_keys_are_refused_with_their_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: 1\nb: 2\na: 3\n")
    with pytest.raises(YamlFileError, match=r"duplicate key 'a'.*line 3"):
        read_yaml_file(path, missing_fix="-")


def test_python_tags_are_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(YamlFileError, match="not valid YAML"):
        read_yaml_file(path, missing_fix="-")


def test_models_file_and_thresholds_share_the_strict_reader(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  m: {provider: openai, model: x}\n  m: {provider: openai, model: y}\n")
    with pytest.raises(ModelsFileError, match=r"models.yaml: not valid YAML: .*duplicate key 'm'"):
        load_models_file(models)
    thresholds = tmp_path / "thresholds.yaml"
    thresholds.write_bytes(b"version: 1\n\xff\xfe\n")
    with pytest.raises(ThresholdsError, match="thresholds.yaml.*cannot read the file"):
        load_policy(thresholds)
    with pytest.raises(ModelsFileError, match="missing.yaml: file not found"):
        load_models_file(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    "text, found, line",
    [
        ("a: &x [1, 2]\nb: 3\n", "anchor '&x'", 1),
        ("a: [1, 2]\nb: *x\n", "alias '*x'", 2),
        ("base: {k: 1}\nc:\n  <<: *base\n", "alias '*base'", 3),
        # A few hundred bytes that would expand to 10**9 scalars (the "billion laughs").
        ("a: [&l0 [x, x, x, x, x, x, x, x, x, x]"
         + "".join(f", &l{k} [" + ", ".join([f"*l{k - 1}"] * 10) + "]" for k in range(1, 9)) + "]\n", "anchor '&l0'", 1),
    ],
)
def test_anchors_and_aliases_are_refused_with_their_line(tmp_path, text, found, line):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(YamlFileError) as err:
        read_yaml_file(path, missing_fix="-")
    message = str(err.value)
    assert message.startswith(f"{path}: YAML anchors and aliases are not allowed in configuration files: {found} at line {line},")
    assert "Fix: write the value out in full" in message


@pytest.mark.parametrize(
    "text, problem",
    [
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        ("a: " + "{b: " * 3000 + "1" + "}" * 3000 + "\n", "nested too deeply"),
        ("a: 1\nb: " + "7" * 5000 + "\n", "an integer longer than 4300 digits at line 2, column 4"),
    ],
)
def test_documents_beyond_the_parser_limits_are_not_valid_yaml(tmp_path, text, problem):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(YamlFileError, match=f"not valid YAML: .*{problem}.*Fix: ") as err:
        read_yaml_file(path, missing_fix="-")
    assert str(err.value).startswith(f"{path}: ")


def test_big_integers_within_the_limit_and_quoted_digits_still_load(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: " + "9" * 4000 + "\nb: '" + "9" * 5000 + "'\n")
    data = read_yaml_file(path, missing_fix="-")
    assert data["a"] == int("9" * 4000) and data["b"] == "9" * 5000


def test_the_repository_yaml_files_use_no_anchors_and_load():
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    files = [repo / "thresholds.yaml", repo / "models.example.yaml", *sorted((repo / "recipes").glob("*.yaml")),
             *sorted((repo / "src" / "medrcube").rglob("*.yaml"))]
    assert len(files) >= 7
    for f in files:
        assert isinstance(read_yaml_file(f, missing_fix="-"), dict), f
    load_policy(repo / "thresholds.yaml")
    load_models_file(repo / "models.example.yaml")


def test_a_file_read_again_unchanged_is_the_same_document_and_the_callers_own(tmp_path):
    # The parse of a text is remembered in the process (the gate reads its policy twice);
    # each caller gets its own copy, and an edited file is parsed again.
    f = tmp_path / "p.yaml"
    f.write_text("a:\n  b: [1, 2]\n", encoding="utf-8")
    first = read_yaml_file(f, missing_fix="")
    first["a"]["b"].append(3)
    assert read_yaml_file(f, missing_fix="") == {"a": {"b": [1, 2]}}
    f.write_text("a:\n  b: [1, 2]\n  b: [3]\n", encoding="utf-8")  # now a duplicate key
    with pytest.raises(YamlFileError, match="duplicate"):
        read_yaml_file(f, missing_fix="")
    f.write_text("a: 7\n", encoding="utf-8")
    assert read_yaml_file(f, missing_fix="") == {"a": 7}


def test_the_integer_limit_is_part_of_what_a_remembered_parse_depends_on(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_text("n: " + "9" * 5000 + "\n", encoding="utf-8")
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # no limit: the integer reads
    try:
        assert read_yaml_file(f, missing_fix="")["n"] == int("9" * 5000)
    finally:
        sys.set_int_max_str_digits(limit)
    with pytest.raises(YamlFileError, match="not valid YAML"):  # not the parse remembered above
        read_yaml_file(f, missing_fix="")
