"""The gate's options and how a run is recognised as a gate run (pytest room).

`read_options` checks the gate options' syntax on every pytest run (cheap: no cube, no
model); their defaults are None in hooks.py so that "given" can be told from "default",
and resolved here. `suite_requested` says whether a qualification suite is part of the
run (a conftest declaring MEDRCUBE_SUITE, or `--pyargs medrcube.suite`);
`check_suite_for_options` makes gate options without a suite a usage error.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from medrcube.models.ceilings import beyond
from medrcube.models.urls import redact_urls
from medrcube.sequential.plan import SequentialPlan

# The conftest.py of a qualification suite sets this to True (medrcube/suite/conftest.py).
SUITE_FLAG = "MEDRCUBE_SUITE"


SUITE_MODULE = "medrcube.suite"


# The gate's options (dest names): given to a run without a gate suite, they are a usage error.
GATE_OPTIONS = (
    "model", "cube", "thresholds", "profile", "baseline", "variants", "judge", "response_store",
    "concurrency", "models_file", "medrcube_report", "sequential", "seed", "max_requests", "max_cost", "fresh",
    "ledger", "new_ledger",
)


HOW_TO_RUN = (
    "run the gate with `pytest --model=SPEC` at the medrcube checkout's root, "
    "`pytest --pyargs medrcube.suite --model=SPEC` anywhere, `medrcube qualify --model=SPEC`, "
    "or in a site project made by `medrcube init DIR`"
)


BUNDLED_CUBE = "fixtures/mini"  # in a checkout; the package ships it as medrcube/suite/mini


PACKAGED_THRESHOLDS = "default_thresholds.yaml"  # in medrcube/gate/


def suite_requested(config: pytest.Config, *, scan: bool = True) -> bool:
    """Whether a qualification suite is part of this run: a loaded conftest declared
    itself, or the arguments name the packaged suite (`--pyargs medrcube.suite`: its
    conftest is loaded only at collection, too late for session start), or (`scan`,
    at session start only) a conftest.py below an argument directory declares one."""
    if any(getattr(p, SUITE_FLAG, False) is True for p in config.pluginmanager.get_plugins()):
        return True
    args = [str(a).split("::", 1)[0] for a in config.args]
    if config.option.pyargs and any(a == SUITE_MODULE or a.startswith(SUITE_MODULE + ".") for a in args):
        return True
    if not scan:
        return False
    here = Path(config.invocation_params.dir)
    for a in args:  # a suite further down an argument directory (its conftest loads later)
        path = (here / a).resolve()
        if path.is_dir() and _declares_suite_below(path):
            return True
    return False


def _declares_suite_below(directory: Path, depth: int = 3) -> bool:
    skip = {".venv", "node_modules", ".git", "__pycache__", "reports", ".medrcube"}
    todo = [(directory, 0)]
    while todo:
        d, level = todo.pop()
        conftest = d / "conftest.py"
        if conftest.is_file() and SUITE_FLAG in conftest.read_text(encoding="utf-8", errors="replace"):
            return True
        if level < depth:
            try:
                todo += [(c, level + 1) for c in d.iterdir() if c.is_dir() and c.name not in skip]
            except OSError:
                continue
    return False


def gate_options_given(config: pytest.Config) -> list[str]:
    """The gate options this run was given (their defaults are None: see hooks.py)."""
    return [f"--{name.replace('_', '-')}" for name in GATE_OPTIONS if getattr(config.option, name, None) is not None]


def check_suite_for_options(config: pytest.Config, *, collected: bool = False) -> None:
    """Gate options without a gate suite are a usage error, never silently ignored.
    After collection every conftest of the run is loaded: only a declared flag counts."""
    given = gate_options_given(config)
    if given and not suite_requested(config, scan=not collected):
        raise pytest.UsageError(
            f"{', '.join(given)} given, but this pytest run collects no medrcube gate suite; {HOW_TO_RUN}"
        )


@dataclass(frozen=True)
class GateOptions:
    """The validated gate options. Paths are absolute; defaults resolved as documented."""

    model: str
    cube: str | None  # None: the bundled mini cube under the rootdir (resolved at open)
    thresholds: Path | None  # None: the packaged default policy
    profile: str | None
    baseline: str | None
    variants: str
    judge: str | None
    response_store: Path
    concurrency: int | None
    models_file: Path | None
    report_dir: Path
    rootdir: Path
    sequential: SequentialPlan | None = None  # --sequential: the order's seed and the budgets
    fresh: bool | None = None  # --fresh / --no-fresh; None: the profile decides (plugin/evidence.py)
    model_given: bool = True  # False: no --model, the random baseline runs (said in the header and summary)
    ledger: Path | None = None  # --ledger=DIR: the ledger of attempts (None: the response store's directory)
    new_ledger: bool = False  # --new-ledger: start the ledger where the profile needs one (plugin/ledger.py)


def _usage(option: str, value: object, problem: str) -> pytest.UsageError:
    # The value is quoted as given, and CI logs keep usage errors: credentials in it (or in
    # the problem, which may quote it) are cut by the one rule `medrcube run` uses.
    return pytest.UsageError(redact_urls(f"{option}={value}: {problem}"))


def read_options(config: pytest.Config) -> GateOptions:
    """Check the gate options' syntax (no cube, no model). Raises pytest.UsageError."""
    opt = config.option
    here = Path(config.invocation_params.dir)
    root = Path(config.rootpath)

    def path_of(value: str) -> Path:
        return (here / os.path.expanduser(value)).resolve()

    model = (opt.model if opt.model is not None else "random").strip()
    if not model:
        raise _usage("--model", opt.model, "empty model spec; e.g. --model=random or --model=openai:NAME@URL")

    concurrency: int | None = None
    if opt.concurrency is not None:
        try:
            concurrency = int(opt.concurrency)
        except ValueError:
            concurrency = 0
        if concurrency < 1:
            raise _usage("--concurrency", opt.concurrency, "must be a positive integer, e.g. --concurrency=8")
        if (past := beyond("concurrency", concurrency)) is not None:
            raise _usage("--concurrency", opt.concurrency, f"{past}; e.g. --concurrency=8")

    thresholds: Path | None
    if opt.thresholds is not None:
        thresholds = path_of(opt.thresholds)
        if not thresholds.is_file():
            raise _usage("--thresholds", opt.thresholds, f"no such file ({thresholds})")
    else:
        # ./thresholds.yaml of the invocation directory, then of the rootdir, then packaged.
        candidates = [here / "thresholds.yaml", root / "thresholds.yaml"]
        thresholds = next((p.resolve() for p in candidates if p.is_file()), None)

    models_file: Path | None = None
    if opt.models_file is not None:
        models_file = path_of(opt.models_file)
        if not models_file.is_file():
            raise _usage("--models-file", opt.models_file, f"no such file ({models_file})")

    variants = (opt.variants if opt.variants is not None else "standard").strip()
    _parse_variants(variants)  # syntax only; raises UsageError

    cube = opt.cube
    if cube is not None and ":" not in cube.split(os.sep)[0]:
        cube = str(path_of(cube))  # a path: absolute, so every worker reads the same cube

    store = path_of(opt.response_store or ".medrcube")
    if store.exists() and not store.is_dir():
        raise _usage("--response-store", opt.response_store, f"{store} exists and is not a directory")
    report = path_of(opt.medrcube_report or "reports")
    if report.exists() and not report.is_dir():
        raise _usage("--medrcube-report", opt.medrcube_report, f"{report} exists and is not a directory")

    ledger = path_of(opt.ledger) if opt.ledger else None
    if ledger is not None and ledger.exists() and not ledger.is_dir():
        raise _usage("--ledger", opt.ledger, f"{ledger} exists and is not a directory")
    sequential = _sequential_plan(opt)
    return GateOptions(
        ledger=ledger,
        new_ledger=bool(opt.new_ledger),
        sequential=sequential,
        model=model,
        cube=cube,
        thresholds=thresholds,
        profile=opt.profile,
        baseline=opt.baseline,
        variants=variants,
        judge=opt.judge,
        response_store=store,
        concurrency=concurrency,
        models_file=models_file,
        report_dir=report,
        rootdir=root,
        fresh=opt.fresh,
        model_given=opt.model is not None,
    )


