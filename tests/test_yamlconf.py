"""Configuration files are read safely and strictly, with errors that name the file."""

from __future__ import annotations

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
