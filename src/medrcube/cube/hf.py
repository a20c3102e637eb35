"""Hugging Face `datasets` cubes: a hub name, a `save_to_disk` directory, parquet files.

The table has the release columns (id, dataset, question, option_A.., gt_answer,
correct_index, task, modality, parts, original_task, restricted, optionally image_path and
meta) plus an `image` column (an Image feature, None for restricted rows). Rows are checked
like release records (cube/records.py). Images are read from the Arrow storage of the
column (a struct of encoded bytes and a path): never decoded, hashed once at load in small
batches, and re-read lazily by `Cube.read_image`, so a cube never holds its images.

An image key is the row's `image_path` when it has one (so a cube exported with
`to_hf_dataset` comes back with the same keys), else `<dataset>/<sha256 prefix>.<ext>`, so
that rows holding the same image share a key (chains); a key is never used as a path.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from medrcube.cube.assemble import ImageOutcome, build_items, drop_duplicate_ids, finish
from medrcube.cube.images import DEFAULT_MAX_PIXELS, check_image_bytes
from medrcube.cube.item import LETTERS, Cube, CubeError, ImageReader
from medrcube.cube.problems import Collector
from medrcube.cube.records import Draft, parse_release_record

if TYPE_CHECKING:
    import datasets
    import pyarrow as pa

IMAGE_COLUMN = "image"
# Reads (bytes, path) of `n` rows from `start` of the image column (None, None for an absent image).
RowReader = Callable[[int, int], list[tuple[bytes | None, str | None]]]
HUB_TIMEOUT_S = 3.0
_BATCH = 64

LOCAL_COPY_HINT = (
    "point medrcube at a local copy instead: a directory written by Dataset.save_to_disk, "
    "parquet file(s) (a path or a glob such as 'data/*.parquet'), or a release-layout directory "
    "(<dataset>/test.json, e.g. from `huggingface-cli download NAME --repo-type dataset --local-dir DIR` "
    "on a machine with network)"
)


# ---------------------------------------------------------------------------------------
# Sources


def _offline() -> bool:
    flag = os.environ.get("HF_HUB_OFFLINE", os.environ.get("HF_DATASETS_OFFLINE", ""))
    return flag.strip().upper() in {"1", "ON", "YES", "TRUE"}


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "").rstrip("/") or "https://huggingface.co"


def hub_reachable(endpoint: str, timeout: float = HUB_TIMEOUT_S) -> bool:
    """Whether a TCP connection to the hub opens within `timeout` seconds (DNS included).

    Run in a thread with a join timeout because name resolution has no timeout of its own;
    without this probe `datasets` retries for minutes before it gives up.
    """
    url = urlparse(endpoint)
    host, port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
    if not host:
        return False
    result: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            result.append(True)
        except OSError:
            result.append(False)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 0.5)
    return bool(result and result[0])


def load_hub(name: str, *, strict: bool = False, max_pixels: int = DEFAULT_MAX_PIXELS, split: str = "test") -> Cube:
    """`hf:NAME`: the hub dataset's `test` split; fails within seconds when the hub is unreachable."""
    source = f"hf:{name}"
    if not name or name.startswith(("/", ".")) or os.path.exists(name):
        raise CubeError(f"{source}: 'hf:' takes a hub dataset name such as 'Flmc/MedRCube'; for a local copy pass its path without 'hf:'")
    endpoint = _endpoint()
    if _offline():
        why = "the hub is unreachable: HF_HUB_OFFLINE is set"
    elif not hub_reachable(endpoint):
        why = f"the hub is unreachable: cannot connect to {endpoint} (gave up after at most {HUB_TIMEOUT_S:.0f} s)"
    else:
        why = ""
    if why and not _offline():
        raise CubeError(f"{source}: {why}; {LOCAL_COPY_HINT}")
    import datasets

    try:
        ds = datasets.load_dataset(name, split=split)
    except Exception as exc:  # noqa: BLE001 - datasets raises many types; all mean "not loadable"
        prefix = f"{why} and no cached copy was found" if why else "cannot load it from the hub"
        raise CubeError(f"{source}: {prefix} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); {LOCAL_COPY_HINT}") from exc
    return load_dataset_object(ds, source=source, strict=strict, max_pixels=max_pixels, paths_trusted=True)


def load_disk(path: str | os.PathLike[str], *, strict: bool = False, max_pixels: int = DEFAULT_MAX_PIXELS, split: str = "test") -> Cube:
    """A directory written by `Dataset.save_to_disk` (or a DatasetDict's, split `test`)."""
    import datasets

    shown = os.fspath(path)
    try:
        ds = datasets.load_from_disk(shown)
    except Exception as exc:  # noqa: BLE001
        raise CubeError(f"{shown}: cannot read as a save_to_disk dataset ({type(exc).__name__}: {exc})") from exc
    if isinstance(ds, datasets.DatasetDict):
        if split in ds:
            ds = ds[split]
        elif len(ds) == 1:
            ds = next(iter(ds.values()))
        else:
            raise CubeError(f"{shown}: a DatasetDict without a {split!r} split (has {', '.join(ds)}); expected a {split!r} split")
    return load_dataset_object(ds, source=shown, strict=strict, max_pixels=max_pixels)