def _number(option: str, value: object, kind: type, example: str) -> Any:
    try:
        number = kind(str(value))
    except ValueError:
        number = None
    # NaN compares false with everything and an infinite budget is no budget: both refused
    if number is None or not math.isfinite(number) or number <= 0:
        what = "a positive whole number" if kind is int else "a finite positive number"
        raise _usage(option, value, f"must be {what}, e.g. {option}={example} (leave it out for no limit)")
    if (past := beyond(option.lstrip("-").replace("-", "_"), number)) is not None:
        raise _usage(option, value, f"{past}; e.g. {option}={example} (leave it out for no limit)")
    return number


def _sequential_plan(opt: Any) -> SequentialPlan | None:
    """--sequential and its seed and budgets; the budgets alone are a usage error."""
    budgets = {"--seed": opt.seed, "--max-requests": opt.max_requests, "--max-cost": opt.max_cost}
    if not opt.sequential:
        given = [name for name, value in budgets.items() if value is not None]
        if given:
            raise pytest.UsageError(f"{', '.join(given)} only apply to a sequential run: add --sequential")
        return None
    seed = 0
    if opt.seed is not None:
        try:
            seed = int(opt.seed)
        except ValueError:
            raise _usage("--seed", opt.seed, "must be an integer, e.g. --seed=1") from None
    return SequentialPlan(
        seed=seed,
        max_requests=_number("--max-requests", opt.max_requests, int, "2000") if opt.max_requests else None,
        max_cost=_number("--max-cost", opt.max_cost, float, "25") if opt.max_cost else None,
    )


