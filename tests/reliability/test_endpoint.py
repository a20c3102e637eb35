"""Hostile endpoints and hostile files: redirects, slow drips, gzip bombs, answers from
another model or cut at the token limit, one model name on two endpoints, image metadata,
files that are not images, and stores that cannot be used.

Everything real: the OpenAI adapter and the `openai` client against the scripted server
on 127.0.0.1 (in process, or as a child process where memory is measured), real cubes on
disk, the real SQLite store, `medrcube run` and the gate as command lines.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from PIL import Image, PngImagePlugin
from reliability_kit import MARKER_KEY, MODEL, asked_items, cli_run, env_with_key, make_cube, openai_adapter, replies

from medrcube.cube import load_cube
from medrcube.records import GRADED, Outcome
from medrcube.run.runner import run_cube
from medrcube.run.store import ResponseStore, StoreError

REPO = Path(__file__).resolve().parents[2]


def _asked(result):
    """The records that needed an answer (an unavailable image is never asked)."""
    return [r for r in result.records if r.outcome is not Outcome.UNAVAILABLE]


# ---------------------------------------------------------------------------- redirects


def test_a_redirect_is_not_followed_and_names_the_location(tmp_path: Path, scripted_server_factory, tally) -> None:
    t = tally("f_redirect")
    cube = make_cube(tmp_path / "cube", n_items=8)
    other = scripted_server_factory({"answers": replies(cube)})  # would answer, and be graded
    other_url = other.base_url + "/chat/completions"
    srv = scripted_server_factory({"answers": replies(cube), "faults": [{"fault": "redirect", "location": other_url}]})
    result = run_cube(cube, openai_adapter(srv.base_url), store=ResponseStore(tmp_path / "store"))
    t.injected += srv.stats()["by_fault"].get("redirect", 0)
    t.runs += 1
    errors = [r for r in result.records if r.outcome is Outcome.ERROR]
    named = all(r.error and "redirect" in r.error and other_url in r.error and "not followed" in r.error
                for r in errors)
    t.completed += int(len(errors) == len(_asked(result)) and named)
    t.unclear += int(other.stats()["total"] != 0)
    assert len(errors) == len(_asked(result)) and named, errors[:1]
    assert srv.stats()["total"] == len(_asked(result))  # not retried: a redirect stays a redirect
    assert other.stats()["total"] == 0  # the other host was asked nothing


# ---------------------------------------------------------------------------- slow drips


def test_a_dripped_body_ends_at_the_total_deadline(tmp_path: Path, scripted_server, tally) -> None:
    """A body dripped at 1 byte/s (about 300 s for a whole answer) is cut at the 2 s total
    deadline. Told by what the client did, never by a duration (load only makes a run
    longer; how long the cut takes is measured by benchmarks/drip_deadline.py): without a
    retry every dripped request ends as a timeout error naming the deadline, nothing
    graded; with one retry every item is dripped once, then answered and graded with the
    server's own reply."""
    t = tally("f_drip")
    cube = make_cube(tmp_path / "cube", n_items=6)
    answers = replies(cube)
    question = {item.id: item.question for item in cube.items}

    def dripped_run(drip: dict, max_retries: int, store: str) -> tuple[list, dict]:
        """One run against the drip fault: the records asked, and the server's counts."""
        scripted_server.reset_stats()
        scripted_server.set_script({"answers": answers, "faults": [{"fault": "drip", "interval": 1.0, **drip}]})
        result = run_cube(cube, openai_adapter(scripted_server.base_url, timeout=2.0, max_retries=max_retries),
                          store=ResponseStore(tmp_path / store))
        stats = scripted_server.stats()
        t.injected += stats["by_fault"].get("drip", 0)
        t.runs += 1
        return _asked(result), stats

    asked, stats = dripped_run({}, max_retries=0, store="store-cut")
    timed_out = [r for r in asked if r.outcome is Outcome.ERROR and "no complete answer within 2s (timeout)" in (r.error or "")]
    t.stopped += int(len(timed_out) == len(asked))
    t.lost += len(asked) - len(timed_out)
    assert asked and len(timed_out) == len(asked), [(r.outcome, r.error) for r in asked]
    assert stats["total"] == stats["by_fault"]["drip"] == len(asked)  # one attempt each, every one dripped

    asked, stats = dripped_run({"per_prompt": True, "first": 1}, max_retries=1, store="store")
    graded = [r for r in asked if r.outcome in GRADED and r.response == answers[question[r.item_id]]]
    t.completed += int(len(graded) == len(asked))
    t.lost += len(asked) - len(graded)
    t.duplicates += stats["duplicates"]
    t.note(f"a body dripped at 1 byte/s (about 300 s for a whole answer) is cut at the 2 s deadline: "
           f"{len(asked)} of {len(asked)} requests end as a timeout error without a retry; with one retry each "
           "item is dripped once, then answered and graded")
    assert asked and len(graded) == len(asked), [(r.outcome, r.response, r.error) for r in asked]
    # each prompt dripped once (the cut attempt), then asked once more and answered
    assert stats["by_fault"]["drip"] == len(asked) and stats["total"] == 2 * len(asked)
    assert stats["duplicates"] == 0


