"""The reliability suite's recorder: one tally per fault or input class, and the table of
RELIABILITY.md rendered from them.

A test asks the `tally` fixture (conftest.py) for the tally of its class and counts into
it while it works: what it injected, how many runs it made and how each ended, and what
went missing or was asked twice. The fixture hands the tally to pytest as a user
property of the test's report, so that it reaches the xdist controller with the report
itself; the controller's session-finish hook merges the tallies by class and, when asked
to (MEDRCUBE_WRITE_RELIABILITY=1) and the suite ran in full, writes RELIABILITY.md.

Column meanings (also printed under the table):

- injected: faults or bad inputs put in (as counted at the server, or by the test);
- runs: runs (or loads, or parses) made under that class;
- completed: runs that ended with every item answered or its error recorded (a bad
  input: loaded, the bad part reported and skipped);
- stopped cleanly: runs that stopped with a clear error message, nothing lost;
- items lost: an item that ended with neither a graded answer nor a recorded error, a
  committed response that disappeared, or a good item dropped with a bad neighbour;
- duplicated requests: a request for a key whose response was already committed, or a
  request the server answered twice within one uninterrupted run;
- re-sent by design: requests asked again because no answer had been kept for them: in
  flight at a SIGKILL or a restart, not committable on a full disk, read back damaged,
  or ended as an error and asked again by a rerun;
- gate passes on incomplete evidence: checks that passed although their error rate
  exceeded max_error_rate;
- unclear: tracebacks, hangs or leaked secrets instead of a clear outcome.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

PROPERTY = "medrcube_reliability"  # the user-property name a tally travels under

# The columns that must stay at zero for the suite to hold its promises.
MUST_BE_ZERO = ("lost", "duplicates", "gate_passes_incomplete", "unclear")


@dataclass(frozen=True)
class ClassInfo:
    """One row of the table: what is attacked and what must happen."""

    key: str
    suite: str  # faults, bad input, secrets
    title: str
    expected: str  # the outcome the tests hold the system to


_C = ClassInfo
CLASSES: tuple[ClassInfo, ...] = (
    # -- faults (tests/reliability/test_faults.py) --------------------------------------
    _C("f429_retry_after", "faults", "429 bursts with Retry-After",
       "retried after the delay asked; completed, every item answered once"),
    _C("f429_plain", "faults", "429 bursts without Retry-After",
       "retried with backoff; completed, every item answered once"),
    _C("f5xx_storm", "faults", "5xx storms (500/502/503/504)",
       "retried; completed, every item answered once"),
    _C("f_hang", "faults", "hangs past the timeout",
       "timed out and retried; completed, every item answered once"),
    _C("f_malformed", "faults", "malformed bodies (not JSON)",
       "retried, never graded; completed"),
    _C("f_truncated", "faults", "truncated bodies",
       "retried, never graded; completed"),
    _C("f_empty_choices", "faults", "empty choices",
       "retried, never graded; completed"),
    _C("f_drop", "faults", "connections dropped mid-response",
       "retried; completed, every item answered once"),
    _C("f_reset", "faults", "connections reset before a response",
       "retried; completed, every item answered once"),
    _C("f_persistent", "faults", "faults beyond the retry budget",
       "errors recorded, never graded; gate errors the checks; a rerun asks only those"),
    _C("f_refusal", "faults", "refusals and content filter",
       "graded as refused, never as an error or a wrong letter"),
    _C("server_restart", "faults", "server killed and restarted mid-run",
       "connection errors retried; completed, every item answered once"),
    _C("xdist_worker_kill", "faults", "xdist worker SIGKILLed mid-run",
       "xdist reports the crash; the rerun completes from the store"),
    _C("sigkill_random", "faults", "`medrcube run` SIGKILLed at random points",
       "resumed: stored responses never asked again, every item answered"),
    _C("concurrent_runs", "faults", "two runs at once on one store",
       "each request sent once across both runs; identical results"),
    _C("store_corruption", "faults", "response store damaged on disk",
       "detected, reported, moved aside or re-asked; never graded from damage"),
    _C("disk_full_reports", "faults", "disk full while writing reports",
       "stopped with a clear error; store intact; rerun asks nothing"),
    _C("disk_full_store", "faults", "disk full under the response store",
       "stopped with a clear error; committed responses kept"),
    # -- hostile endpoints (tests/reliability/test_endpoint.py) --------------------------
    _C("f_redirect", "endpoint", "redirects (307 to another host)",
       "not followed; an error naming the location; the other host asked nothing"),
    _C("f_drip", "endpoint", "bodies dripped a byte per second",
       "cut at the total deadline and retried; completed, every item answered once"),
    _C("f_gzip_bomb", "endpoint", "gzip bombs (about 0.5 MiB inflating to 512 MiB)",
       "refused past the decoded-size cap, memory bounded; never graded"),
    _C("f_served_model", "endpoint", "answers naming another model",
       "recorded per response and in the run's summary; an error under strict_model"),
    _C("f_length", "endpoint", "answers cut at the token limit (finish_reason length)",
       "recorded as truncated, never graded, counted against the error bound"),
    _C("store_endpoint", "endpoint", "one model name on two endpoints, one store",
       "each endpoint asked; answers shared only when models.yaml says so"),
    _C("image_metadata", "endpoint", "image metadata (PNG text, trailing bytes, EXIF, JPEG comments)",
       "re-encoded from pixels: none of it leaves; the digest sent is recorded"),
    _C("image_files", "endpoint", "FIFOs, sparse huge files, symlink swaps, non-UTF-8 names",
       "refused at load or at run time, naming the item; nothing hangs, nothing foreign sent"),
    _C("store_unusable", "endpoint", "a read-only, directory-shaped or unopenable store",
       "a clear error naming the store and the fix, no traceback"),
    _C("xdist_orphans", "faults", "xdist controller SIGKILLed mid-run",
       "its orphaned workers stop asking within a second"),
    _C("report_mismatch", "bad input", "results.jsonl damaged, duplicated or from another run",
       "`medrcube report` refuses it naming the file and line, no traceback"),
    # -- bad input (tests/reliability/test_bad_input.py) ---------------------------------
    _C("bad_release_record", "bad input", "mutated test.json records (hypothesis)",
       "bad record reported by file, item and field; the others load"),
    _C("bad_jsonl_record", "bad input", "mutated JSON Lines records (hypothesis)",
       "bad record reported by file, line or item and field; the others load"),
    _C("random_image_bytes", "bad input", "random bytes as images (hypothesis)",
       "refused as not an image, naming file and item"),
    _C("truncated_images", "bad input", "truncated PNG / JPEG / DICOM",
       "refused at load, or an error naming the item at run time; never graded"),
    _C("huge_dimensions", "bad input", "huge dimensions in a PNG header",
       "refused as a decompression bomb, or an item error at run time"),
    _C("huge_json", "bad input", "huge JSON (long strings, long lists)",
       "loaded or refused in bounded time"),
    _C("deep_json", "bad input", "deeply nested JSON",
       "a clear error naming the file"),
    _C("big_int_json", "bad input", "integers beyond Python's digit limit",
       "a clear error naming the file"),
    _C("non_utf8", "bad input", "non-UTF-8 text",
       "a clear error naming the file (and line)"),
    _C("lone_surrogates", "bad input", "lone UTF-16 surrogates in JSON strings",
       "a clear error naming the file, item and field"),
    _C("thresholds_fuzz", "bad input", "thresholds.yaml fuzzed (hypothesis)",
       "ThresholdsError naming the file and key"),
    _C("thresholds_hostile", "bad input", "thresholds.yaml: deep nesting, huge ints",
       "ThresholdsError naming the file"),
    _C("models_fuzz", "bad input", "models.yaml fuzzed (hypothesis)",
       "ModelsFileError naming the file, entry and key"),
    _C("models_hostile", "bad input", "models.yaml: deep nesting, huge ints, non-UTF-8, alias bombs",
       "ModelsFileError naming the file, in bounded time"),
    _C("cli_bad_input", "bad input", "bad inputs through `medrcube run` and the gate",
       "exit status 1 or a usage error, message names the source, no traceback"),
    # -- secrets and privacy (tests/reliability/test_secrets.py) -------------------------
    _C("key_marker", "secrets", "API key marker through every path",
       "never in a file written, the output or the logs"),
    _C("key_echoed_by_provider", "secrets", "provider error bodies quoting the key",
       "redacted before it is stored or printed"),
    _C("literal_key_in_models_yaml", "secrets", "literal keys in models.yaml",
       "refused, and the message does not echo the key"),
    _C("url_credentials", "secrets", "credentials inside a base URL (userinfo, ?api-key=, ?sig=)",
       "refused in specs, models.yaml and OPENAI_BASE_URL; never written to disk"),
    _C("key_echoed_by_model", "secrets", "the key echoed inside a 200 answer",
       "cut from the answer before it is stored, graded or written"),
    _C("unsafe_yaml", "secrets", "YAML python/* tags",
       "refused; nothing constructed or executed"),
    _C("no_pickle", "secrets", "pickle, eval, exec, unsafe loaders in the package",
       "none"),
    _C("cube_paths", "secrets", "image paths leaving the cube (.., absolute, symlinks)",
       "refused; only validated keys are readable"),
    _C("cube_text_inert", "secrets", "template and format syntax in cube text",
       "shown literally; nothing evaluated"),
)
BY_KEY: dict[str, ClassInfo] = {c.key: c for c in CLASSES}


@dataclass
class Tally:
    """The counts of one class from one test (see the module docstring for columns)."""

    klass: str
    injected: int = 0
    runs: int = 0
    completed: int = 0
    stopped: int = 0
    lost: int = 0
    duplicates: int = 0
    resent: int = 0
    gate_passes_incomplete: int = 0
    unclear: int = 0
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.klass not in BY_KEY:
            raise KeyError(f"unknown reliability class {self.klass!r}; add it to CLASSES in {__name__}")

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Tally:
        return cls(**{k: (list(v) if k == "notes" else v) for k, v in d.items()})


@dataclass
class Row:
    """A class's tallies merged over every test that counted into it."""

    info: ClassInfo
    total: Tally
    tests: dict[str, str] = field(default_factory=dict)  # nodeid -> pytest outcome

    @property
    def outcome(self) -> str:
        outcomes = set(self.tests.values())
        if not outcomes:
            return "not run"
        if outcomes <= {"passed"}:
            return self.info.expected
        if "failed" in outcomes:
            return "FAILED: " + self.info.expected
        if "xfailed" in outcomes:
            bugs = "; ".join(n for n in self.total.notes if n.startswith("BUG"))
            return f"known bug (strict xfail){': ' + bugs if bugs else ''}"
        return ", ".join(sorted(outcomes))


