"""The evidence rules of Stage I: how a DICOM tag is quoted in a derivation, and how an
imaging protocol is read from sequence parameters and from sequence and protocol names.

The rules are pure functions of the metadata; the mapper (mapping.py) combines their
results with the ontology (`combine`) and records what they could not decide.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from medrcube.construction.stages.ontology import Ontology
from medrcube.construction.stages.vocabulary import Vocabulary

# -- quoting the metadata ------------------------------------------------------------------


def tag_name(keyword: str) -> str:
    from pydicom.datadict import tag_for_keyword

    tag = tag_for_keyword(keyword)
    return f"{keyword} ({tag >> 16:04X},{tag & 0xFFFF:04X})" if tag is not None else keyword


def quote_tag(keyword: str, value: Any) -> str:
    shown = "[" + ", ".join(repr(str(v)) for v in value) + "]" if isinstance(value, (list, tuple)) else repr(str(value))
    return f"{tag_name(keyword)} = {shown}"


def listify(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip().upper() for v in value]
    return [v.strip().upper() for v in str(value).split("\\") if v.strip()]


def number(value: Any) -> float | None:
    try:
        v = value[0] if isinstance(value, (list, tuple)) else value
        return float(v)
    except (TypeError, ValueError, IndexError):
        return None


def words(text: str) -> list[str]:
    return [t for t in re.split(r"[^0-9a-z]+", str(text).lower()) if t]


# -- protocol rules ------------------------------------------------------------------------


def mr_protocol_from_parameters(meta: Mapping[str, Any]) -> tuple[str | None, str]:
    """MRI weighting from sequence parameters, or (None, why not).

    Rules (documented in the build README): a diffusion b-value above 0 (or ImageType
    DIFFUSION/TRACEW) is DWI; an inversion-recovery sequence with TI >= 1500 ms and
    TE >= 70 ms is FLAIR, with TI 80-250 ms STIR; a spin-echo sequence with TR <= 800 ms
    and TE <= 30 ms is T1-weighted, TR >= 2000 ms and TE >= 70 ms T2-weighted, TR >= 2000
    ms and TE <= 40 ms proton-density-weighted. Gradient echoes and intermediate
    parameters are left undecided (their contrast depends on the flip angle).
    """
    image_type = listify(meta.get("ImageType"))
    b = number(meta.get("DiffusionBValue"))
    if (b is not None and b > 0) or "DIFFUSION" in image_type or "TRACEW" in image_type:
        why = quote_tag("DiffusionBValue", meta["DiffusionBValue"]) if b is not None and b > 0 else quote_tag("ImageType", meta.get("ImageType"))
        return "dwi", f"{why}: a diffusion-weighted image"
    seq = listify(meta.get("ScanningSequence"))
    tr, te, ti = number(meta.get("RepetitionTime")), number(meta.get("EchoTime")), number(meta.get("InversionTime"))
    if "IR" in seq and ti is not None:
        if ti >= 1500 and te is not None and te >= 70:
            return "flair", f"{quote_tag('ScanningSequence', meta['ScanningSequence'])}, InversionTime {ti:g} ms and EchoTime {te:g} ms: fluid-attenuated inversion recovery"
        if 80 <= ti <= 250:
            return "stir", f"{quote_tag('ScanningSequence', meta['ScanningSequence'])} and InversionTime {ti:g} ms: short-tau inversion recovery"
        return None, f"inversion recovery with TI {ti:g} ms matches no rule"
    if "SE" in seq and tr is not None and te is not None:
        where = f"{quote_tag('ScanningSequence', meta['ScanningSequence'])}, RepetitionTime {tr:g} ms and EchoTime {te:g} ms"
        if tr <= 800 and te <= 30:
            return "t1w", f"{where} (short TR and TE: T1 weighting)"
        if tr >= 2000 and te >= 70:
            return "t2w", f"{where} (long TR and TE: T2 weighting)"
        if tr >= 2000 and te <= 40:
            return "pdw", f"{where} (long TR, short TE: proton-density weighting)"
        return None, f"spin echo with TR {tr:g} ms and TE {te:g} ms is intermediate"
    return None, "no diffusion, inversion-recovery or spin-echo parameters"


def protocol_from_names(texts: Sequence[tuple[str, str]], vocab: Vocabulary) -> tuple[set[str], str]:
    """Protocol concepts named by the words of sequence and protocol names.

    `texts` holds (text, where read) pairs; returns the concepts and, per text that named
    one, where and the terms: never the free text itself (it can carry anyone's name)."""
    found: set[str] = set()
    quoted = []
    for text, where in texts:
        terms = sorted({t for t in words(text) if t in vocab.protocol_terms})
        hits = {vocab.protocol_terms[t] for t in terms}
        m = re.search(r"ep_b(\d+)", str(text).lower())
        if m and int(m.group(1)) > 0:
            hits.add("dwi")
            terms.append(m.group(0))
        if hits:
            found |= hits
            quoted.append(f"{where} names {', '.join(repr(t) for t in terms)}")
    return found, ", ".join(quoted)


def combine(onto: Ontology, a: str | None, b: set[str]) -> tuple[str | None, str]:
    """One concept from a rule result and name hits, or (None, the conflict)."""
    cands = ({a} if a else set()) | b
    if not cands:
        return None, ""
    # Keep the most specific of concepts related by is-a (T1 and T1 contrast-enhanced).
    specific = {c for c in cands if not any(o != c and c in onto.ancestors(o) for o in cands)}
    if len(specific) == 1:
        return specific.pop(), ""
    return None, f"conflicting evidence: {', '.join(sorted(specific))}"