# ---------------------------------------------------------------------------- gzip bombs

_RSS_CLIENT = r"""
import asyncio, json, os, sys
from medrcube.models.base import Request
from medrcube.models.openai_adapter import OpenAIAdapter
os.environ["OPENAI_API_KEY"] = "sk-bomb-test-0000000000000000"
a = OpenAIAdapter(sys.argv[2], base_url=sys.argv[1], timeout=60, max_retries=0, concurrency=3)
reqs = [Request(key=str(i), item_id=str(i), prompt=f"Question: q{i}\nOptions:\nA. a\nB. b\n") for i in range(3)]
out = asyncio.run(a.generate(reqs))
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across fork and exec,
# so a child of a big pytest process would report the parent's peak.
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"rss_mib": hwm / 1024,
                  "kinds": [str(r.error_kind) for r in out], "errors": [r.error for r in out],
                  "texts": [r.text for r in out]}))
"""


def test_a_gzip_bomb_is_refused_within_the_cap(tmp_path: Path, scripted_server_process, tally) -> None:
    t = tally("f_gzip_bomb")
    bomb = scripted_server_process({"default": "B", "faults": [{"fault": "gzip_bomb", "inflated_mib": 512}]})
    # An honest gzip answer: no padding (a 1 MiB body to a request capped at a few tokens is
    # itself refused as past the reply's cap, models/openai_wire.reply_cap).
    honest = scripted_server_process({"default": "B", "faults": [{"fault": "gzip_bomb", "inflated_mib": 0}]})
    runs = {}
    for name, srv in (("bomb", bomb), ("honest", honest)):
        done = subprocess.run([sys.executable, "-c", _RSS_CLIENT, srv.base_url, MODEL], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        runs[name] = json.loads(done.stdout.strip().splitlines()[-1])
    t.injected += bomb.stats(log=False)["by_fault"].get("gzip_bomb", 0)
    t.runs += 2
    b, h = runs["bomb"], runs["honest"]
    refused = all(k == "malformed" for k in b["kinds"]) and all("past the cap" in e for e in b["errors"])
    t.stopped += int(refused)
    t.completed += int(h["texts"] == ["B", "B", "B"])
    t.unclear += int(not refused or b["rss_mib"] > 400)
    t.note(f"three concurrent 512 MiB gzip bombs: client peak RSS {b['rss_mib']:.0f} MiB (an honest gzip answer: "
           f"{h['rss_mib']:.0f} MiB); refused at the 16 MiB decoded cap, never graded")
    assert refused, b
    assert b["rss_mib"] < 400, b["rss_mib"]
    assert h["texts"] == ["B", "B", "B"]  # gzip itself is read fine


# ---------------------------------------------------------------------------- another model answers


def test_an_answer_from_another_model_is_recorded_or_refused(tmp_path: Path, scripted_server, tally) -> None:
    t = tally("f_served_model")
    cube = make_cube(tmp_path / "cube", n_items=8)
    half = [it.question for it in list(cube.items)[::2]]
    scripted_server.set_script({"answers": replies(cube), "faults": [
        {"fault": "served_model", "model": "cheaper-model", "match": q} for q in half]})
    result = run_cube(cube, openai_adapter(scripted_server.base_url), store=ResponseStore(tmp_path / "store"))
    t.injected += scripted_server.stats()["by_fault"].get("served_model", 0)
    t.runs += 2
    info = result.info
    recorded = info["served_model_mismatches"] == {"cheaper-model": len(half)}
    t.completed += int(recorded and all(r.outcome in GRADED for r in _asked(result)))
    # Cached answers keep the name too: a rerun's summary says the same.
    again = run_cube(cube, openai_adapter(scripted_server.base_url), store=ResponseStore(tmp_path / "store"))
    assert again.requests_sent == 0 and again.info["served_model_mismatches"] == {"cheaper-model": len(half)}
    strict = run_cube(cube, openai_adapter(scripted_server.base_url, strict_model=True),
                      store=ResponseStore(tmp_path / "store-strict"))
    t.runs += 1
    errs = [r for r in strict.records if r.outcome is Outcome.ERROR]
    t.completed += int(len(errs) == len(half) and all("cheaper-model" in (r.error or "") for r in errs))
    assert recorded, info
    assert info["served_models"][MODEL] == len(_asked(result)) - len(half)
    assert len(errs) == len(half) and all("strict_model" in (r.error or "") for r in errs)


# ---------------------------------------------------------------------------- finish_reason length


def test_an_answer_cut_at_the_token_limit_is_truncated_never_graded(tmp_path: Path, scripted_server, tally) -> None:
    from medrcube.rundir.files import run_document

    t = tally("f_length")
    cube = make_cube(tmp_path / "cube", n_items=9)
    cut = [it.question for it in list(cube.items)[::3] if cube.image_available(it)]
    # The cut answer is the right letter: graded, it would count as correct.
    scripted_server.set_script({"answers": replies(cube, wrong_every=0),
                                "faults": [{"fault": "length", "match": q} for q in cut]})
    result = run_cube(cube, openai_adapter(scripted_server.base_url), store=ResponseStore(tmp_path / "store"))
    t.injected += scripted_server.stats()["by_fault"].get("length", 0)
    t.runs += 1
    truncated = [r for r in result.records if r.outcome is Outcome.TRUNCATED]
    t.completed += int(len(truncated) == len(cut))
    t.gate_passes_incomplete += sum(1 for r in truncated if r.graded)
    doc = run_document(result)
    assert len(truncated) == len(cut) and all(not r.graded and r.extracted is None for r in truncated)
    assert all("token limit" in (r.error or "") for r in truncated)
    assert doc["counts"]["outcomes"]["truncated"] == len(cut)


# ---------------------------------------------------------------------------- one name, two endpoints


def test_one_model_name_on_two_endpoints_never_shares_answers(tmp_path: Path, scripted_server_factory,
                                                              tally) -> None:
    t = tally("store_endpoint")
    cube = make_cube(tmp_path / "cube", n_items=8)
    n = asked_items(cube)
    right = scripted_server_factory({"answers": replies(cube, wrong_every=0)})
    wrong = scripted_server_factory({"answers": replies(cube, wrong_every=1)})
    store = ResponseStore(tmp_path / "store")
    a = run_cube(cube, openai_adapter(right.base_url), store=store)
    b = run_cube(cube, openai_adapter(wrong.base_url), store=store)
    t.runs += 2
    t.injected += 1
    both_asked = right.stats()["total"] == n and wrong.stats()["total"] == n and b.cache_hits == 0
    t.completed += int(both_asked)
    t.unclear += int(not both_asked)
    assert both_asked, (right.stats()["total"], wrong.stats()["total"], b.cache_hits)
    assert sum(r.correct for r in a.records) == n and sum(r.correct for r in b.records) == 0
    # Declared the same model (endpoint_identity in models.yaml): shared.
    same = [openai_adapter(u, endpoint_identity="site-llm-v3") for u in (right.base_url, wrong.base_url)]
    run_cube(cube, same[0], store=store)
    c = run_cube(cube, same[1], store=store)
    t.runs += 2
    t.completed += int(c.requests_sent == 0)
    assert c.requests_sent == 0 and c.cache_hits == n


def test_a_regression_gate_on_two_endpoints_asks_both(tmp_path: Path, scripted_server_factory, tally) -> None:
    from test_faults import _gate_workspace

    t = tally("store_endpoint")
    items = _gate_workspace(tmp_path, n=12)
    letters = {it["question"]: "ABCD"[it["answer"]] for it in items}
    cand = scripted_server_factory({"answers": letters})
    base = scripted_server_factory({"answers": letters})
    (tmp_path / "models.yaml").write_text(
        "models:\n"
        f"  candidate:\n    provider: openai\n    model: candidate\n    base_url: {cand.base_url}\n    timeout: 5\n"
        f"  baseline:\n    provider: openai\n    model: candidate\n    base_url: {base.base_url}\n    timeout: 5\n",
        encoding="utf-8")
    cmd = [sys.executable, "-m", "pytest", "tests_benchmark", "-p", "no:cacheprovider", "-q",
           "--cube=cube/cube.jsonl", "--thresholds=thresholds.yaml", "--models-file=models.yaml",
           "--model=candidate", "--baseline=baseline", "--response-store=store"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env_with_key(), capture_output=True, text=True, timeout=400)
    t.runs += 1
    t.injected += 1
    asked = cand.stats()["total"], base.stats()["total"]
    t.completed += int(all(a >= len(items) for a in asked))
    t.unclear += int("Traceback (most recent call last)" in done.stdout + done.stderr)
    t.note("a regression gate whose candidate and baseline are both served as 'candidate' on two endpoints "
           f"asked the candidate {asked[0]} and the baseline {asked[1]} times ({len(items)} items)")
    assert all(a >= len(items) for a in asked), (asked, done.stdout[-3000:])


# ---------------------------------------------------------------------------- image metadata

SECRET_TEXT = "PATIENT-DOE-JOHN-MRN-4471"


def _metadata_images(root: Path) -> dict[str, bytes]:
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", SECRET_TEXT)
    info.add_itxt("Description", SECRET_TEXT)
    buf = io.BytesIO()
    Image.radial_gradient("L").resize((32, 32)).convert("RGB").save(buf, format="PNG", pnginfo=info)
    png_text = buf.getvalue()
    png_tail = png_text + b"TRAILING:" + SECRET_TEXT.encode()
    exif = Image.Exif()
    exif[0x010E] = SECRET_TEXT  # ImageDescription
    exif[0x013B] = SECRET_TEXT  # Artist
    buf = io.BytesIO()
    Image.radial_gradient("L").resize((32, 32)).convert("RGB").save(buf, format="JPEG", exif=exif.tobytes(),
                                                                    comment=SECRET_TEXT.encode())
    return {"text.png": png_text, "tail.png": png_tail, "exif.jpg": buf.getvalue()}


def test_image_metadata_never_leaves_for_the_model(tmp_path: Path, scripted_server, tally) -> None:
    import base64

    t = tally("image_metadata")
    cube_dir = tmp_path / "cube"
    (cube_dir / "img").mkdir(parents=True)
    images = _metadata_images(cube_dir)
    rows = []
    for i, (name, data) in enumerate(images.items()):
        assert SECRET_TEXT.encode() in data  # the marker is really in the file
        (cube_dir / "img" / name).write_bytes(data)
        rows.append({"id": f"m{i}", "dataset": "meta", "image": f"img/{name}", "question": f"Which one? [{name}]",
                     "options": ["a", "b", "c"], "answer": 0, "task": "Modality Recognition", "modality": "X-Ray",
                     "part": "Chest"})
    (cube_dir / "cube.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    sent: list[bytes] = []
    lock = threading.Lock()

    def look(prompt: str, body) -> str:
        for m in body.get("messages", []):
            for part in m.get("content", []) if isinstance(m.get("content"), list) else []:
                if part.get("type") == "image_url":
                    with lock:
                        sent.append(base64.b64decode(part["image_url"]["url"].split(",", 1)[1]))
        return "A"

    scripted_server.set_script({}, reply=look)
    cube = load_cube(cube_dir / "cube.jsonl")
    result = run_cube(cube, openai_adapter(scripted_server.base_url), store=ResponseStore(tmp_path / "store"))
    t.injected += len(images) * 2
    t.runs += 1
    leaked = [d for d in sent if SECRET_TEXT.encode() in d or b"tEXt" in d or b"iTXt" in d or b"Exif" in d]
    t.completed += int(len(sent) == len(images) and all(r.outcome in GRADED for r in result.records))
    t.unclear += len(leaked)
    t.note("PNG tEXt/iTXt chunks, bytes after IEND, EXIF fields and a JPEG comment carrying a name: the images "
           "sent are rebuilt from decoded pixels and hold none of it")
    assert len(sent) == len(images) and not leaked


# ---------------------------------------------------------------------------- files that are not images


def _one_image_cube(root: Path, name: str = "x.png", dataset: str = "files") -> Path:
    (root / dataset / "img").mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 20, 30)).save(buf, format="PNG")
    (root / dataset / "img" / "good.png").write_bytes(buf.getvalue())
    recs = [{"id": f"{dataset}-1", "question": "Which? [good]", "option_A": "a", "option_B": "b", "gt_answer": "a",
             "image_path": "img/good.png", "task": "Modality Recognition", "modality": "X-ray", "parts": "Chest"},
            {"id": f"{dataset}-2", "question": "Which? [odd]", "option_A": "a", "option_B": "b", "gt_answer": "a",
             "image_path": f"img/{name}", "task": "Modality Recognition", "modality": "X-ray", "parts": "Chest"}]
    (root / dataset / "test.json").write_text(json.dumps(recs), encoding="utf-8")
    return root / dataset / "img" / name


