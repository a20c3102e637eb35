"""Region rules: known annotation zones blanked by modality, manufacturer and model.

The second line behind the OCR text detector (`textscreen`): what a console writes in a
fixed place (a radiograph's corners, an ultrasound header band) is blanked whether or
not the detector sees it. The table is YAML (`regions.yaml` beside this module is the
default and documents the format); a recipe names its own with `privacy.region_rules`,
or `none`. The manifest records the table (its name and digest) and, for every frame,
the zones blanked and the rules that asked for them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DEFAULT_TABLE = Path(__file__).with_name("regions.yaml")


class RegionRuleError(ValueError):
    """The region-rule table is wrong; the message names the file, the rule, the key and the fix."""


@dataclass(frozen=True, slots=True)
class RegionRule:
    modalities: tuple[str, ...]  # folded: "us", "cr", "x-ray"
    zones: tuple[tuple[float, float, float, float], ...]
    why: str
    manufacturer: str = ""  # folded substring; "" matches any
    model: str = ""

    def matches(self, modalities: set[str], manufacturer: str, model: str) -> bool:
        return (bool(modalities & set(self.modalities)) and self.manufacturer in manufacturer.casefold()
                and self.model in model.casefold())  # fmt: skip


@dataclass(frozen=True)
class RegionTable:
    name: str  # "default" or the file's name
    digest: str  # sha256 of the file's bytes ("" when rules are off)
    rules: tuple[RegionRule, ...]

    def zones_for(self, shape: tuple[int, ...], modalities: set[str], manufacturer: str = "", model: str = "") -> list[tuple[tuple[int, int, int, int], str]]:
        """(box in frame pixels, why) of every zone of every rule matching the frame."""
        h, w = shape[:2]
        mods = {m.casefold() for m in modalities if m}
        out = []
        for r in self.rules:
            if r.matches(mods, manufacturer, model):
                for x0, y0, x1, y1 in r.zones:
                    box = (int(np.floor(x0 * w)), int(np.floor(y0 * h)), int(np.ceil(x1 * w)), int(np.ceil(y1 * h)))
                    out.append(((box[0], box[1], min(w, max(box[2], box[0] + 1)), min(h, max(box[3], box[1] + 1))), r.why))
        return out

    def to_dict(self) -> dict[str, object]:
        return {"table": self.name, "sha256": self.digest, "rules": len(self.rules)}


NO_RULES = RegionTable("none", "", ())


def _strings(value: object) -> tuple[str, ...] | None:
    if isinstance(value, str) and value.strip():
        return (value.strip().casefold(),)
    if isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
        return tuple(v.strip().casefold() for v in value)
    return None


def load_table(path: Path | None = None) -> RegionTable:
    """The table at `path` (the default table when None), checked."""
    from medrcube.yamlconf import read_yaml_file

    p = DEFAULT_TABLE if path is None else Path(path)
    fix = "write the table as in src/medrcube/construction/privacy/regions.yaml"
    try:
        data = read_yaml_file(p, missing_fix="give an existing region-rule file, 'default' or 'none'")
    except Exception as exc:  # noqa: BLE001 - the reader's own message names the file and the problem
        raise RegionRuleError(f"{p}: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("rules"), list):
        raise RegionRuleError(f"{p}: expected 'version: 1' and a list 'rules'; {fix}")
    rules = []
    for i, raw in enumerate(data["rules"]):
        where = f"{p}: rules[{i}]"
        if not isinstance(raw, dict) or set(raw) - {"modality", "manufacturer", "model", "zones", "why"}:
            raise RegionRuleError(f"{where}: expected the keys modality, zones, why (and optionally manufacturer, model); {fix}")
        mods = _strings(raw.get("modality"))
        if mods is None:
            raise RegionRuleError(f"{where}: key 'modality' is {raw.get('modality')!r}; give a modality code (US, CR, MG) or a list of them")
        zones = raw.get("zones")
        if not isinstance(zones, list) or not zones:
            raise RegionRuleError(f"{where}: key 'zones' is {zones!r}; give a list of [x0, y0, x1, y1] fractions")
        boxes = []
        for z in zones:
            ok = isinstance(z, list) and len(z) == 4 and all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 for v in z)
            if not ok or not (z[0] < z[2] and z[1] < z[3]):
                raise RegionRuleError(f"{where}: zone {z!r} is not [x0, y0, x1, y1] with 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1; "
                                      "give fractions of the width and height")  # fmt: skip
            boxes.append((float(z[0]), float(z[1]), float(z[2]), float(z[3])))
        why = raw.get("why")
        if not isinstance(why, str) or not why.strip():
            raise RegionRuleError(f"{where}: key 'why' is {why!r}; say what the zone holds (it is written to the manifest)")
        man, model = raw.get("manufacturer", ""), raw.get("model", "")
        if not isinstance(man, str) or not isinstance(model, str):
            raise RegionRuleError(f"{where}: 'manufacturer' and 'model' must be text")
        rules.append(RegionRule(mods, tuple(boxes), why.strip(), man.strip().casefold(), model.strip().casefold()))
    name = "default" if path is None else p.name
    return RegionTable(name, hashlib.sha256(p.read_bytes()).hexdigest(), tuple(rules))
