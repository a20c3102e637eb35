"""Free-text screening: identifying values in every spelling a person would write them.

A build carries some header text into its outputs (a derivation quotes BodyPartExamined,
the build report counts an unmapped term with its raw value). Such text can hold a
patient's name in another order or case ("zaphod BEEBLEBROX" for Beeblebrox^Zaphod), a
birth date as 23.05.1961, a record number without its prefix. `Identities` turns the
identifying values read from the sources into normalised forms and finds or redacts them:

- every text is compared as a sequence of tokens (runs of letters and digits, case and
  accents folded), so separators, case and spacing do not matter;
- a person name (a PN attribute, or a value written with '^') gives its components in
  both orders, with initials for the given and middle names, each component alone when
  it has at least 4 letters, and the run-together forms ("zaphodbeeblebrox");
- a date gives YYYYMMDD, DD.MM.YYYY, MM/DD/YYYY, YYYY-MM-DD, unpadded day and month,
  two-digit years, and month names (23 May 1961, May 23 1961); a time its HHMMSS;
- a record number gives itself, its run-together form and each run of 5 or more digits.

The same forms serve `redact` (before anything is written or sent to a reviewer) and
`find` (the final leak scan of every exported text file).
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

# What a build's counters are keyed by: a reason, or a (task, why) pair.
CountKey = TypeVar("CountKey", str, tuple[str, str])

REDACTED = "[redacted]"
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december")
_TOKEN = re.compile(r"[0-9a-z]+")


def fold(text: str) -> str:
    """Lower case without accents (NFKD, combining marks dropped)."""
    return "".join(c for c in unicodedata.normalize("NFKD", str(text)) if not unicodedata.combining(c)).casefold()


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(fold(text))


def _spans(text: str) -> list[tuple[str, int, int]]:
    """Tokens of `text` with their character spans in the original (folding keeps one char per char, mostly)."""
    out = []
    for m in re.finditer(r"[^\W_]+", str(text)):
        for t in _TOKEN.findall(fold(m.group(0))):
            out.append((t, m.start(), m.end()))
    # Several tokens of one folded word share its span; adjacent duplicates are merged later.
    return out


@functools.lru_cache(maxsize=4096)
def _vr(keyword: str) -> str:
    from pydicom.datadict import dictionary_VR, tag_for_keyword

    tag = tag_for_keyword(keyword)
    try:
        return str(dictionary_VR(tag)) if tag is not None else ""
    except KeyError:
        return ""


def name_forms(value: str) -> set[tuple[str, ...]]:
    """Token forms of a person name "Family^Given^Middle^Prefix^Suffix" (or "Family Given")."""
    first = value.split("=")[0]
    parts = [tokens(p) for p in (first.split("^") if "^" in first else first.split(None, 1))]
    family, given, middle = (parts + [[], [], []])[:3]
    forms: set[tuple[str, ...]] = set()
    if not family:
        return forms
    g, m = tuple(given), tuple(middle)
    fam = tuple(family)
    gi, mi = tuple(t[0] for t in given), tuple(t[0] for t in middle)
    for a in {g + m, g, gi + mi, gi, g + mi}:
        if a:
            forms |= {a + fam, fam + a}
    for comp in (fam, g, m):
        if comp and len("".join(comp)) >= 4:
            forms.add(comp)
    return forms


def date_forms(value: str) -> set[tuple[str, ...]]:
    """Token forms of a date YYYYMMDD (also the date part of a DT value)."""
    m = re.match(r"^(\d{4})(\d{2})(\d{2})", value.strip())
    if not m:
        return set()
    y, mo, d = m.groups()
    if not (1 <= int(mo) <= 12 and 1 <= int(d) <= 31):
        return set()
    yy, mon, month = y[2:], MONTHS[int(mo) - 1][:3], MONTHS[int(mo) - 1]
    du, mu = str(int(d)), str(int(mo))
    # Two-digit years only zero-padded (23.05.61): "3, 5, 61" is as likely a list of numbers.
    forms = {(y + mo + d,), (d + mo + y,), (mo + d + y,), (y, mo, d), (d, mo, y), (mo, d, y), (du, mu, y), (mu, du, y),
             (d, mo, yy), (mo, d, yy), (y, mu, du)}  # fmt: skip
    for name in {mon, month}:
        forms |= {(d, name, y), (du, name, y), (name, d, y), (name, du, y), (y, name, d), (d + name + y,), (du + name + y,)}
    return forms


def time_forms(value: str) -> set[tuple[str, ...]]:
    """HH:MM:SS of a time, as one run of digits only: three small numbers alone are as likely a box's coordinates."""
    m = re.match(r"^(\d{6})", value.strip())
    return {(m.group(1),)} if m else set()