def _load_bounded(root: Path, seconds: float = 120.0):  # a bound on a hang (a FIFO read), not a speed
    box: dict = {}

    def go() -> None:
        try:
            box["cube"] = load_cube(root)
        except Exception as exc:  # noqa: BLE001 - reported below
            box["error"] = exc

    th = threading.Thread(target=go, daemon=True)
    th.start()
    th.join(seconds)
    return box if not th.is_alive() else {"hung": True}


def test_files_that_are_not_images_are_refused_naming_the_item(tmp_path: Path, scripted_server, tally) -> None:
    t = tally("image_files")
    # A FIFO in place of an image: validate must not hang on it.
    fifo = _one_image_cube(tmp_path / "fifo")
    os.mkfifo(fifo)
    # A sparse 1 GiB "PNG": refused before a byte is read.
    sparse = _one_image_cube(tmp_path / "sparse")
    with open(sparse, "wb") as fh:
        fh.write(b"\x89PNG\r\n\x1a\n")
        fh.truncate(1 << 30)
    # A dataset folder whose name is not UTF-8.
    odd_root = tmp_path / "nonutf8"
    odd_root.mkdir()
    _one_image_cube(Path(os.fsdecode(os.fsencode(str(odd_root)) + b"/")), dataset=os.fsdecode(b"caf\xe9"))
    results = {}
    for name, root in (("fifo", tmp_path / "fifo"), ("sparse", tmp_path / "sparse"), ("non-utf8", odd_root)):
        t0 = time.monotonic()
        results[name] = (_load_bounded(root), time.monotonic() - t0)
        t.injected += 1
        t.runs += 1
    for name in ("fifo", "sparse"):
        box, secs = results[name]
        assert "cube" in box, box
        (problem,) = box["cube"].skipped
        want = "image_not_a_file" if name == "fifo" else "image_too_large"
        assert problem.reason == want and problem.item_id is not None, problem
        t.completed += 1
        t.note(f"{name}: refused at load as {want} in {secs:.2f} s, naming the item; the good item loads")
    box, _ = results["non-utf8"]
    said = str(box.get("error", "")) if "cube" not in box else " ".join(
        f"{p.reason} {p.source} {p.message}" for p in box["cube"].skipped)
    ok = "not valid UTF-8" in said and "\\xe9" in said and "Traceback" not in said
    t.stopped += int(ok)
    t.unclear += int(not ok)
    assert ok, box

    # Swapped for a symlink out of the cube, or changed, during a run: refused, never sent.
    cube_dir = tmp_path / "swap"
    img = _one_image_cube(cube_dir)
    shutil.copy(cube_dir / "files" / "img" / "good.png", img)
    outside = tmp_path / "outside.png"
    Image.new("RGB", (8, 8), (200, 0, 0)).save(outside)
    cube = load_cube(cube_dir)
    img.unlink()
    img.symlink_to(outside)
    (cube_dir / "files" / "img" / "good.png").write_bytes(outside.read_bytes())
    scripted_server.set_script({"default": "A"})
    result = run_cube(cube, openai_adapter(scripted_server.base_url), store=ResponseStore(tmp_path / "store"))
    t.injected += 2
    t.runs += 1
    errs = [r for r in result.records if r.outcome is Outcome.ERROR]
    t.stopped += int(len(errs) == 2)
    t.unclear += scripted_server.stats()["images"]["total"]
    assert len(errs) == 2 and scripted_server.stats()["images"]["total"] == 0, [r.error for r in result.records]
    assert any("symlink" in (r.error or "") for r in errs) and any("changed since" in (r.error or "") for r in errs)


