"""Properties of the loaders and the fingerprint (hypothesis).

- items -> JSON Lines -> items and items -> HF dataset -> items are identities;
- the fingerprint changes when and only when content changes (an item field, the option
  order, an image byte), and is the same for the same content in every format.
"""

from __future__ import annotations

import io
import json
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from PIL import Image

from medrcube import taxonomy
from medrcube.cube import Item, cube_fingerprint, load_cube, to_hf_dataset, write_jsonl
from medrcube.cube.content import decode_content
from medrcube.cube.hf import IMAGE_COLUMN, load_dataset_object
from medrcube.cube.images import sha256

N_IMAGES = 4


def _png(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (6, 5), dtype=np.uint8), mode="L").save(buf, format="PNG")
    return buf.getvalue()


IMAGES = {f"img/{k}.png": _png(k) for k in range(N_IMAGES)}
DIGESTS = {k: sha256(v) for k, v in IMAGES.items()}
# what the fingerprint keys an image by: its decoded pixels (cube/content.py)
CONTENT = {k: decode_content(v).key for k, v in IMAGES.items()}

# Text that loaders keep as written (no surrogates; required fields non-blank).
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
nonblank = text.filter(lambda s: s.strip() != "")
json_scalar = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False, allow_infinity=False) | text
json_value = st.recursive(json_scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3), max_leaves=6)
axis = lambda known: st.sampled_from(known) | st.sampled_from(("Site Axis", "Other Value"))  # noqa: E731


@st.composite
def items_strategy(draw, min_size: int = 1, max_size: int = 6) -> list[Item]:
    ids = draw(st.lists(nonblank, min_size=min_size, max_size=max_size, unique=True))
    out = []
    for id_ in ids:
        options = draw(st.lists(nonblank, min_size=2, max_size=6, unique=True))
        image = draw(st.sampled_from([None, *IMAGES]))
        out.append(
            Item(
                id=id_,
                dataset=draw(nonblank),
                image=image,
                question=draw(nonblank),
                options=tuple(options),
                answer=draw(st.integers(0, len(options) - 1)),
                task=draw(axis(taxonomy.TASK_NAMES)),
                modality=draw(axis(taxonomy.MODALITIES)),
                part=draw(axis(taxonomy.PARTS)),
                original_task=draw(text),
                restricted=True if image is None else draw(st.booleans()),
                # `attributes` is the key the loaders carry an item's subgroup attributes in
                # (cube/attributes.py reads it), not free metadata: left out here.
                meta=draw(st.dictionaries(text.filter(lambda k: k != "attributes"), json_value, max_size=3)),
            )
        )
    return out


def _write_images(root: Path) -> None:
    for key, data in IMAGES.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(items_strategy())
def test_items_jsonl_items_is_identity(items):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write_images(root)
        write_jsonl(items, root / "cube.jsonl")
        cube = load_cube(root / "cube.jsonl")
    assert list(cube.items) == items
    assert cube.skipped == ()
    assert cube.fingerprint == cube_fingerprint(items, CONTENT)


@SETTINGS
@given(items_strategy())
def test_items_hf_dataset_items_is_identity(items):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write_images(root)
        write_jsonl(items, root / "cube.jsonl")
        cube = load_cube(root / "cube.jsonl")
        ds = to_hf_dataset(cube)
    again = load_dataset_object(ds, source="memory")
    assert list(again.items) == items
    assert again.fingerprint == cube.fingerprint
    assert {k: again.read_image(k) for k in again.digests} == {k: IMAGES[k] for k in again.digests}


# --- the fingerprint: changes when and only when content changes ------------------------


def _mutations(draw, items: list[Item]) -> tuple[list[Item], dict[str, str], bool]:
    """A content-preserving or content-changing edit of (items, digests); returns whether
    the content changed, decided independently of the fingerprint code."""
    kind = draw(st.sampled_from(["reorder", "field", "option_order", "image_byte", "image_key"]))
    items = list(items)
    digests = dict(DIGESTS)
    k = draw(st.integers(0, len(items) - 1))
    it = items[k]
    if kind == "reorder":
        return draw(st.permutations(items)), digests, False
    if kind == "image_key":
        # The same bytes under another name: same content.
        if it.image is None:
            return items, digests, False
        digests["renamed.png"] = digests[it.image]
        items[k] = replace(it, image="renamed.png")
        return items, digests, False
    if kind == "image_byte":
        assume(it.image is not None)
        data = bytearray(IMAGES[it.image])
        data[draw(st.integers(0, len(data) - 1))] ^= 1 << draw(st.integers(0, 7))
        digests = {key: (sha256(bytes(data)) if key == it.image else d) for key, d in digests.items()}
        return items, digests, True
    if kind == "option_order":
        assume(len(set(it.options)) == len(it.options))
        perm = draw(st.permutations(range(len(it.options))))
        options = tuple(it.options[i] for i in perm)
        items[k] = replace(it, options=options, answer=options.index(it.answer_text))
        return items, digests, options != it.options
    name = draw(st.sampled_from(["id", "dataset", "question", "task", "modality", "part", "original_task", "restricted", "meta", "answer"]))
    if name == "restricted":
        new = not it.restricted
    elif name == "meta":
        new = {**it.meta, "changed": draw(json_value)}
    elif name == "answer":
        new = draw(st.integers(0, len(it.options) - 1))
    else:
        new = draw(nonblank)
    if name == "id":
        assume(all(o.id != new for o in items))
    items[k] = replace(it, **{name: new})
    return items, digests, items[k] != it


@SETTINGS
@given(st.data())
def test_fingerprint_changes_iff_content_changes(data):
    items = data.draw(items_strategy())
    before = cube_fingerprint(items, DIGESTS)
    mutated, digests, changed = _mutations(data.draw, items)
    assert (cube_fingerprint(mutated, digests) != before) == changed


@SETTINGS
@given(items_strategy())
def test_fingerprint_is_the_same_in_every_format(items):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write_images(root)
        write_jsonl(items, root / "cube.jsonl")
        from_jsonl = load_cube(root / "cube.jsonl")
        ds = to_hf_dataset(from_jsonl)
        ds.to_parquet(str(root / "cube.parquet"))
        from_parquet = load_cube(root / "cube.parquet")
        # The release layout: one test.json for everything, images beside it (image_path
        # is then relative to the test.json folder, as the key is to the root).

        rows = ds.remove_columns(IMAGE_COLUMN).to_list()
        for row in rows:
            row["meta"] = json.loads(row["meta"])  # a JSON object in test.json, JSON text in a table
        (root / "release").mkdir()
        _write_images(root / "release")
        (root / "release" / "test.json").write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
        from_release = load_cube(root / "release")
    assert from_jsonl.fingerprint == from_parquet.fingerprint == from_release.fingerprint == load_dataset_object(ds, source="m").fingerprint
    assert list(from_release.items) == items