def _parse_variants(spec: str) -> tuple[Any, ...]:
    from medrcube.run.variants import parse_variants

    try:
        return tuple(parse_variants(spec))
    except ValueError as e:
        raise _usage("--variants", spec, f"{e} (e.g. --variants=standard,blind,shuffled:3)") from None


def realign_setup(early_config: pytest.Config, args: list[str]) -> None:
    """Find the rootdir and ini file again once the gate's options are known.

    pytest finds them before any plugin's options exist, so in `--cube DIR` (a space, not
    `=`) DIR is read as a test path; with DIR outside the checkout the checkout's ini
    file, its testpaths among it, is never found, and the project's own tests are
    collected besides the gate. Here (pytest_load_initial_conftests, before the initial
    conftests and testpaths are read) the setup is determined again from the test paths
    as parsed with every option known; when it differs, it replaces the early one, and
    the ini file's addopts are applied as pytest would have. Should pytest's internals not
    be as expected, the ambiguous form is refused with a usage error instead.
    """
    from _pytest.config.findpaths import determine_setup

    ns = early_config.known_args_namespace
    try:  # the same call pytest makes (pytest 9), with the test paths as now parsed
        rootpath, inipath, inicfg, ignored = determine_setup(
            inifile=ns.inifilename, override_ini=ns.override_ini, args=ns.file_or_dir,
            rootdir_cmd_arg=ns.rootdir or None, invocation_dir=early_config.invocation_params.dir,
        )
    except pytest.UsageError:
        return  # pytest itself reports a bad -c / --rootdir
    except (TypeError, AttributeError):  # another pytest's internals: leave its setup as it is
        return
    if (rootpath, inipath) == (early_config.rootpath, early_config.inipath):
        return
    given = [f"--{name.replace('_', '-')}" for name in GATE_OPTIONS if getattr(ns, name, None) is not None]
    old_inipath, old_root = early_config.inipath, early_config.rootpath
    try:
        early_config._rootpath, early_config._inipath = rootpath, inipath  # noqa: SLF001 - see the docstring
        early_config._inicfg, early_config._ignored_config_files = inicfg, ignored  # noqa: SLF001
        early_config._inicache.clear()  # noqa: SLF001
        early_config._parser.extra_info.update(rootdir=str(rootpath), inifile=str(inipath))  # noqa: SLF001
    except AttributeError:
        raise pytest.UsageError(
            f"{', '.join(given) or 'an option'} given with a space before its value, which this pytest reads as a "
            "test path too: write it with '=' (e.g. --cube=DIR)"
        ) from None
    derived = str(old_inipath.parent if old_inipath is not None else old_root)
    if ns.confcutdir == derived:  # pytest derived it from the early setup, the user gave none
        ns.confcutdir = str(inipath.parent if inipath is not None else rootpath)
    if old_inipath is None and inipath is not None:
        args[:] = list(early_config.getini("addopts")) + args


def bundled_cube() -> Path | None:
    """The bundled mini cube (package data of medrcube.suite, named by a string: the
    pytest room never imports the suite, which imports it)."""
    from importlib.resources import files

    mini = Path(str(files("medrcube").joinpath("suite", "mini")))
    return mini if mini.is_dir() else None


def resolve_cube_spec(options: GateOptions) -> str:
    """The cube to load: --cube, else the bundled mini cube (shipped in the package)."""
    if options.cube is not None:
        return options.cube
    mini = bundled_cube()
    if mini is None:
        raise pytest.UsageError(
            "--cube not given and this install of medrcube lacks its bundled mini cube "
            "(medrcube/suite/mini); pass --cube=PATH (a release directory, a .jsonl file or hf:NAME)"
        )
    return str(mini)


def packaged_thresholds() -> Path | None:
    """The policy shipped inside the package, used when no thresholds.yaml is around."""
    from importlib.resources import files

    candidate = files("medrcube.gate").joinpath(PACKAGED_THRESHOLDS)
    return Path(str(candidate)) if candidate.is_file() else None
