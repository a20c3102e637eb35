"""Agreement between the model reviewer and a clinician, in the layout of the paper's Table 5.

Input: the reviewer's verdicts (the build's `review.jsonl`) and a CSV of a clinician's
judgments on a sample of the same items, either wide (`item_id, 1.1, 1.2, ..., 2.3`) or
long (`item_id, principle, judgment`), judgments written pass/fail, yes/no, true/false
or 1/0.

Output, per sub-principle: the number of items both judged, the share of equal
judgments (agreement) and Cohen's kappa; and at the sample level: the share of items on
which every judgment is equal, with Cohen's kappa of the item-level decision (accept =
every principle passes). Kappa is undefined (None, shown as "n/a") when both raters give
a single identical category throughout: chance agreement is then 1.

    python -m medrcube.construction.stages.agreement EXPERT.csv REVIEW.jsonl
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrcube.construction.stages.review import CODES, PRINCIPLE_BY_CODE

Judgments = dict[str, dict[str, bool]]  # item id -> sub-principle code -> pass
_TRUE = {"pass", "yes", "y", "true", "1", "accept", "ok"}
_FALSE = {"fail", "no", "n", "false", "0", "reject"}


class AgreementError(ValueError):
    """A judgments file cannot be read; the message names the file, the row, the column and the fix."""


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters' labels for the same items (None when undefined)."""
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} and {len(b)} labels; expected one pair per item")
    n = len(a)
    if n == 0:
        return None
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    if pe >= 1.0:
        return None
    return (po - pe) / (1.0 - pe)


@dataclass(frozen=True, slots=True)
class AgreementRow:
    key: str  # a sub-principle code, or "sample"
    name: str
    n: int
    agree: int
    kappa: float | None

    @property
    def agreement(self) -> float | None:
        return self.agree / self.n if self.n else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key, "name": self.name, "n": self.n, "agree": self.agree,
            "agreement": None if self.agreement is None else round(self.agreement, 4),
            "kappa": None if self.kappa is None else round(self.kappa, 4),
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class AgreementTable:
    rows: tuple[AgreementRow, ...]  # one per sub-principle, in code order
    sample: AgreementRow
    only_model: int = 0  # items the clinician did not judge (not in the table)
    only_expert: int = 0  # items the clinician judged that the reviewer did not

    def to_dict(self) -> dict[str, Any]:
        return {
            "principles": [r.to_dict() for r in self.rows], "sample_level": self.sample.to_dict(),
            "items_only_reviewed_by_model": self.only_model, "items_only_judged_by_expert": self.only_expert,
        }  # fmt: skip

    def to_markdown(self) -> str:
        def pct(v: float | None) -> str:
            return "n/a" if v is None else f"{100 * v:.1f}%"

        def k(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.3f}"

        lines = [
            "| Principle | n | Agreement | Cohen's kappa |",
            "|---|---:|---:|---:|",
        ]
        lines += [f"| {r.key} {r.name} | {r.n} | {pct(r.agreement)} | {k(r.kappa)} |" for r in self.rows]
        lines.append(f"| {self.sample.name} | {self.sample.n} | {pct(self.sample.agreement)} | {k(self.sample.kappa)} |")
        return "\n".join(lines) + "\n"


def agreement(model: Mapping[str, Mapping[str, bool]], expert: Mapping[str, Mapping[str, bool]], codes: Sequence[str] = CODES) -> AgreementTable:
    """Per-principle and sample-level agreement of two raters over the items both judged."""
    items = sorted(set(model) & set(expert))
    rows = []
    for c in codes:
        pairs = [(model[i][c], expert[i][c]) for i in items if c in model[i] and c in expert[i]]
        rows.append(AgreementRow(c, PRINCIPLE_BY_CODE[c].name if c in PRINCIPLE_BY_CODE else c, len(pairs),
                                 sum(a == b for a, b in pairs), cohen_kappa([a for a, _ in pairs], [b for _, b in pairs])))  # fmt: skip
    complete = [i for i in items if all(c in model[i] and c in expert[i] for c in codes)]
    equal = sum(all(model[i][c] == expert[i][c] for c in codes) for i in complete)
    accept_m = [all(model[i][c] for c in codes) for i in complete]
    accept_e = [all(expert[i][c] for c in codes) for i in complete]
    sample = AgreementRow("sample", "Sample level (all judgments equal)", len(complete), equal, cohen_kappa(accept_m, accept_e))
    return AgreementTable(tuple(rows), sample, only_model=len(set(model) - set(expert)), only_expert=len(set(expert) - set(model)))


# -- reading -------------------------------------------------------------------------------


def _judgment(value: str, where: str) -> bool:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise AgreementError(f"{where}: judgment {value!r} is neither pass nor fail; write pass/fail, yes/no, true/false or 1/0")


def read_judgments_csv(path: str | Path) -> Judgments:
    """A clinician's judgments, wide (item_id + one column per code) or long (item_id, principle, judgment)."""
    p = Path(path)
    try:
        with open(p, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            header = [h.strip() for h in (reader.fieldnames or [])]
            rows = list(reader)
    except OSError as exc:
        raise AgreementError(f"{p}: cannot read the judgments file ({exc})") from None
    id_col = next((h for h in ("item_id", "id") if h in header), None)
    if id_col is None:
        raise AgreementError(f"{p}: no 'item_id' column (columns: {', '.join(header)}); name the item column item_id")
    out: Judgments = {}
    long = "principle" in header and "judgment" in header
    codes_present = [c for c in CODES if c in header]
    if not long and not codes_present:
        raise AgreementError(f"{p}: neither the wide layout (columns {', '.join(CODES)}) nor the long one (principle, judgment)")
    for n, row in enumerate(rows, start=2):
        row = {(k or "").strip(): (v or "") for k, v in row.items()}
        item = row[id_col].strip()
        if not item:
            raise AgreementError(f"{p}: line {n} has an empty {id_col}")
        if long:
            code = row["principle"].strip()
            if code not in CODES:
                from medrcube.taxonomy import did_you_mean

                raise AgreementError(f"{p}: line {n} column 'principle' is {code!r}{did_you_mean(code, CODES)}; expected one of {', '.join(CODES)}")
            if code in out.get(item, {}):
                raise AgreementError(f"{p}: line {n}: item {item!r} principle {code} is judged twice")
            out.setdefault(item, {})[code] = _judgment(row["judgment"], f"{p}: line {n} column 'judgment'")
        else:
            if item in out:
                raise AgreementError(f"{p}: line {n}: item {item!r} appears twice")
            out[item] = {c: _judgment(row[c], f"{p}: line {n} column {c!r}") for c in codes_present if row[c].strip()}
    return out


def read_review_jsonl(path: str | Path) -> Judgments:
    """The reviewer's verdicts from a build's review.jsonl (items with a verdict only)."""
    out: Judgments = {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AgreementError(f"{path}: line {n} is not JSON ({exc.msg})") from None
        if rec.get("verdicts"):
            out[rec["id"]] = {c: v == "pass" for c, v in rec["verdicts"].items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m medrcube.construction.stages.agreement", description=__doc__.split("\n")[0])
    parser.add_argument("expert_csv")
    parser.add_argument("review_jsonl")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        table = agreement(read_review_jsonl(args.review_jsonl), read_judgments_csv(args.expert_csv))
    except (AgreementError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(table.to_dict(), indent=2) + "\n" if args.json else table.to_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