# ---------------------------------------------------------------------------- unusable stores


def test_an_unusable_store_is_a_clear_error(tmp_path: Path, scripted_server, tally) -> None:
    t = tally("store_unusable")
    cube = make_cube(tmp_path / "cube", n_items=4)
    scripted_server.set_script({"answers": replies(cube)})
    shaped = tmp_path / "dir-shaped"
    (shaped / "responses.sqlite3").mkdir(parents=True)
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory", encoding="utf-8")
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    cases = {"a directory in place of the database": shaped, "a file in place of the directory": a_file}
    for what, store in cases.items():
        with pytest.raises(StoreError) as info:
            ResponseStore(store)
        assert str(store) in str(info.value) and "--response-store" in str(info.value)
        done = subprocess.run(cli_run(scripted_server.base_url, cube, store, tmp_path / f"out-{store.name}"),
                              capture_output=True, text=True, timeout=180, env=env_with_key())
        t.injected += 1
        t.runs += 1
        clear = done.returncode != 0 and "Traceback" not in done.stderr and str(store) in done.stderr
        t.stopped += int(clear)
        t.unclear += int(not clear)
        assert clear, (what, done.returncode, done.stderr[-1500:])
    assert scripted_server.stats()["total"] == 0
    t.note("a directory where responses.sqlite3 should be, and a file where the store directory should be: "
           "StoreError naming the path and --response-store; `medrcube run` exits 1 without a traceback")
    # A store on a read-only file system (a real one: root ignores file modes), holding answers.
    from reliability_kit import tiny_filesystem

    ro = tmp_path / "ro"
    with tiny_filesystem(ro, 4096) as mounted:
        if not mounted:
            t.note("read-only store: not tested here (needs root to mount a tmpfs)")
            return
        first = subprocess.run(cli_run(scripted_server.base_url, cube, ro / "store", tmp_path / "out-ro1"),
                               capture_output=True, text=True, timeout=180, env=env_with_key())
        assert first.returncode == 0, first.stderr[-1500:]
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True, capture_output=True)
        done = subprocess.run(cli_run(scripted_server.base_url, cube, ro / "store", tmp_path / "out-ro2"),
                              capture_output=True, text=True, timeout=180, env=env_with_key())
    t.injected += 1
    t.runs += 1
    clear = done.returncode == 1 and "Traceback" not in done.stderr and "--response-store" in done.stderr
    t.stopped += int(clear)
    t.unclear += int(not clear)
    t.note(f"a store on a read-only tmpfs: `medrcube run` says: {done.stderr.strip().splitlines()[-1][:160]}")
    assert clear, (done.returncode, done.stderr[-1500:])


