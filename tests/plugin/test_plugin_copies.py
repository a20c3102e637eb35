"""Images are counted by their decoded pixels: a cube of 60 items on 4 distinct images,
each copied to 15 file names (byte for byte or re-encoded), is 4 images wherever images
are counted, and a policy that needs 40 images does not call it QUALIFIED."""

from __future__ import annotations

import io
import json

from PIL import Image

POLICY = """\
version: 1
defaults: {rule: lower_bound, confidence: 0.95, min_n: 10, max_error_rate: 0.05}
overall: {bound: 0.3}
feasibility: {min_images: 40, when_undecidable: optional}
"""


def _copies(ws) -> None:
    cube = ws.path / "cube"
    items = []
    for i in range(4):
        im = Image.new("L", (24, 24), 40 + 50 * i)
        im.putpixel((i, 2 * i), 255)
        buf = io.BytesIO()
        im.save(buf, format="PNG")
        for j in range(15):
            path = cube / "img" / f"copy{i}_{j:02d}.png"
            if j % 2:  # re-encoded: other bytes, the same pixels
                Image.open(io.BytesIO(buf.getvalue())).convert("RGB").save(path, format="PNG", compress_level=1)
            else:
                path.write_bytes(buf.getvalue())
            items.append({"id": f"cp-{i}-{j:02d}", "dataset": "copies", "image": f"img/copy{i}_{j:02d}.png",
                          "question": f"Copy case {i}-{j}: what is the most likely diagnosis?",
                          "options": ["pneumonia", "effusion", "normal", "nodule"], "answer": (i + j) % 4,
                          "task": "Disease Diagnosis", "modality": "X-Ray", "part": "Chest"})
    ws.items = items
    with (cube / "cube.jsonl").open("w", encoding="utf-8") as fh:
        for it in items:
            fh.write(json.dumps(it) + "\n")
    (ws.path / "thresholds.yaml").write_text(POLICY, encoding="utf-8")


def test_copies_under_other_names_are_one_image(gate_ws, gate_server):
    from medrcube.cube import load_cube

    _copies(gate_ws)
    cube = load_cube(gate_ws.path / "cube" / "cube.jsonl")
    assert len(set(cube.digests.values())) == 8  # two encodings of each picture
    assert len({cube.image_of(it) for it in cube.items}) == 4
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    result = gate_ws.run(model=gate_ws.openai(gate_server))
    doc = gate_ws.gate_json()
    assert doc["verdict"] != "QUALIFIED" and result.ret == 11
    why = doc["gate"]["not_required"]["overall"]
    assert "4 images under it, fewer than feasibility.min_images=40" in why
    records = [json.loads(line) for line in (gate_ws.run_dirs()[-1] / "results.jsonl").read_text().splitlines()]
    assert len({r["image"] for r in records}) == 4 and len(records) == 60
    result.stdout.fnmatch_lines(["*overall: undecided [[]not required*4 images under it*",
                                 "*verdict: UNDECIDED*of 0 required checks*", "*gate: UNDECIDED*not required*"])


def test_a_re_encoded_cube_has_the_same_fingerprint(tmp_path):
    from medrcube.cube import load_cube, write_jsonl
    from medrcube.cube.item import Item

    im = Image.new("L", (16, 16), 90)
    im.putpixel((3, 5), 200)
    im.save(tmp_path / "a.png", format="PNG")
    items = [Item(id="x", dataset="d", image="a.png", question="q?", options=("a", "b"), answer=0,
                  task="Disease Diagnosis", modality="X-Ray", part="Chest")]
    write_jsonl(items, tmp_path / "cube.jsonl")
    first = load_cube(tmp_path / "cube.jsonl").fingerprint
    im.convert("RGB").save(tmp_path / "a.png", format="PNG", compress_level=0)  # other bytes, same picture
    assert load_cube(tmp_path / "cube.jsonl").fingerprint == first
    im.putpixel((3, 5), 201)  # one pixel changed: another cube
    im.save(tmp_path / "a.png", format="PNG")
    assert load_cube(tmp_path / "cube.jsonl").fingerprint != first