def load_parquet(files: Sequence[str], *, source: str, strict: bool = False, max_pixels: int = DEFAULT_MAX_PIXELS) -> Cube:
    """Parquet file(s) with the release columns and an `image` column, read with pyarrow
    (memory-mapped: no copy into the datasets cache)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not files:
        raise CubeError(f"{source}: no parquet file matches; expected one or more .parquet files")
    try:
        tables = [pq.read_table(f, memory_map=True) for f in files]
        table = pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]
    except Exception as exc:  # noqa: BLE001 - a corrupt file raises ArrowInvalid, OSError...
        raise CubeError(f"{source}: cannot read as parquet ({type(exc).__name__}: {exc}); expected parquet files with the release columns") from exc
    return load_table(table, source=source, strict=strict, max_pixels=max_pixels)


def load_dataset_object(ds: datasets.Dataset, *, source: str, strict: bool = False, max_pixels: int = DEFAULT_MAX_PIXELS, paths_trusted: bool = False) -> Cube:
    """A `datasets.Dataset` in memory (built by a test, or loaded by the caller)."""
    if ds._indices is not None:  # a select()/shuffle() view: materialise the row order
        ds = ds.flatten_indices()
    return load_table(ds.data.table, source=source, strict=strict, max_pixels=max_pixels, paths_trusted=paths_trusted)


# ---------------------------------------------------------------------------------------
# The table -> Cube


def _image_column(table: pa.Table, source: str) -> RowReader:
    """A reader of (bytes, path) for a range of rows, whatever the column's Arrow type."""
    import pyarrow as pa

    if IMAGE_COLUMN not in table.column_names:
        raise CubeError(
            f"{source}: no {IMAGE_COLUMN!r} column (columns: {', '.join(table.column_names)}); "
            "expected an Image feature holding each item's encoded image (None for restricted rows)"
        )
    col = table.column(IMAGE_COLUMN)
    if pa.types.is_struct(col.type) and col.type.get_field_index("bytes") >= 0:
        has_path = col.type.get_field_index("path") >= 0

        def rows(start: int, n: int) -> list[tuple[bytes | None, str | None]]:
            part = col.slice(start, n).combine_chunks()
            data = part.field("bytes").to_pylist()
            paths = part.field("path").to_pylist() if has_path else [None] * len(data)
            valid = part.is_valid().to_pylist()
            return [(d, p) if v else (None, None) for d, p, v in zip(data, paths, valid, strict=True)]

        return rows
    if pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type):
        return lambda start, n: [(d, None) for d in col.slice(start, n).to_pylist()]
    raise CubeError(f"{source}: column {IMAGE_COLUMN!r} has Arrow type {col.type}; expected an Image feature (struct of bytes and path) or binary")


def load_table(table: pa.Table, *, source: str, strict: bool = False, max_pixels: int = DEFAULT_MAX_PIXELS, paths_trusted: bool = False) -> Cube:
    """Check every row and image of an Arrow table with the release columns."""
    read_rows = _image_column(table, source)
    col = Collector(strict=strict)
    records = table.drop_columns([IMAGE_COLUMN]).to_pylist()
    drafts: list[Draft] = []
    row_of: dict[int, int] = {}  # id(draft) -> row
    for row, rec in enumerate(records):
        d = parse_release_record(
            rec, source=source, where=f"row {row}", default_dataset="", col=col, extra_keys=frozenset({IMAGE_COLUMN}), from_table=True
        )
        if d is not None:
            drafts.append(d)
            row_of[id(d)] = row
    drafts = drop_duplicate_ids(drafts, col)
    wanted = {row_of[id(d)]: d for d in drafts}

    outcomes: dict[int, ImageOutcome] = {}
    digests: dict[str, str] = {}
    key_row: dict[str, int] = {}
    for start in range(0, table.num_rows, _BATCH):
        for offset, (data, path) in enumerate(read_rows(start, _BATCH)):
            row = start + offset
            d = wanted.get(row)
            if d is None:
                continue
            if data is None and path and paths_trusted:
                # Hub datasets may reference files that `datasets` itself downloaded.
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError as exc:
                    outcomes[row] = ImageOutcome(reason="image_unreadable", message=f"cannot read {path!r} ({exc}); expected the image bytes", field=IMAGE_COLUMN)
                    continue
            elif data is None and path:
                outcomes[row] = ImageOutcome(
                    reason="image_not_embedded",
                    message=f"the image is a reference to {path!r}, not embedded bytes; expected the encoded image in the column "
                    "(export with Dataset.save_to_disk / to_parquet after cast_column('image', Image()) on loaded files)",
                    field=IMAGE_COLUMN,
                )
                continue
            if data is None:
                outcomes[row] = ImageOutcome(absent=True, message=f"{IMAGE_COLUMN} is None", field=IMAGE_COLUMN)
                continue
            check = check_image_bytes(data, max_pixels=max_pixels)
            if check.reason is not None:
                outcomes[row] = ImageOutcome(reason=check.reason, message=f"{IMAGE_COLUMN}: {check.message}", field=IMAGE_COLUMN)
                continue
            key = _key_for(d, check.digest, check.format, digests)
            digests[key] = check.digest
            key_row.setdefault(key, row)
            outcomes[row] = ImageOutcome(key=key, field=IMAGE_COLUMN)

    ordered = [outcomes[row_of[id(d)]] for d in drafts]
    items = build_items(drafts, ordered, col)
    return finish(items, col, source=source, reader=_reader(table, read_rows, key_row, paths_trusted), digests=digests, root=None)