def number_forms(value: str) -> set[tuple[str, ...]]:
    """Runs of 5 or more digits of a record number, as they are and without leading zeros."""
    out: set[tuple[str, ...]] = set()
    for run in re.findall(r"\d{5,}", value):
        out.add((run,))
        if len(run.lstrip("0")) >= 5:
            out.add((run.lstrip("0"),))
    return out


def forms_of(value: str, source: str) -> set[tuple[str, ...]]:
    """Every token form of one identifying value read from `source` (a keyword or a label column)."""
    vr = _vr(source) if source.isidentifier() else ""
    base = tuple(tokens(value))
    forms: set[tuple[str, ...]] = {base} if base else set()
    if len(base) > 1:
        forms.add(("".join(base),))
    if vr == "PN" or "^" in value or (not vr and "name" in source.lower()):
        forms |= name_forms(value)
    if vr in ("DA", "DT") or re.fullmatch(r"\d{8}", value.strip()) or re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
        forms |= date_forms(value.replace("-", ""))
    if vr == "TM":
        forms |= time_forms(value)
    forms |= number_forms(value)
    # Too short to mean anything alone: a lone token of fewer than 4 characters (or 5 digits).
    return {f for f in forms if len(f) > 1 or (len(f[0]) >= 4 and not (f[0].isdigit() and len(f[0]) < 5))}


@dataclass(frozen=True)
class Identities:
    """The normalised forms of a build's identifying values (form -> source keyword)."""

    forms: Mapping[tuple[str, ...], str]

    @classmethod
    def of(cls, values: Mapping[str, str]) -> Identities:
        """From `value -> source` (what the readers collected for the leak scan)."""
        out: dict[tuple[str, ...], str] = {}
        for value, source in sorted(values.items()):
            for f in forms_of(value, source):
                out.setdefault(f, source)
        return cls(out)

    @functools.cached_property
    def _by_first(self) -> dict[str, list[tuple[str, ...]]]:
        index: dict[str, list[tuple[str, ...]]] = {}
        for f in self.forms:
            index.setdefault(f[0], []).append(f)
        return index

    @functools.cached_property
    def _compact(self) -> list[tuple[str, str]]:
        # Run-together forms of 8 characters or more are also looked for inside longer
        # tokens ("t2zaphodbeeblebrox"); shorter ones only as whole tokens.
        return sorted({(f[0], s) for f, s in self.forms.items() if len(f) == 1 and len(f[0]) >= 8})

    @functools.cached_property
    def _inside(self) -> dict[str, list[str]]:
        return {}  # long token -> sources of the run-together forms inside it (memo)

    def _inside_of(self, t: str) -> list[str]:
        if t not in self._inside:
            if len(self._inside) > 100_000:
                self._inside.clear()
            self._inside[t] = [src for c, src in self._compact if len(t) > len(c) and c in t]
        return self._inside[t]

    def _matches(self, toks: list[str]) -> list[tuple[int, int, str]]:
        """(first token, last token + 1, source) of every form found in a token list."""
        hits = []
        for i, t in enumerate(toks):
            for f in self._by_first.get(t, ()):
                if tuple(toks[i : i + len(f)]) == f:
                    hits.append((i, i + len(f), self.forms[f]))
            if len(t) > 8:
                hits += [(i, i + 1, src) for src in self._inside_of(t)]
        return hits

    def find(self, text: str) -> list[str]:
        """The sources of the identifying forms that occur in `text`, sorted."""
        return sorted({src for _, _, src in self._matches([t for t, _, _ in _spans(text)])})

    def redact(self, text: str) -> tuple[str, int]:
        """`text` with every identifying form replaced by [redacted]; and how many were."""
        spans = _spans(text)
        hits = self._matches([t for t, _, _ in spans])
        if not hits:
            return text, 0
        cut = sorted((spans[a][1], spans[b - 1][2]) for a, b, _ in hits)
        merged: list[list[int]] = []
        for s, e in cut:
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        out, pos = [], 0
        for s, e in merged:
            out += [text[pos:s], REDACTED]
            pos = e
        out.append(text[pos:])
        return "".join(out), len(merged)


