"""NaN, infinities and negatives where they make no sense end in one clear line (issue 25).

Every numeric value of models.yaml and thresholds.yaml, every numeric gate option and
every numeric option of the `medrcube` commands (perturbation levels of `--variant(s)`
included), given a value hypothesis draws from the bad ones (the recipe's numbers:
tests/construction/test_recipe_numbers.py): the error is
one line naming the file (for a file), the key or option, and the fix; never a traceback,
never a value silently taken. The bad values are written as a user would write them
(YAML `.nan`, `.inf`, `-.inf`, `1e400`; `--max-cost=nan`).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from medrcube.cli import main as cli_main
from medrcube.models.models_file import ModelsFileError, load_models_file
from medrcube.plugin.options import read_options

# The key, its provider, and the bad values it must refuse besides NaN and infinities.
ENTRY_NUMBERS = {
    "concurrency": ("openai", "nonpositive"),
    "rpm": ("openai", "nonpositive"),
    "timeout": ("openai", "nonpositive"),
    "max_retries": ("openai", "negative"),
    "image_max_side": ("openai", "negative"),
    "batch_size": ("hf", "nonpositive"),
    "max_response_mib": ("openai", "nonpositive"),
    "breaker_failures": ("openai", "nonpositive"),
    "breaker_seconds": ("openai", "negative"),
    "retry_after_max": ("openai", "negative"),
    "retry_wait_max": ("openai", "negative"),
}
NESTED_NUMBERS = ("price.prompt", "price.completion", "params.temperature", "params.max_tokens",
                  "params.top_p", "params.max_completion_tokens")

# (YAML 1.1 reads "1e400" as a string; "1.0e+400" is the float that overflows to infinity)
_NONFINITE_YAML = st.sampled_from([".nan", ".NaN", ".inf", "-.inf", "+.inf", "1.0e+400", "-1.0e+400"])


def _yaml_float(v: float) -> str:
    # with a dot: YAML 1.1 reads "-1e-06" as a string, "-0.000001" as the number
    return f"{v:.6f}"


def _bad(kind: str) -> st.SearchStrategy[str]:
    """YAML texts of values a key of this kind refuses: NaN, infinities, and below its minimum."""
    low = st.floats(max_value=-1e-6, min_value=-1e12, allow_nan=False) if kind == "negative" \
        else st.floats(max_value=0.0, min_value=-1e12, allow_nan=False)
    ints = st.integers(max_value=-1 if kind == "negative" else 0, min_value=-10**9)
    return st.one_of(_NONFINITE_YAML, low.map(_yaml_float), ints.map(str))


def _entry(tmp: Path, provider: str, key: str, value: str) -> Path:
    body = {"openai": "provider: openai\n    model: m\n    base_url: http://127.0.0.1:9/v1\n",
            "hf": "provider: hf\n    model: ./weights\n"}[provider]
    if "." in key:
        outer, inner = key.split(".")
        line = f"    {outer}: {{{inner}: {value}}}\n"
    else:
        line = f"    {key}: {value}\n"
    path = tmp / "models.yaml"
    path.write_text(f"models:\n  site-model:\n    {body}{line}", encoding="utf-8")
    return path


def _one_line_naming(message: str, *parts: str) -> None:
    assert "\n" not in message and "Traceback" not in message, message
    for part in parts:
        assert part in message, (part, message)


@pytest.mark.parametrize("key", sorted(ENTRY_NUMBERS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_models_yaml_numbers_refuse_nan_inf_and_out_of_range(tmp_path: Path, key: str, data: st.DataObject) -> None:
    provider, kind = ENTRY_NUMBERS[key]
    value = data.draw(_bad(kind))
    path = _entry(tmp_path, provider, key, value)
    with pytest.raises(ModelsFileError) as exc:
        load_models_file(path)
    _one_line_naming(str(exc.value), str(path), "site-model", repr(key), "e.g.")


@pytest.mark.parametrize("key", NESTED_NUMBERS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(_NONFINITE_YAML, st.floats(max_value=-1e-6, min_value=-1e9).map(_yaml_float)))
def test_models_yaml_prices_and_params_refuse_nan_inf_and_negatives(tmp_path: Path, key: str, value: str) -> None:
    path = _entry(tmp_path, "openai", key, value)
    with pytest.raises(ModelsFileError) as exc:
        load_models_file(path)
    _one_line_naming(str(exc.value), str(path), "site-model", key.split(".")[-1])


def test_a_negative_penalty_is_a_value_not_a_mistake(tmp_path: Path) -> None:
    path = _entry(tmp_path, "openai", "params.frequency_penalty", "-0.5")
    assert load_models_file(path)["site-model"].params["frequency_penalty"] == -0.5


@pytest.mark.parametrize("key", sorted(ENTRY_NUMBERS))
def test_good_numbers_still_load(tmp_path: Path, key: str) -> None:
    provider, _ = ENTRY_NUMBERS[key]
    entry = load_models_file(_entry(tmp_path, provider, key, "3"))["site-model"]
    assert getattr(entry, key) == 3


@settings(max_examples=30, deadline=None)
@given(field=st.sampled_from(["accuracy", "icc"]),
       value=st.one_of(st.sampled_from(["nan", "inf", "-inf", "1e400"]), st.floats(max_value=-1e-6, min_value=-1e9).map(repr)))
def test_model_spec_numbers_refuse_nan_inf_and_negatives(field: str, value: str) -> None:
    """The numbers inside a model spec (`simulate:accuracy=P,icc=R`, `random:SEED`)."""
    from medrcube.models.registry import ModelSpecError, load_adapter

    spec = f"simulate:accuracy={value}" if field == "accuracy" else f"simulate:accuracy=0.7,icc={value}"
    with pytest.raises(ModelSpecError) as exc:
        load_adapter(spec)
    _one_line_naming(str(exc.value), spec, f"{field}={value}", "between 0 and 1")
    with pytest.raises(ModelSpecError) as exc:
        load_adapter(f"random:{value}")
    _one_line_naming(str(exc.value), f"random:{value}", "must be an integer, as in random:42")


# ---------------------------------------------------------------------------- gate options

_BAD_OPTION_TEXT = st.one_of(
    st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "0", "-0", "-1", "-2.5"]),
    st.floats(max_value=0.0, min_value=-1e9, allow_nan=False).map(repr),
)
GATE_NUMBERS = {"--concurrency": (), "--max-requests": ("--sequential",), "--max-cost": ("--sequential",)}


@pytest.mark.parametrize("option", sorted(GATE_NUMBERS))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_BAD_OPTION_TEXT)
def test_gate_numbers_refuse_nan_inf_and_nonpositive(pytester: pytest.Pytester, option: str, value: str) -> None:
    config = pytester.parseconfig(*GATE_NUMBERS[option], f"{option}={value}")
    with pytest.raises(pytest.UsageError) as exc:
        read_options(config)
    _one_line_naming(str(exc.value), f"{option}={value}", "e.g.")


def test_a_nan_budget_and_a_nan_timeout_stop_the_gate_with_a_usage_error(pytester: pytest.Pytester) -> None:
    """The trial's two cases end to end: `--max-cost=nan` was accepted, and `timeout: .nan`
    in models.yaml ended in an INTERNALERROR (exit 3). Both are one usage error now."""
    pytester.makeconftest("MEDRCUBE_SUITE = True\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--model=random", "--sequential", "--max-cost=nan", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [ln for ln in result.errlines if ln.startswith("ERROR:")]
    assert len(errors) == 1 and "--max-cost=nan" in errors[0], result.errlines

    (pytester.path / "models.yaml").write_text(
        "models:\n  site:\n    provider: openai\n    model: m\n    base_url: http://127.0.0.1:9/v1\n"
        "    timeout: .nan\n", encoding="utf-8")
    result = pytester.runpytest("--model=site", "--models-file=models.yaml", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.errlines
    errors = [ln for ln in result.errlines if ln.startswith("ERROR:")]
    assert len(errors) == 1 and "models.yaml" in errors[0] and "'timeout'" in errors[0], result.errlines
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


# ---------------------------------------------------------------------------- commands

COMMAND_NUMBERS = {
    ("power", "--deff"): ["--bound", "0.6", "--accuracy", "0.7"],
    ("power", "--items-per-image"): ["--bound", "0.6", "--accuracy", "0.7", "--icc", "0.3"],
    ("power", "--confidence"): ["--bound", "0.6", "--accuracy", "0.7"],
    ("power", "--bound"): ["--accuracy", "0.7"],
    ("power", "--accuracy"): ["--bound", "0.6"],
    ("power", "--n"): ["--bound", "0.6", "--accuracy", "0.7"],
    ("power", "--checks"): ["--bound", "0.6", "--accuracy", "0.7"],
    ("power", "--icc"): ["--bound", "0.6", "--accuracy", "0.7", "--items-per-image", "2"],
    ("power", "--distance"): ["--bound", "0.6", "--accuracy", "0.7"],
    ("power", "--power"): ["--bound", "0.6", "--accuracy", "0.7"],
    ("validate", "--limit"): ["cube-that-is-never-read"],
    ("run", "--concurrency"): ["--model", "random", "--cube", "cube-that-is-never-read"],
    ("build", "--frames"): ["--record-review", "build-never-read", "--decision", "approved", "--reviewed-by", "x"],
    ("build", "--leaks"): ["--record-review", "build-never-read", "--decision", "approved", "--reviewed-by", "x",
                           "--frames", "30"],
}
# The whole-number options of commands/numbers.py: their one line also gives an example.
WHOLE_NUMBERS = {("power", "--checks"), ("power", "--n"), ("run", "--concurrency"), ("build", "--frames"),
                 ("build", "--leaks")}


@pytest.mark.parametrize(("command", "option"), sorted(COMMAND_NUMBERS))
@settings(max_examples=15, deadline=None)
@given(value=st.one_of(st.sampled_from(["nan", "inf", "-inf", "1e400"]),
                       st.floats(max_value=-1e-6, min_value=-1e9).map(repr)))
def test_command_numbers_refuse_nan_inf_and_negatives(command: str, option: str, value: str) -> None:
    # argparse reports a bad value as a usage error (exit 2) on one stderr line
    with pytest.raises(SystemExit) as exc:
        cli_main([command, *COMMAND_NUMBERS[(command, option)], f"{option}={value}"])
    assert exc.value.code == 2


@pytest.mark.parametrize(("command", "option"), sorted(WHOLE_NUMBERS))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(st.sampled_from(["nan", "inf", "-inf", "1e400", "2.5"]),
                       st.integers(max_value=-1, min_value=-10**9).map(str)))
def test_whole_number_options_say_the_value_and_an_example(capsys: pytest.CaptureFixture[str], command: str,
                                                           option: str, value: str) -> None:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        cli_main([command, *COMMAND_NUMBERS[(command, option)], f"{option}={value}"])
    errors = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert exc.value.code == 2 and len(errors) == 1, errors
    _one_line_naming(errors[0], f"argument {option}:", value.strip(), f"(e.g. {option} ")


# every perturbation kind with a level; -16 is below the lowest bound of every kind (rotate's -15)
_LEVELLED = ("jpeg", "lowres", "noise", "poisson", "window", "brightness", "rotate", "crop")
_BAD_LEVEL = st.one_of(st.sampled_from(["nan", "inf", "-inf", "1e400"]),
                       st.floats(max_value=-16.0, min_value=-1e9).map(repr))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(_LEVELLED), level=_BAD_LEVEL, seeded=st.booleans())
def test_variant_levels_refuse_nan_inf_and_out_of_range(capsys: pytest.CaptureFixture[str], pytester: pytest.Pytester,
                                                        kind: str, level: str, seeded: bool) -> None:
    """`medrcube run --variant` and the gate's `--variants`: the same one line."""
    spec = f"{kind}:{level}" + ("@3" if seeded else "")
    capsys.readouterr()
    assert cli_main(["run", "--model", "random", "--cube", "cube-that-is-never-read", f"--variant={spec}"]) == 1
    errors = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert len(errors) == 1, errors
    _one_line_naming(errors[0], f"variant {spec!r}", kind)
    config = pytester.parseconfig(f"--variants={spec}")
    with pytest.raises(pytest.UsageError) as exc:
        read_options(config)
    _one_line_naming(str(exc.value), f"--variants={spec}", f"variant {spec!r}", "e.g.")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(st.sampled_from(["nan", "NaN", "inf", "-inf", "1e400", "x"]),
                       st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: not v.is_integer()).map(repr)))
