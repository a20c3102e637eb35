"""The reviewer's sheet of a build, and the record of a person's decision.

No detector is perfect, so every build writes `review/sheet.html` beside its export: a
random sample (seeded by the recipe) of the exported frames, enlarged to be read, each
with its masked regions outlined (red: OCR text regions, blue: region rules). A person
looks at every frame for anything identifying the masks missed and records a decision:

    medrcube build --record-review build/site --decision approved --reviewed-by "J. Doe" --frames 30 --leaks 0

which writes `review/decision.json` and the `review` section of every copy of the
de-identification manifest. Until then the manifest says `"status": "not reviewed"`, and
`medrcube cube stats` says so. How many frames to look at: zero leaks in n frames bounds
the leak rate below 1 - 0.05^(1/n), about 3/n, with 95% confidence (docs/construction.md).
"""

from __future__ import annotations

import datetime as dt
import html
import json
import random
from pathlib import Path
from typing import Any

REVIEW_DIR = "review"
SHEET = "sheet.html"
DECISION = "decision.json"
DISPLAY_SIDE = 1024  # frames are shown at least this wide (or their own size, when larger), to be read
DECISIONS = ("approved", "rejected")


def upper_bound_95(frames: int, leaks: int = 0) -> float | None:
    """The one-sided 95% upper bound of the leak rate after `leaks` leaks in `frames` frames
    (Clopper-Pearson; with no leak 1 - 0.05^(1/n), the "rule of three" 3/n)."""
    if frames <= 0:
        return None
    if leaks >= frames:
        return 1.0
    from scipy.stats import beta

    return float(beta.ppf(0.95, leaks + 1, frames - leaks))


def not_reviewed(sheet: str, sample: int, exported: int) -> dict[str, Any]:
    """The manifest's review section of a build no person has reviewed yet."""
    return {"status": "not reviewed", "sheet": sheet, "frames_in_sheet": sample, "frames_exported": exported,
            "record": "medrcube build --record-review OUT --decision approved|rejected --reviewed-by NAME --frames N --leaks K"}  # fmt: skip


def _outlined(png: Path, boxes: list[tuple[list[int], str]], scale: float) -> Any:
    from PIL import Image, ImageDraw

    with Image.open(png) as im:
        img = im.convert("RGB")
    f = max(1.0, DISPLAY_SIDE / max(img.size))
    big = img.resize((round(img.width * f), round(img.height * f)), Image.Resampling.NEAREST)
    draw = ImageDraw.Draw(big)
    for (x0, y0, x1, y1), colour in boxes:
        k = scale * f
        draw.rectangle((x0 * k, y0 * k, x1 * k - 1, y1 * k - 1), outline=colour, width=max(2, round(f)))
    return big


def write_sheet(out: Path, release: Path, frames: list[dict[str, Any]], seed: str, sample: int) -> dict[str, Any]:
    """Write review/sheet.html (and its images) for the exported frames of the text log; the manifest's review section."""
    exported = [f for f in frames if f.get("exported") and f.get("image")]
    rng = random.Random(f"{seed}:review-sheet")
    chosen = sorted(rng.sample(range(len(exported)), min(sample, len(exported))))
    folder = out / REVIEW_DIR
    (folder / "frames").mkdir(parents=True, exist_ok=True)
    rows = []
    for n, i in enumerate(chosen, start=1):
        f = exported[i]
        png = release / f["dataset"] / f["image"]
        if not png.is_file():
            continue
        from PIL import Image

        with Image.open(png) as im:
            width = im.width
        scale = width / max(1, int(f["frame"][0]))
        boxes = [(b, "red") for b in f.get("regions", [])] + [(b, "blue") for b in f.get("rule_zones", [])]
        name = f"frames/{n:03d}.png"
        _outlined(png, boxes, scale).save(folder / name)
        rows.append(f'<figure><img src="{name}" alt="frame {n}"><figcaption>{n}. {html.escape(f["dataset"])}/{html.escape(f["image"])}: '
                    f'{len(f.get("regions", []))} OCR region(s), {len(f.get("rule_zones", []))} rule zone(s)</figcaption></figure>')  # fmt: skip
    bound = upper_bound_95(len(rows))
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>De-identification review sheet</title>"
        "<style>body{font-family:sans-serif;margin:2em;max-width:1100px}figure{margin:2em 0}img{max-width:100%;"
        "image-rendering:pixelated;border:1px solid #888}</style></head><body>"
        "<h1>De-identification review sheet</h1>"
        f"<p>{len(rows)} of {len(exported)} exported frames, drawn at random. Red: text regions the OCR found and masked; "
        "blue: zones blanked by the region rules. Look at every frame for any name, number, date or other identifying text "
        "left readable, then record the decision:</p>"
        "<pre>medrcube build --record-review OUT --decision approved|rejected --reviewed-by NAME "
        f"--frames {len(rows)} --leaks K</pre>"
        + (f"<p>No leak in these {len(rows)} frames bounds the leak rate below {100 * bound:.1f}% with 95% confidence "
           "(about 3/n; docs/construction.md says how many frames a stated confidence needs).</p>" if bound is not None else "")
        + "".join(rows) + "</body></html>\n"
    )  # fmt: skip
    (folder / SHEET).write_text(page, encoding="utf-8")
    return not_reviewed(f"{REVIEW_DIR}/{SHEET}", len(rows), len(exported))