# ---------------------------------------------------------------------------- the key, echoed by the model


def test_a_key_echoed_in_an_answer_is_cut_before_anything_keeps_it(tmp_path: Path, scripted_server, tally) -> None:
    t = tally("key_echoed_by_model")
    cube = make_cube(tmp_path / "cube", n_items=6)
    scripted_server.set_script({"answers": replies(cube), "faults": [{"fault": "key_echo"}]})
    out, store = tmp_path / "out", tmp_path / "store"
    done = subprocess.run(cli_run(scripted_server.base_url, cube, store, out), capture_output=True, text=True,
                          timeout=240, env=env_with_key())
    t.injected += scripted_server.stats()["by_fault"].get("key_echo", 0)
    t.runs += 1
    markers = (MARKER_KEY, MARKER_KEY[3:])
    leaks = [str(f) for root in (out, store) for f in root.rglob("*") if f.is_file()
             and any(m.encode() in f.read_bytes() for m in markers)]
    leaks += [name for name, text in (("stdout", done.stdout), ("stderr", done.stderr)) if any(m in text for m in markers)]
    t.completed += int(done.returncode in (0, 1) and "Traceback" not in done.stderr)
    t.unclear += len(leaks)
    results = [json.loads(line) for f in out.rglob("results.jsonl") for line in f.read_text().splitlines()
               if line.strip().startswith("{") and '"item_id"' in line]
    answers = [r["response"] for r in results if r.get("response")]
    assert answers and all("[redacted]" in a for a in answers), answers[:2]
    assert not leaks, leaks


