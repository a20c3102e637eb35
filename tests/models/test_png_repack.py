"""A PNG sent without being decoded and encoded again (models/images.py `_png_repacked`).

Real PNG files built with Pillow and chunk by chunk; what is checked is what the model
would receive: the decoded data URL's chunks and its pixels against the original's.
"""

from __future__ import annotations

import base64
import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image, PngImagePlugin

from medrcube.models.images import PNG_SIGNATURE, ImageError, prepare_image

SECRET = "Jane Q. Patient 1957-03-02 MRN 0012345"


def encode(im: Image.Image, **save: object) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG", **save)
    return buf.getvalue()


def chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    assert data.startswith(PNG_SIGNATURE)
    out, pos = [], len(PNG_SIGNATURE)
    while pos < len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        out.append((kind, data[pos + 8 : pos + 8 + length]))
        pos += 12 + length
        if kind == b"IEND":
            break
    return out


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def assemble(parts: list[tuple[bytes, bytes]]) -> bytes:
    return PNG_SIGNATURE + b"".join(chunk(k, b) for k, b in parts)


def with_chunks(png: bytes, extra: list[tuple[bytes, bytes]], *, before_idat: bool = True) -> bytes:
    """`png` with `extra` chunks inserted before its first IDAT (or before IEND)."""
    parts = chunks(png)
    at = next(i for i, (k, _) in enumerate(parts) if k == (b"IDAT" if before_idat else b"IEND"))
    return assemble(parts[:at] + extra + parts[at:])


def sent(p) -> bytes:  # noqa: ANN001 - a PreparedImage
    return base64.b64decode(p.data_url.split(",", 1)[1])


