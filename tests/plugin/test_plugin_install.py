"""Issue 13's acceptance test: the wheel, installed into a fresh virtual environment
outside the checkout, runs the gate anywhere.

The wheel is built from this checkout (no build isolation: no registry is reached) and
installed with `--no-deps --no-index` into a new venv; its dependencies are those of the
test's own environment, reached through a .pth file appended after the venv's own
site-packages, so the medrcube that runs is the wheel's (asserted), never the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("install")
    # Built from a copy of the sources, so that setuptools' build/ and egg-info never land
    # in the checkout; the link src/medrcube/suite/mini -> fixtures/mini is kept as a link.
    source = root / "source"
    shutil.copytree(
        REPO, source, symlinks=True,
        ignore=shutil.ignore_patterns(".git", ".venv", ".tools", "node_modules", "reports", "build", "dist",
                                      ".medrcube", "__pycache__", "*.egg-info", ".hypothesis", "benchmarks", "tests"),
    )  # fmt: skip
    wheels = root / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("medrcube-*.whl")
    env = root / "env"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )
    (site / "zz_medrcube_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return {"root": root, "python": python, "bin": env / "bin"}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PYTEST_", "PYTHON"))}
    env.update(extra)
    return env


def _run(installed: dict[str, Path], args: list[str], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=_env(**extra), capture_output=True, text=True, timeout=600)


def _latest_gate(directory: Path) -> dict:
    (latest,) = sorted((directory / "reports").iterdir())[-1:]
    return json.loads((latest / "gate.json").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_init_site_and_pytest_model_random_from_the_wheel(installed: dict[str, Path]) -> None:
    python, root = installed["python"], installed["root"]
    where = _run(installed, [str(python), "-c", "import medrcube; print(medrcube.__file__)"], root)
    assert str(root / "env") in where.stdout, where  # the wheel's medrcube, not the checkout's

    made = _run(installed, [str(installed["bin"] / "medrcube"), "init", "site"], root)
    assert made.returncode == 0, made.stderr
    site = root / "site"
    assert {"conftest.py", "test_cube.py", "test_site.py", "thresholds.yaml", "models.yaml"} <= {
        p.name for p in site.iterdir()
    }
    assert "# " in (site / "thresholds.yaml").read_text(encoding="utf-8")  # the commented policy

    run = _run(installed, [str(python), "-m", "pytest", "--model=random", "-q"], site)
    assert run.returncode == 10, run.stdout[-3000:] + run.stderr[-3000:]
    doc = _latest_gate(site)
    assert doc["verdict"] == "NOT QUALIFIED"
    assert "suite/mini" in doc["cube"]["source"]  # the bundled cube, from the package
    site_check = next(c for c in doc["checks"] if c["id"] == "site/diagnosis accuracy")
    assert site_check["kind"] == "site" and site_check["verdict"] == "fail"  # it takes part in the verdict
    assert site_check["interval"][1] < site_check["bound"]
    assert "site check site/diagnosis accuracy:" in run.stdout
    assert run.stdout.rstrip().splitlines()[-2].startswith("gate: NOT QUALIFIED (")


@pytest.mark.slow
def test_packaged_suite_and_qualify_in_an_empty_directory(installed: dict[str, Path]) -> None:
    empty = installed["root"] / "empty"
    empty.mkdir()
    run = _run(installed, [str(installed["python"]), "-m", "pytest", "--pyargs", "medrcube.suite", "--model=random", "-q"], empty)
    assert run.returncode == 10, run.stdout[-3000:] + run.stderr[-3000:]
    assert _latest_gate(empty)["verdict"] == "NOT QUALIFIED"
    qualify = _run(installed, [str(installed["bin"] / "medrcube"), "qualify", "--model=random", "-q"], empty)
    assert qualify.returncode == 10, qualify.stdout[-3000:] + qualify.stderr[-3000:]
    assert "gate: NOT QUALIFIED (" in qualify.stdout


@pytest.mark.slow
def test_missing_key_and_dead_url_are_one_message_each(installed: dict[str, Path]) -> None:
    site = installed["root"] / "site2"
    _run(installed, [str(installed["bin"] / "medrcube"), "init", str(site)], installed["root"])
    python = str(installed["python"])

    nokey = _run(installed, [python, "-m", "pytest", "--model=gpt-5.1", "-q"], site)
    errors = [line for line in nokey.stderr.splitlines() if line.startswith("ERROR:")]
    assert nokey.returncode == 4 and len(errors) == 1, nokey.stderr
    assert "OPENAI_API_KEY" in errors[0]

    dead = _run(
        installed, [python, "-m", "pytest", "--model=gpt-5.1", "-q"], site,
        OPENAI_API_KEY="sk-test-not-a-real-key", OPENAI_BASE_URL="http://127.0.0.1:9/v1",
    )  # fmt: skip
    errors = [line for line in dead.stderr.splitlines() if line.startswith("ERROR:")]
    # A usage error (exit 4) from the pre-flight: no item was asked, so no retry ran
    # (how long that takes is measured in benchmarks/, never asserted here).
    assert dead.returncode == 4 and len(errors) == 1, dead.stderr
    assert "http://127.0.0.1:9/v1" in errors[0]
    assert "sk-test-not-a-real-key" not in dead.stdout + dead.stderr