_EXT = {"JPEG": "jpg", "JPEG2000": "jp2", "TIFF": "tif"}


def _key_for(d: Draft, digest: str, fmt: str | None, digests: Mapping[str, str]) -> str:
    """The row's image_path when it names these bytes unambiguously, else a name made of
    the dataset and the content (`<dataset>/<sha256 prefix>.<ext>`): stable per row, and
    the rows of one image (a chain stored once per row) share it, as files share a path."""
    candidates = []
    if d.image_ref:
        candidates.append(d.image_ref.replace("\\", "/"))
    ext = _EXT.get(fmt or "", (fmt or "img").lower())
    name = f"{digest[:20]}.{ext}"
    candidates.append(f"{d.fields['dataset']}/{name}" if d.fields["dataset"] else name)
    for key in candidates:
        if digests.get(key, digest) == digest:
            return key
    n = 2
    while f"{candidates[-1]}#{n}" in digests:
        n += 1
    return f"{candidates[-1]}#{n}"


def _reader(table: pa.Table, read_rows: RowReader, key_row: dict[str, int], paths_trusted: bool) -> Callable[[Mapping[str, str]], ImageReader]:
    def make(digests: Mapping[str, str]) -> Callable[[str], bytes]:
        def read_image(key: str) -> bytes:
            if key not in digests:
                raise KeyError(f"{key!r} is not an available image of this cube")
            data, path = read_rows(key_row[key], 1)[0]
            if data is None and path and paths_trusted:
                with open(path, "rb") as f:
                    return f.read()
            assert data is not None
            return data

        return read_image

    return make


# ---------------------------------------------------------------------------------------
# Export


def to_hf_dataset(cube: Cube) -> datasets.Dataset:
    """The cube as a `datasets.Dataset` with the release columns plus `image` (an Image
    feature, None when unavailable), `image_path` (the image key) and `meta` (JSON text).

    `load_cube` of its `save_to_disk` directory or its parquet export gives back equal items.
    """
    import datasets

    n_opts = max([4, *(len(i.options) for i in cube.items)])
    letters = LETTERS[:n_opts]
    string = datasets.Value("string")
    features = datasets.Features(
        {
            "id": string, "dataset": string, "image_path": string, "question": string,
            **{f"option_{x}": string for x in letters},
            "gt_answer": string, "correct_index": string, "task": string, "modality": string,
            "parts": string, "original_task": string, "restricted": datasets.Value("bool"),
            "meta": string, IMAGE_COLUMN: datasets.Image(),
        }
    )  # fmt: skip
    columns: dict[str, list[Any]] = {name: [] for name in features}
    for item in cube.items:
        columns["id"].append(item.id)
        columns["dataset"].append(item.dataset)
        columns["image_path"].append(item.image)
        columns["question"].append(item.question)
        for i, x in enumerate(letters):
            columns[f"option_{x}"].append(item.options[i] if i < len(item.options) else None)
        columns["gt_answer"].append(item.answer_text)
        columns["correct_index"].append(item.answer_letter)
        columns["task"].append(item.task)
        columns["modality"].append(item.modality)
        columns["parts"].append(item.part)
        columns["original_task"].append(item.original_task)
        columns["restricted"].append(item.restricted)
        columns["meta"].append(json.dumps(dict(item.meta), ensure_ascii=False, sort_keys=True))
        columns[IMAGE_COLUMN].append(None if item.image is None else {"bytes": cube.read_image(item.image), "path": None})
    return datasets.Dataset.from_dict(columns, features=features)