def test_a_sequential_seed_must_be_a_whole_number(pytester: pytest.Pytester, value: str) -> None:
    config = pytester.parseconfig("--sequential", f"--seed={value}")
    with pytest.raises(pytest.UsageError) as exc:
        read_options(config)
    _one_line_naming(str(exc.value), f"--seed={value}", "e.g. --seed=1")


def test_a_negative_seed_is_a_seed(pytester: pytest.Pytester) -> None:
    options = read_options(pytester.parseconfig("--sequential", "--seed=-3"))
    assert options.sequential is not None and options.sequential.seed == -3


def test_command_number_messages_name_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, option in ((["power", "--bound", "0.6", "--accuracy", "0.7", "--deff=nan"], "--deff"),
                         (["validate", "x", "--limit=-3"], "--limit")):
        with pytest.raises(SystemExit):
            cli_main(argv)
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert option in last and ("nan" in last or "-3" in last), last
    assert math.isnan(float("nan"))  # the value the messages quote, as Python reads it


# ---------------------------------------------------------------------------- thresholds.yaml

ROOT = Path(__file__).resolve().parents[2]


def _numeric_leaves(node: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _numeric_leaves(v, (*path, k))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _numeric_leaves(v, (*path, i))]
    return [path] if isinstance(node, int | float) and not isinstance(node, bool) and path != ("version",) else []