class ReviewRecordError(ValueError):
    """The review cannot be recorded; the message names the folder, the value and the fix."""


def record(out: Path, decision: str, reviewer: str, frames: int, leaks: int, note: str = "") -> dict[str, Any]:
    """Record a person's decision on a build in `out`: review/decision.json and every manifest's review section."""
    from medrcube.construction.privacy.safeguards import MANIFEST_NAME

    if decision not in DECISIONS:
        raise ReviewRecordError(f"--decision is {decision!r}; choose one of {', '.join(DECISIONS)}")
    if not reviewer.strip():
        raise ReviewRecordError("--reviewed-by is empty; name the person who looked at the sheet (initials will do)")
    if frames < 1 or leaks < 0 or leaks > frames:
        raise ReviewRecordError(f"--frames {frames} --leaks {leaks}: need frames >= 1 and 0 <= leaks <= frames")
    sheet = out / REVIEW_DIR / SHEET
    manifests = sorted(p for p in out.rglob(MANIFEST_NAME) if REVIEW_DIR not in p.relative_to(out).parts)
    if not sheet.is_file() or not manifests:
        raise ReviewRecordError(f"{out}: no {REVIEW_DIR}/{SHEET} or no {MANIFEST_NAME} below it; give the output directory of `medrcube build`")
    if leaks and decision == "approved":
        raise ReviewRecordError(f"--leaks {leaks} with --decision approved: a build whose sheet shows a leak is rejected; fix the "
                                "recipe (privacy.text: refuse, or a region rule) and build again")  # fmt: skip
    bound = upper_bound_95(frames, leaks)
    section = {"status": decision, "reviewer": reviewer.strip(), "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "frames_reviewed": frames, "leaks_found": leaks, "leak_rate_upper_95": round(bound, 4) if bound is not None else None,
               "sheet": f"{REVIEW_DIR}/{SHEET}", "note": note}  # fmt: skip
    (out / REVIEW_DIR / DECISION).write_text(json.dumps(section, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for m in manifests:
        data = json.loads(m.read_text(encoding="utf-8"))
        data["review"] = {**data.get("review", {}), **section}
        m.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return section


def review_line(cube_dir: Path) -> str | None:
    """What `medrcube cube stats` says about the review of a built cube (None when the folder holds no manifest)."""
    from medrcube.construction.privacy.safeguards import MANIFEST_NAME

    p = cube_dir / MANIFEST_NAME
    if not p.is_file():
        return None
    review = json.loads(p.read_text(encoding="utf-8")).get("review") or {"status": "not reviewed"}
    if review.get("status") not in DECISIONS:
        return "de-identification review: NOT RECORDED (no person has reviewed the build's review sheet; see docs/construction.md)"
    bound = review.get("leak_rate_upper_95")
    return (f"de-identification review: {review['status']} by {review.get('reviewer', '?')} on {review.get('date', '?')}: "
            f"{review.get('leaks_found')} leak(s) in {review.get('frames_reviewed')} frame(s)"
            + (f", leak rate below {100 * bound:.1f}% (95%)" if bound is not None else ""))  # fmt: skip