class Redactor:
    """Redacts free text with `Identities`, counting what it redacted where (for the manifest)."""

    def __init__(self, identities: Identities):
        self.identities = identities
        self.counts: dict[str, int] = {}

    def text(self, value: str, where: str) -> str:
        out, n = self.identities.redact(value)
        if n:
            self.counts[where] = self.counts.get(where, 0) + n
        return out

    def json(self, obj: Any, where: str) -> Any:
        """A copy of a JSON-like value (dicts, lists, tuples, strings) with every string redacted, keys too."""
        if isinstance(obj, str):
            return self.text(obj, where)
        if isinstance(obj, dict):
            return {self.json(k, where): self.json(v, where) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.json(v, where) for v in obj)
        return obj

    def counter(self, c: Mapping[CountKey, int], where: str) -> Counter[CountKey]:
        """A Counter (or dict) keyed by a reason or a (task, why) pair, keys redacted (counts merged)."""
        out: Counter[CountKey] = Counter()
        for k, n in c.items():
            out[self._key(k, where)] += n
        return out

    def _key(self, key: CountKey, where: str) -> CountKey:
        if isinstance(key, str):
            return self.text(key, where)
        return self.text(key[0], where), self.text(key[1], where)

    def drafts(self, drafts: list[Any], where: str = "item texts") -> list[Any]:
        """Drafts (production.Draft) with their texts redacted; a draft whose answer or an option
        holds an identifying form is dropped (options are vocabulary terms: a hit means a
        label carried someone's name), counted under "items dropped"."""
        kept = []
        for d in drafts:
            if any(self.identities.find(o) for o in (d.fact.answer, *d.fact.distractors)):
                self.counts["items dropped (an option held an identifying value)"] = self.counts.get("items dropped (an option held an identifying value)", 0) + 1
                continue
            d.fact = replace(d.fact, question=self.text(d.fact.question, where), derivation=self.text(d.fact.derivation, where),
                             extra=self.json(d.fact.extra, where))  # fmt: skip
            kept.append(d)
        return kept


def file_text(path: Path) -> str:
    """The text of an exported file for the normalised scan: an Arrow file's string columns
    (its image bytes are pixels, left to the OCR), any other file decoded as UTF-8."""
    if path.suffix == ".arrow":
        try:
            import pyarrow as pa

            with pa.memory_map(str(path)) as src:
                table = pa.ipc.open_stream(src).read_all()
            parts = []
            for col in table.columns:
                if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                    parts += [str(v) for v in col.to_pylist() if v is not None]
                elif pa.types.is_list(col.type) or pa.types.is_struct(col.type):
                    parts += [json.dumps(v, ensure_ascii=False, default=str) for v in col.to_pylist()
                              if not isinstance(v, dict) or "bytes" not in v]  # fmt: skip
            return "\n".join(parts)
        except Exception:  # noqa: BLE001 - not a stream we can read: fall back to its bytes
            pass
    return path.read_bytes().decode("utf-8", errors="ignore")


def find_in_texts(texts: Iterable[str], identities: Identities) -> list[str]:
    return sorted({s for t in texts for s in identities.find(t)})