# ---------------------------------------------------------------------------- orphaned xdist workers


def test_orphaned_xdist_workers_stop_asking(tmp_path: Path, scripted_server, tally) -> None:
    import signal

    from reliability_kit import child_pids, process_state, sigkill, wait_for
    from test_faults import _gate_workspace

    t = tally("xdist_orphans")
    # 80 asks at 0.4 s each and two requests in flight per worker: an unguarded pair goes on
    # for about 8 s and asks all of them; a guarded one stops within a poll of the kill.
    items = _gate_workspace(tmp_path, n=80)
    letters = {it["question"]: "ABCD"[it["answer"]] for it in items}
    scripted_server.set_script({"answers": letters, "latency": 0.4})
    (tmp_path / "models.yaml").write_text(
        "models:\n  reliab-model:\n    provider: openai\n"
        f"    model: scripted-model\n    base_url: {scripted_server.base_url}\n"
        "    timeout: 5\n    max_retries: 2\n    concurrency: 2\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "pytest", "tests_benchmark", "-n", "2", "-p", "no:cacheprovider", "-q",
           "--cube=cube/cube.jsonl", "--thresholds=thresholds.yaml", "--models-file=models.yaml",
           "--model=reliab-model", "--response-store=store"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env_with_key(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        wait_for(lambda: scripted_server.stats(log=False)["total"] >= 4, "both workers asking", timeout=180)
        workers = child_pids(proc.pid)
        at_kill = scripted_server.stats(log=False)["total"]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        # Events, not sleeps: the workers exit once they see the controller gone, and the
        # requests they had on the wire end (answered or cut); a loaded machine only makes
        # both come later, and the timeouts are far beyond either.
        wait_for(lambda: all(process_state(w) in ("Z", "gone") for w in workers), "the orphaned workers to exit",
                 timeout=180, poll=0.05)
        wait_for(lambda: scripted_server.stats(log=False)["in_flight"] == 0, "the requests on the wire to end",
                 timeout=180, poll=0.05)
        final = scripted_server.stats(log=False)["total"]
    finally:
        if proc.poll() is None:
            sigkill(proc)
        for w in workers:  # the workers this test started, by pid
            with contextlib_suppress():
                os.kill(w, signal.SIGKILL)
    t.injected += 1
    t.runs += 1
    asks = len(items)
    t.stopped += int(final < asks)
    t.unclear += int(final >= asks)
    t.note(f"controller SIGKILLed with {len(workers)} workers asking at 0.4 s per answer: the workers exited, "
           f"having sent {final - at_kill} requests after the kill and {final} of the {asks} asks in all "
           "(an unguarded pair asks every one)")
    assert workers  # the run was parallel
    assert final < asks, (at_kill, final)  # they stopped asking: the cube was never asked in full


def contextlib_suppress():
    import contextlib

    return contextlib.suppress(OSError)


# ---------------------------------------------------------------------------- medrcube report


def test_report_refuses_damaged_duplicated_or_foreign_results(tmp_path: Path, scripted_server, tally) -> None:
    t = tally("report_mismatch")
    cube_a = make_cube(tmp_path / "cube-a", n_items=6, seed=3)
    cube_b = make_cube(tmp_path / "cube-b", n_items=6, seed=4)
    scripted_server.set_script({"answers": {**replies(cube_a), **replies(cube_b)}})
    runs = {}
    for name, cube in (("a", cube_a), ("b", cube_b)):
        out = tmp_path / f"out-{name}"
        done = subprocess.run(cli_run(scripted_server.base_url, cube, tmp_path / "store", out), capture_output=True,
                              text=True, timeout=240, env=env_with_key())
        assert done.returncode in (0, 1), done.stderr[-1500:]
        (runs[name],) = [p.parent for p in out.rglob("run.json")]
    good = runs["a"]
    results = (good / "results.jsonl").read_bytes()
    cases = {}
    dup = tmp_path / "dup"
    shutil.copytree(good, dup)
    first = results.splitlines(keepends=True)[0]
    (dup / "results.jsonl").write_bytes(results + first)
    cases["a record twice"] = (dup, ["recorded twice"])
    foreign = tmp_path / "foreign"
    shutil.copytree(good, foreign)
    shutil.copy(runs["b"] / "results.jsonl", foreign / "results.jsonl")
    cases["another cube's results"] = (foreign, ["not those of run.json", "different runs"])
    damaged = tmp_path / "damaged"
    shutil.copytree(good, damaged)
    (damaged / "results.jsonl").write_bytes(results[:40] + b"\xff\xfe" + results[42:])
    cases["non-UTF-8 bytes"] = (damaged, ["not UTF-8", "results.jsonl:1"])
    for what, (run_dir, words) in cases.items():
        # As written before runs were sealed: the strict reader refuses each on its own (a
        # sealed directory is refused by its seal first: tests/rundir/test_rundir_seal.py).
        (run_dir / "manifest.json").unlink()
        done = subprocess.run([sys.executable, "-m", "medrcube.cli", "report", str(run_dir), "--out",
                               str(tmp_path / "lb"), "--no-plots"], capture_output=True, text=True, timeout=240)
        t.injected += 1
        t.runs += 1
        clear = done.returncode == 1 and all(w in done.stderr for w in words) and "Traceback" not in done.stderr
        t.stopped += int(clear)
        t.unclear += int(not clear)
        assert clear, (what, done.returncode, done.stderr[-1500:])
    ok = subprocess.run([sys.executable, "-m", "medrcube.cli", "report", str(good), "--out", str(tmp_path / "lb"),
                         "--no-plots"], capture_output=True, text=True, timeout=240)
    t.runs += 1
    t.completed += int(ok.returncode == 0)
    assert ok.returncode == 0, ok.stderr[-1500:]