def _key_path(path: tuple[object, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


_POLICY = __import__("yaml").safe_load((ROOT / "thresholds.yaml").read_text(encoding="utf-8"))
POLICY_LEAVES = _numeric_leaves(_POLICY)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(leaf=st.sampled_from(POLICY_LEAVES),
       value=st.one_of(st.sampled_from([math.nan, math.inf, -math.inf]), st.floats(max_value=-1e-6, min_value=-1e9)))
def test_every_number_of_the_policy_refuses_nan_inf_and_negatives(tmp_path: Path, leaf, value) -> None:
    import copy

    import yaml

    from medrcube.gate.thresholds import ThresholdsError, load_policy

    doc = copy.deepcopy(_POLICY)
    node = doc
    for p in leaf[:-1]:
        node = node[p]
    node[leaf[-1]] = value
    path = tmp_path / "thresholds.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(ThresholdsError) as exc:
        for profile in (None, *(doc.get("profiles") or {})):
            load_policy(path, profile=profile)
    _one_line_naming(str(exc.value), str(path), _key_path(leaf).split("[")[0].split(".")[-1], "Fix:")


# Numbers the policy schema reads that the shipped thresholds.yaml leaves out: (section,
# key, the value written with the bad number in it, the key path the error names).
OPTIONAL_POLICY_NUMBERS = {
    "calibration.n_bins": ("calibration", "n_bins", lambda v: v, "calibration.n_bins"),
    "calibration.n_boot": ("calibration", "n_boot", lambda v: v, "calibration.n_boot"),
    "credibility.min_grounding": ("credibility", "min_grounding", lambda v: v, "credibility.min_grounding"),
    "selective.accuracy_at_coverage": ("selective", "accuracy_at_coverage", lambda v: {0.8: v},
                                       "selective.accuracy_at_coverage.0.8"),
    "selective.coverage (a key)": ("selective", "accuracy_at_coverage", lambda v: {v: 0.9},
                                   "selective.accuracy_at_coverage."),
    "selective.coverage_at_risk": ("selective", "coverage_at_risk", lambda v: {0.1: v}, "selective.coverage_at_risk.0.1"),
    "findings.min_sensitivity": ("findings", "min_sensitivity", lambda v: {"Pneumothorax": v},
                                 "findings.min_sensitivity.Pneumothorax"),
    "findings.prevalence": ("findings", "prevalence", lambda v: {"Pneumothorax": v}, "findings.prevalence.Pneumothorax"),
}


@pytest.mark.parametrize("name", sorted(OPTIONAL_POLICY_NUMBERS))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(st.sampled_from([math.nan, math.inf, -math.inf]), st.floats(max_value=-1e-6, min_value=-1e9)))
def test_optional_policy_numbers_refuse_nan_inf_and_negatives(tmp_path: Path, name: str, value: float) -> None:
    import copy

    import yaml

    from medrcube.gate.thresholds import ThresholdsError, load_policy

    section, key, wrap, named = OPTIONAL_POLICY_NUMBERS[name]
    doc = copy.deepcopy(_POLICY)
    doc.setdefault(section, {})[key] = wrap(value)
    path = tmp_path / "thresholds.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(ThresholdsError) as exc:
        load_policy(path)
    _one_line_naming(str(exc.value), str(path), named, "Fix:")