def merge(entries: Iterable[tuple[str, str, Mapping[str, Any]]]) -> dict[str, Row]:
    """Rows by class from (nodeid, pytest outcome, tally dict) triples."""
    rows: dict[str, Row] = {}
    for nodeid, outcome, raw in entries:
        t = Tally.from_dict(raw)
        row = rows.get(t.klass)
        if row is None:
            row = rows[t.klass] = Row(BY_KEY[t.klass], Tally(t.klass))
        for name in ("injected", "runs", "completed", "stopped", "lost", "duplicates", "resent",
                     "gate_passes_incomplete", "unclear"):
            setattr(row.total, name, getattr(row.total, name) + getattr(t, name))
        for n in t.notes:
            row.total.note(n)
        row.tests[nodeid] = outcome
    return rows


HEADER = """\
# Reliability and security record

Generated by the reliability suite (`tests/reliability/`); do not edit by hand.
Regenerate with `./scripts/reliability` (it runs `pytest tests/reliability -n 2` with
`MEDRCUBE_WRITE_RELIABILITY=1`; the file is written only when every test of the suite
ran and none failed). Each row is one fault or input class: how many faults or bad
inputs were injected, how the runs ended, and what was lost or asked twice.
"""

COLUMNS = (
    ("Class", None), ("Suite", None), ("Injected", "injected"), ("Runs", "runs"),
    ("Completed", "completed"), ("Stopped cleanly", "stopped"), ("Items lost", "lost"),
    ("Duplicated requests", "duplicates"), ("Re-sent by design", "resent"),
    ("Gate passes on incomplete evidence", "gate_passes_incomplete"), ("Unclear", "unclear"),
    ("Outcome", None),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(rows: Mapping[str, Row], *, environment: str = "") -> str:
    """RELIABILITY.md: header, the table in CLASSES order, totals, notes, column legend."""
    lines = [HEADER]
    if environment:
        lines.append(f"Last generated on: {environment}\n")
    lines.append("| " + " | ".join(c for c, _ in COLUMNS) + " |")
    lines.append("|" + "|".join("---" if f is None else "---:" for _, f in COLUMNS) + "|")
    totals = Tally(CLASSES[0].key)
    for info in CLASSES:
        row = rows.get(info.key)
        if row is None:
            continue
        t = row.total
        cells = []
        for title, attr in COLUMNS:
            if attr is not None:
                cells.append(str(getattr(t, attr)))
                setattr(totals, attr, getattr(totals, attr) + getattr(t, attr))
            elif title == "Class":
                cells.append(_cell(info.title))
            elif title == "Suite":
                cells.append(info.suite)
            else:
                cells.append(_cell(row.outcome))
        lines.append("| " + " | ".join(cells) + " |")
    total_cells = ["**all classes**", ""] + [
        f"**{getattr(totals, attr)}**" for _, attr in COLUMNS if attr is not None
    ] + [""]
    lines.append("| " + " | ".join(total_cells) + " |")
    notes = [(info, n) for info in CLASSES if info.key in rows for n in rows[info.key].total.notes]
    if notes:
        lines.append("\n## Notes\n")
        for info, n in notes:
            lines.append(f"- {info.title}: {_cell(n)}")
    lines.append("\n## Columns\n")
    doc = __doc__ or ""
    legend = doc.split("Column meanings (also printed under the table):", 1)[1].strip()
    lines.append(legend)
    return "\n".join(lines).rstrip() + "\n"
