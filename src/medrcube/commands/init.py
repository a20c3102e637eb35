"""`medrcube init DIR`: write a starter project for a site's qualification.

    medrcube init site && cd site && pytest --model=random

The project holds the gate policy (thresholds.yaml, commented: adapt it), the models
(models.yaml, with a price table for the cost of a run), a conftest.py that declares the
directory a gate suite, the built-in cube checks (test_cube.py imports them from the
package) and one example of a site's own check (test_site.py) that takes part in the
gate's verdict like a built-in one. Existing files are never overwritten.
"""

from __future__ import annotations

import argparse
import sys
from importlib.resources import files
from pathlib import Path

CONFTEST = '''\
"""This directory is a medrcube qualification suite: the medrcube pytest plugin wakes up
for it (cube, thresholds, model, the built-in checks' verdicts, reports/<run-id>/).

Run it:  pytest --model=SPEC [--cube=CUBE] [-n 4] [--alluredir=reports/allure]
Fixtures for your own tests: medrcube_model, medrcube_cube, medrcube_records,
medrcube_verdict (see test_site.py and medrcube's docs/site-tests.md).
"""

MEDRCUBE_SUITE = True
'''

TEST_CUBE = '''\
"""The built-in checks of the medrcube gate: every cube cell, axis slice, the overall
accuracy, credibility, and (when requested) image dependence, position robustness and
regression. Their bounds come from thresholds.yaml; delete a name to leave a kind out."""

from medrcube.suite.test_gate import *  # noqa: F401,F403
'''

TEST_SITE = '''\
"""A site's own check, decided like a built-in one (an interval against a bound) and
reported in gate.json, the terminal summary and Allure.

Replace the selection and the bound with your own rule, e.g. "pneumothorax on our
chest films: sensitivity at least 0.9" (medrcube's docs/site-tests.md).
"""

HIGH_LEVEL = {"Abnormality Diagnosis", "Disease Diagnosis", "Severity Grading"}


def test_diagnosis_accuracy(medrcube_records, medrcube_verdict):
    """Diagnosis-level answers (abnormality, disease, severity): at least 60% correct,
    judged by the lower end of the 95% interval."""
    diagnoses = [r for r in medrcube_records if r.task in HIGH_LEVEL and r.variant == "standard"]
    medrcube_verdict("site/diagnosis accuracy", diagnoses, bound=0.6, rule="lower_bound", min_n=10)
'''

MODELS = '''\
# models.yaml: named models for `pytest --model=NAME` (medrcube's models.example.yaml
# documents every key). Keys NEVER go in this file: an entry names the environment
# variable that holds its key (api_key_env).
#
# price: per million tokens; with it, the gate states the cost of the run and the
# projected cost of the full public cube (7,626 items) in the summary and gate.json.
version: 1
models:
  candidate:
    provider: openai
    model: gpt-5.1
    api_key_env: OPENAI_API_KEY
    params:
      max_completion_tokens: 4096
      temperature: null
    concurrency: 16
    timeout: 120
    price: {prompt: 1.25, completion: 10.0, currency: USD}

  # A model you serve yourself (vLLM, SGLang, TGI speak the same API); no key needed.
  local:
    provider: openai
    model: Qwen/Qwen2.5-VL-7B-Instruct
    base_url: http://127.0.0.1:8000/v1
    api_key_env: VLLM_API_KEY
    params: {max_tokens: 64, temperature: 0}
'''

PYTEST_INI = '''\
[pytest]
# This directory is the project root; `pytest --model=SPEC` runs the gate here.
addopts = -p no:cacheprovider
'''

README = '''\
# Qualification of a model for this site

    pytest --model=random                        # the gate on the bundled mini cube (a baseline: it must fail)
    pytest --model=candidate --cube=/data/cube   # a model of models.yaml on your own cube
    pytest --model=candidate -n 4 --alluredir=reports/allure

- thresholds.yaml: the gate policy (commented; adapt the bounds to your site).
- models.yaml: named models, their parameters and prices.
- test_cube.py: the built-in cube checks; test_site.py: your own checks.
- reports/<run-id>/: gate.json, results.jsonl, metrics_summary.json, run.json, report.html.
'''


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", help="the project directory to create (or fill)")


def files_of_project() -> dict[str, str]:
    thresholds = files("medrcube.gate").joinpath("default_thresholds.yaml").read_text(encoding="utf-8")
    return {
        "conftest.py": CONFTEST,
        "test_cube.py": TEST_CUBE,
        "test_site.py": TEST_SITE,
        "thresholds.yaml": thresholds,
        "models.yaml": MODELS,
        "pytest.ini": PYTEST_INI,
        "README.md": README,
    }


def run(args: argparse.Namespace) -> int:
    target = Path(args.directory)
    if target.exists() and not target.is_dir():
        print(f"medrcube init: {target} exists and is not a directory", file=sys.stderr)
        return 1
    target.mkdir(parents=True, exist_ok=True)
    written, kept = [], []
    for name, text in files_of_project().items():
        path = target / name
        if path.exists():
            kept.append(name)
            continue
        path.write_text(text, encoding="utf-8")
        written.append(name)
    print(f"{target}/: wrote {', '.join(written) or 'nothing'}" + (f"; kept existing {', '.join(kept)}" if kept else ""))
    print(f"next: cd {target} && pytest --model=random")
    return 0
