"""Usage errors keep credentials out, and gate options given with a space resolve as with
`=` (issue 25)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

SECRET = "SECRET-7f3a9c1e5b2d"


def _errors(result: pytest.RunResult) -> list[str]:
    return [line for line in result.errlines if line.startswith("ERROR:")]


@pytest.mark.parametrize(
    "option",
    [
        f"--model=openai:x@http://host/v1?api-key={SECRET}",
        f"--model=openai:x@http://user:{SECRET}@host/v1",
        f"--judge=openai:j@http://127.0.0.1:9/v1?token={SECRET}",
        f"--baseline=openai:b@http://host/v1?subscription-key={SECRET}",
        f"--model=opneai:x@http://host/v1?api_key={SECRET}",
        f"--cube=hf:org/cube?token={SECRET}",
    ],
)
def test_no_usage_error_shows_a_credential(gate_ws, option: str) -> None:
    result = gate_ws.run(option, model=None if option.startswith("--model") else "random")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.errlines
    errors = _errors(result)
    assert len(errors) == 1, result.errlines
    assert option.split("=", 1)[0] in errors[0]  # the option is named ...
    everything = result.stdout.str() + result.stderr.str()
    assert SECRET not in everything  # ... its credential nowhere
    assert "[redacted]" in errors[0]  # cut as `medrcube run` cuts it (models/urls.py)


def _checkout(gate_ws, outside: Path) -> Path:
    """The workspace made a checkout: its pyproject names the suite as testpaths, it has
    its own tests, and the cube lives outside it."""
    (gate_ws.path / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests_benchmark"]\n',
                                                 encoding="utf-8")
    (gate_ws.path / "tests").mkdir()
    (gate_ws.path / "tests" / "test_own.py").write_text("def test_the_projects_own():\n    pass\n", encoding="utf-8")
    cube = outside / "cube"
    shutil.copytree(gate_ws.path / "cube", cube)
    return cube / "cube.jsonl"


def _collected(result: pytest.RunResult) -> list[str]:
    return sorted(line for line in result.outlines if "::" in line)


def test_cube_with_a_space_collects_what_cube_equals_does(gate_ws, tmp_path_factory) -> None:
    cube = _checkout(gate_ws, tmp_path_factory.mktemp("elsewhere"))
    common = ["--model=random", "--thresholds=thresholds.yaml", "--co", "-q", "-p", "no:cacheprovider",
              "-p", "no:hypothesispytest"]
    with_equals = gate_ws.pytester.runpytest(f"--cube={cube}", *common)
    with_space = gate_ws.pytester.runpytest("--cube", str(cube), *common)
    assert with_equals.ret == 0, with_equals.errlines
    assert with_space.ret == 0, with_space.errlines
    cases = _collected(with_equals)
    assert cases and all(c.startswith("tests_benchmark/") for c in cases)
    assert _collected(with_space) == cases  # not the project's own tests besides
    # the same for two options given with a space (the store's directory, the thresholds)
    both = gate_ws.pytester.runpytest("--cube", str(cube), "--thresholds", "thresholds.yaml", "--model=random",
                                      "--co", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    assert _collected(both) == cases, both.outlines
