"""Question templates per task, written to the NBME item-writing rules the paper follows.

Every template asks about the image shown (an item cannot be answered without it), has
one best answer among mutually exclusive options, names the modality and region only
where that does not give the answer away (never in a Modality or Organ Recognition
question), and avoids negatives and absolute words. A recipe may replace a template
(recipe key `templates`); its placeholders are checked against `FIELDS`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping

from medrcube.construction.stages import questions

# The placeholders each template may use (filled from the image's mapped axes and labels).
FIELDS: dict[str, tuple[str, ...]] = {
    "modality": (),
    "plane": ("image",),
    "projection": ("image",),
    "mr_protocol": (),
    "ct_protocol": (),
    "us_mode": (),
    "organ": (),
    "abnormality": ("image", "region"),
    "finding": ("image", "region"),
    "diagnosis": ("image", "region"),
    "severity": ("image", "region", "finding"),
    "roi_identify": ("image", "region"),
    "roi_locate": ("image", "region", "finding"),
}

DEFAULTS: dict[str, str] = {
    "modality": questions.Q_MODALITY,
    "plane": questions.Q_PLANE,
    "projection": questions.Q_PROJECTION,
    "mr_protocol": questions.Q_MRI_PROTOCOL,
    "ct_protocol": questions.Q_CT_PROTOCOL,
    "us_mode": questions.Q_US_MODE,
    "organ": questions.Q_REGION,
    "abnormality": "Does this {image} of the {region} show an abnormality?",
    "finding": "Which abnormality is shown on this {image} of the {region}?",
    "diagnosis": "Based on this {image} of the {region}, what is the most likely diagnosis?",
    "severity": "How severe is the {finding} shown on this {image} of the {region}?",
    "roi_identify": "What is the most likely finding inside the region outlined in red on this {image} of the {region}?",
    "roi_locate": (
        "This {image} of the {region} shows {finding}. In which quadrant of the image, as displayed, does it lie?"
    ),
}

# How an item names the image it shows, by modality (never the answer of a modality item:
# the modality template has no placeholder).
IMAGE_PHRASE: dict[str, str] = {"CT": "CT image", "MRI": "MR image", "X-Ray": "radiograph", "US": "ultrasound image"}


class TemplateError(ValueError):
    """A template override uses an unknown template name or placeholder."""


def placeholders(template: str) -> tuple[str, ...]:
    return tuple(name for _, name, _, _ in string.Formatter().parse(template) if name)


def check_templates(overrides: Mapping[str, str], where: str) -> dict[str, str]:
    """The default templates with `overrides` applied, each checked for its placeholders."""
    from medrcube.taxonomy import did_you_mean

    out = dict(DEFAULTS)
    for name, text in overrides.items():
        if name not in FIELDS:
            raise TemplateError(f"{where}: unknown template {name!r}{did_you_mean(name, list(FIELDS))}; templates: {', '.join(FIELDS)}")
        if not isinstance(text, str) or not text.strip():
            raise TemplateError(f"{where}: template {name!r} is {text!r}; expected a non-empty question text")
        try:
            used = placeholders(text)
        except ValueError as exc:
            raise TemplateError(f"{where}: template {name!r} is not a valid format string ({exc}); write placeholders as {{image}}") from None
        bad = [p for p in used if p not in FIELDS[name]]
        if bad:
            allowed = ", ".join("{" + f + "}" for f in FIELDS[name]) or "none"
            raise TemplateError(f"{where}: template {name!r} uses {', '.join('{' + b + '}' for b in bad)}; allowed placeholders: {allowed}")
        out[name] = " ".join(text.split())
    return out


def image_phrase(modality: str) -> str:
    return IMAGE_PHRASE.get(modality, "image")


def region_phrase(part: str) -> str:
    """'the chest', 'the brain': the region as a noun phrase ('Lower Limb' -> 'lower limb')."""
    return part.lower()


def with_article(name: str) -> str:
    """'a pleural effusion', 'an osteosarcoma' (lower-cased unless an abbreviation)."""
    text = name if name[:2].isupper() else name[0].lower() + name[1:]
    return ("an " if text[0].lower() in "aeiou" else "a ") + text


# The placeholders a question may be asked to leave out (`render(neutral=...)`): the
# image's other items would otherwise read their answer in it (a sibling leak).
NEUTRAL_FIELDS = ("image", "region", "finding")


def neutral_text(template: str, neutral: frozenset[str]) -> str:
    """The template with the placeholders in `neutral` phrased so that they name nothing:
    "of the {region}" dropped (any other {region} becomes "region shown"), {image} "image",
    {finding} "abnormality"."""
    text = template
    if "region" in neutral:
        text = re.sub(r"\s*\bof (?:the )?\{region\}", "", text).replace("{region}", "region shown")
    if "image" in neutral:
        text = text.replace("{image}", "image")
    if "finding" in neutral:
        text = text.replace("{finding}", "\x00")
    return " ".join(text.split())


def render(templates: Mapping[str, str], name: str, *, modality: str, part: str, finding: str | None = None,
           neutral: frozenset[str] = frozenset()) -> str:  # fmt: skip
    """The question text of template `name` for an image of `modality` and `part`; the
    placeholders in `neutral` (of NEUTRAL_FIELDS) name nothing (`neutral_text`)."""
    fields = {"image": image_phrase(modality), "region": region_phrase(part)}
    if finding is not None:
        fields["finding"] = with_article(finding) if name == "roi_locate" else (finding if finding[:2].isupper() else finding[0].lower() + finding[1:])
    elif "finding" in placeholders(templates[name]):
        fields["finding"] = "abnormality"
    text = neutral_text(templates[name], neutral).format(**fields)
    return text.replace("\x00", "an abnormality" if name == "roi_locate" else "abnormality")