def pixels(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGBA"))


def picture(mode: str, size: tuple[int, int] = (37, 23)) -> Image.Image:
    rng = np.random.default_rng(7)
    bands = len(mode)
    arr = rng.integers(0, 256, (size[1], size[0], bands), dtype=np.uint8)
    return Image.fromarray(arr[:, :, 0] if bands == 1 else arr, mode=mode)


def identifying() -> list[tuple[bytes, bytes]]:
    """Ancillary chunks that each carry the secret (or an ICC profile's name, a time, a size)."""
    return [
        (b"tEXt", b"Author\0" + SECRET.encode()),
        (b"zTXt", b"Comment\0\0" + zlib.compress(SECRET.encode())),
        (b"iTXt", b"Description\0\0\0en\0\0" + SECRET.encode()),
        (b"iCCP", b"" + SECRET[:20].encode() + b"\0\0" + zlib.compress(b"\0" * 128)),
        (b"tIME", struct.pack(">HBBBBB", 2026, 12, 2, 16, 40, 0)),
        (b"pHYs", struct.pack(">IIB", 2835, 2835, 1)),
        (b"gAMA", struct.pack(">I", 45455)),
        (b"prVt", SECRET.encode()),  # a private ancillary chunk
    ]


@pytest.mark.parametrize("mode", ["L", "LA", "RGB", "RGBA"])
def test_a_simple_png_is_repacked_with_its_pixels_and_nothing_else(mode):
    plain = encode(picture(mode), compress_level=9)
    planted = with_chunks(plain, identifying()) + b"after IEND: " + SECRET.encode()
    planted = with_chunks(planted, [(b"tEXt", b"Comment\0" + SECRET.encode())], before_idat=False)
    p = prepare_image(planted, max_side=64)
    out = sent(p)
    assert p.repacked and p.mime == "image/png" and (p.width, p.height) == (37, 23)
    assert [k for k, _ in chunks(out)] == [b"IHDR", b"IDAT", b"IEND"]
    assert out.endswith(chunk(b"IEND", b""))  # nothing after IEND either
    assert SECRET.encode() not in out and SECRET[:10].encode() not in zlib.decompress(chunks(out)[1][1])
    assert (pixels(out) == pixels(plain)).all()
    with Image.open(io.BytesIO(out)) as im:
        assert im.mode == mode and not ({"Author", "Comment", "Description", "icc_profile", "dpi", "gamma"} & set(im.info))


def test_split_idat_chunks_become_one_and_a_grey_transparency_key_is_dropped_as_before():
    plain = encode(picture("L", (40, 30)), compress_level=6)
    parts = chunks(plain)
    stream = b"".join(b for k, b in parts if k == b"IDAT")
    split = [(b"IDAT", stream[i : i + 100]) for i in range(0, len(stream), 100)]
    png = assemble([parts[0], (b"tRNS", struct.pack(">H", 0)), *split, (b"IEND", b"")])
    p = prepare_image(png, max_side=64)
    assert p.repacked and [k for k, _ in chunks(sent(p))] == [b"IHDR", b"IDAT", b"IEND"]
    with Image.open(io.BytesIO(sent(p))) as im:
        assert "transparency" not in im.info
    assert (pixels(sent(p)) == pixels(plain)).all()


@pytest.mark.parametrize("how", ["eXIf", "raw profile", "xmp"])
def test_an_orientation_source_sends_it_through_decoding_and_upright(how):
    im = picture("RGB", (30, 10))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 clockwise to view
    if how == "eXIf":
        png = encode(im, exif=exif.tobytes())
    elif how == "raw profile":
        raw = exif.tobytes()
        info = PngImagePlugin.PngInfo()
        info.add_text("Raw profile type exif", f"\nexif\n{len(raw)}\n{raw.hex()}\n")
        png = encode(im, pnginfo=info)
    else:
        info = PngImagePlugin.PngInfo()
        info.add_itxt("XML:com.adobe.xmp", '<x:xmpmeta><rdf:Description tiff:Orientation="6"/></x:xmpmeta>')
        png = encode(im, pnginfo=info)
    p = prepare_image(png, max_side=64)
    assert not p.repacked and (p.width, p.height) == (10, 30)  # turned upright, as before
    assert [k for k, _ in chunks(sent(p))] == [b"IHDR", b"IDAT", b"IEND"]


def corrupt_cases() -> dict[str, bytes]:
    plain = encode(picture("RGB", (20, 12)))
    parts = chunks(plain)
    ihdr, stream = parts[0][1], b"".join(b for k, b in parts if k == b"IDAT")
    raw = zlib.decompress(stream)
    taller = ihdr[:4] + struct.pack(">I", 13) + ihdr[8:]
    bad_filter = bytes([9]) + raw[1:]
    bad_crc = bytearray(plain)
    bad_crc[-20] ^= 0xFF  # inside the IDAT's data: the CRC no longer matches
    return {
        "truncated stream": assemble([parts[0], (b"IDAT", stream[: len(stream) // 2]), (b"IEND", b"")]),
        "truncated file": plain[: int(len(plain) * 0.7)],
        "fewer rows than the header": assemble([(b"IHDR", taller), (b"IDAT", stream), (b"IEND", b"")]),
        "bad filter type": assemble([parts[0], (b"IDAT", zlib.compress(bad_filter)), (b"IEND", b"")]),
        "bad crc": bytes(bad_crc),
        "bytes after the stream's end": assemble([parts[0], (b"IDAT", stream + b"hidden"), (b"IEND", b"")]),
        "no IEND": PNG_SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"IDAT", stream),
    }


@pytest.mark.parametrize("case", sorted(corrupt_cases()))
def test_a_damaged_png_is_never_repacked(case):
    data = corrupt_cases()[case]
    try:
        p = prepare_image(data, max_side=64)
    except ImageError:
        return  # the decoding path's error, as before
    assert not p.repacked  # decoded: what Pillow makes of it, never the damaged stream as it is


# ("fewer rows than the header" is not among them: Pillow decodes a stream that ends early
# but whole as an image whose last rows are black; it is only never repacked.)
@pytest.mark.parametrize("case", ["truncated stream", "truncated file", "bad filter type"])
def test_damaged_pixel_data_is_an_item_error(case):
    with pytest.raises(ImageError):
        prepare_image(corrupt_cases()[case], max_side=64)


def test_what_is_not_the_simple_case_is_decoded_and_encoded_again():
    palette = encode(picture("L", (16, 16)).convert("P"))
    sixteen = encode(Image.fromarray(np.arange(0, 60000, 250, dtype=np.uint16).reshape(16, 15)))
    too_big = encode(picture("RGB", (80, 20)))
    apng = encode(picture("RGB", (16, 16)), save_all=True,
                  append_images=[picture("RGB", (16, 16)).transpose(Image.Transpose.FLIP_LEFT_RIGHT)])
    for data, size in ((palette, (16, 16)), (sixteen, (15, 16)), (too_big, (64, 16)), (apng, (16, 16))):
        p = prepare_image(data, max_side=64)
        assert not p.repacked and (p.width, p.height) == size
        assert [k for k, _ in chunks(sent(p))] == [b"IHDR", b"IDAT", b"IEND"]
    assert not prepare_image(encode(picture("RGB")), max_side=64, fmt="jpeg").repacked  # asked for JPEG


def test_an_interlaced_png_is_decoded():  # built by hand: Pillow does not write Adam7
    base = chunks(encode(picture("L", (8, 8))))
    ihdr = base[0][1][:12] + b"\x01"  # Adam7; the stream below is its 7 passes, every filter 0
    rows = []
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    for x0, y0, dx, dy in passes:
        for _ in range(y0, 8, dy):
            rows.append(b"\0" + bytes(len(range(x0, 8, dx))))
    png = assemble([(b"IHDR", ihdr), (b"IDAT", zlib.compress(b"".join(rows))), (b"IEND", b"")])
    p = prepare_image(png, max_side=64)
    assert not p.repacked and (p.width, p.height) == (8, 8)


# -- the stream check remembered across runs ---------------------------------------------


def repacked_digest(ihdr: bytes, stream: bytes) -> str:
    """The SHA-256 of the PNG a repack of this header and stream makes."""
    import hashlib

    return hashlib.sha256(assemble([(b"IHDR", ihdr), (b"IDAT", stream), (b"IEND", b"")])).hexdigest()


def stream_entries(root) -> list:  # noqa: ANN001 - a Path
    return sorted((root / "png-stream-checked").glob("*.json")) if (root / "png-stream-checked").exists() else []


def test_a_passed_stream_check_is_remembered_and_the_same_png_is_sent(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(tmp_path))
    png = with_chunks(encode(picture("RGB", (21, 13))), [(b"tEXt", b"Comment\0" + SECRET.encode())])
    first = prepare_image(png, max_side=64)
    assert first.repacked and len(stream_entries(tmp_path)) == 1
    again = prepare_image(png, max_side=64)  # the remembered pass: the same bytes, nothing new written
    assert again.repacked and sent(again) == sent(first) and again.sha256 == first.sha256
    assert len(stream_entries(tmp_path)) == 1 and SECRET.encode() not in sent(again)


def test_only_an_entry_this_users_cache_wrote_vouches_for_a_stream(tmp_path, monkeypatch):
    """A stream that fails the check (a bad filter type) is repacked only if this user's
    cache says it passed: an entry planted without the cache's secret is ignored, and the
    image is decoded as before; one written through the cache is believed (which is how a
    later run skips inflating a stream that passed)."""
    from medrcube.cube.derived_cache import Slot
    from medrcube.models.images import _STREAM_CHECKED_KIND, _STREAM_RULES

    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", str(tmp_path))
    plain = encode(picture("RGB", (20, 12)))
    parts = chunks(plain)
    ihdr, stream = parts[0][1], zlib.compress(bytes([9]) + zlib.decompress(b"".join(b for k, b in parts if k == b"IDAT"))[1:])
    damaged = assemble([(b"IHDR", ihdr), (b"IDAT", stream), (b"IEND", b"")])
    parts_key = {"repacked_sha256": repacked_digest(ihdr, stream), "rules": _STREAM_RULES}
    with pytest.raises(ImageError):
        prepare_image(damaged, max_side=64)  # checked: never repacked
    assert stream_entries(tmp_path) == []  # a failed check is not remembered

    slot = Slot.open(_STREAM_CHECKED_KIND, parts_key)
    assert slot is not None
    planted = Slot(slot.path, bytes(32), slot.key)  # the same entry under another secret
    planted.write(True)
    with pytest.raises(ImageError):
        prepare_image(damaged, max_side=64)

    slot.write(True)  # as this user's cache writes a pass
    p = prepare_image(damaged, max_side=64)
    assert p.repacked and sent(p) == damaged


def test_with_the_cache_off_every_stream_is_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDRCUBE_CACHE_DIR", "off")
    png = encode(picture("L", (9, 9)))
    assert prepare_image(png, max_side=64).repacked
    assert not list(tmp_path.iterdir())


def test_pillow_s_bomb_limit_as_a_caller_set_it_still_sends_a_large_png_through_decoding(monkeypatch):
    """The repack found without Pillow reads Pillow's limit once Pillow is imported: a PNG above
    the limit a caller set is decoded (Pillow warns of the bomb), as before."""
    plain = encode(picture("L", (40, 30)))
    assert prepare_image(plain, max_side=64).repacked
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 40 * 30 - 1)
    with pytest.warns(Image.DecompressionBombWarning):
        p = prepare_image(plain, max_side=64)
        same = (pixels(sent(p)) == pixels(plain)).all()
    assert not p.repacked and same


def test_a_header_that_does_not_parse_is_left_to_pillow_which_refuses_it():
    plain = encode(picture("RGB"))
    bad = plain[:8] + struct.pack(">I", 14) + plain[12:]  # IHDR's length is not 13
    with pytest.raises(ImageError):
        prepare_image(bad, max_side=64)


def test_a_later_run_on_a_png_cube_never_imports_pillow(tmp_path):
    """The bundled PNG cube loaded once (its image checks cached), then, in a new interpreter,
    loaded again and every image prepared as a request sends it: Pillow is never imported,
    and what is sent is what the decoding path's process sends."""
    import json
    import os
    import subprocess
    import sys

    from medrcube.plugin.options import bundled_cube

    script = (
        "import sys, json, hashlib\n"
        "from medrcube.cube.load import load_cube\n"
        "from medrcube.models.images import prepare_image\n"
        f"cube = load_cube({str(bundled_cube())!r})\n"
        "sent = {}\n"
        "for it in cube.items[:60]:\n"
        "    p = prepare_image(cube.read_image(it.image), max_side=1024)\n"
        "    sent[it.id] = hashlib.sha256(p.data_url.encode()).hexdigest()\n"
        "print(json.dumps({'pillow': 'PIL.Image' in sys.modules, 'sent': sent}))\n"
    )
    env = {**os.environ, "MEDRCUBE_CACHE_DIR": str(tmp_path / "cache")}
    runs = [json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                      check=True).stdout) for _ in range(2)]
    assert runs[1]["pillow"] is False
    assert runs[0]["sent"] == runs[1]["sent"] and len(runs[1]["sent"]) == 60
