"""Evidence a hospital can sign (issue 26), through the real gate: the adversarial cases of
the issue each end in a refusal or a visible, recorded mark, never in a silent QUALIFIED.

- an edited response store (answers rewritten, the row CRC recomputed);
- a warm cache handed over with a model (forged rows with every plain digest recomputed);
- an edited run directory read by `medrcube report` / `medrcube verify`;
- a forged baseline, a baseline of another cube, a mistyped baseline path;
- the one-line policy that qualifies a random model.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path

import pytest
from tests.plugin.conftest import DEPLOYMENT_THRESHOLDS as DEPLOYMENT

from medrcube.run import signing
from medrcube.run.store import DB_NAME
from medrcube.run.store.responses import _checksum, _digest_payload

COLS = ("key, text, refused, usage, latency_s, attempts, checksum, truncated, served_model, confidence, "
        "model, created, endpoint, run, digest, signed")


def _rewrite_store(store: Path, text: str, *, forge_digest: bool) -> int:
    """Rewrite every stored answer to `text`, recomputing its CRC as an editor who knows
    the format would (and, with `forge_digest`, its plain digest too, marked unsigned).
    Returns the rows edited."""
    conn = sqlite3.connect(store / DB_NAME)
    rows = conn.execute(f"SELECT {COLS} FROM responses").fetchall()
    for row in rows:
        key, _, refused, usage, *_rest = row
        edited = (key, text, *row[2:])
        model, created, endpoint, run, digest, signed = row[10:16]
        if forge_digest:
            digest, signed = signing.digest(_digest_payload(edited), None), 0
        crc = _checksum(key, text, refused, usage, row[7], row[9], (model, created, endpoint, run, digest, signed))
        conn.execute("UPDATE responses SET text = ?, checksum = ?, digest = ?, signed = ? WHERE key = ?",
                     (text, crc, digest, signed, key))
    conn.commit()
    conn.close()
    return len(rows)


def _run_json(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text(encoding="utf-8"))


def test_a_rerun_says_how_many_answers_came_from_the_store_and_from_which_run(gate_ws, gate_server):
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    model = gate_ws.openai(gate_server)
    gate_ws.run(model=model)
    first = gate_ws.gate_json()["provenance"]
    assert first["live"] == 27 and first["stored"] == 0 and first["signed"] is False
    assert _run_json(gate_ws.run_dirs()[-1])["run_token"] == first["run"]

    again = gate_ws.run(model=model)
    second = gate_ws.gate_json()["provenance"]
    assert gate_server.stats()["total"] == 27  # nothing asked again
    assert second["live"] == 0 and second["stored"] == 27 and second["from_runs"] == {first["run"]: 27}
    again.stdout.fnmatch_lines([f"answers: 0 asked live in this run, 27 from the response store (asked by runs "
                                f"{first['run']} (27)); signed: 27 with the user secret (this run signs with the "
                                "user secret *; set MEDRCUBE_SIGNING_KEY to sign with the site key)"])
    assert second["signer"] == "user secret" and second["signers"] == {"user secret": 27}
    assert "27 from the response store" in (gate_ws.run_dirs()[-1] / "report.html").read_text(encoding="utf-8")

    gate_ws.run("--fresh", model=model)  # qualification mode: every item asked live
    fresh = gate_ws.gate_json()
    assert gate_server.stats()["total"] == 54
    assert fresh["provenance"]["live"] == 27 and fresh["provenance"]["stored"] == 0 and fresh["fresh"] is True


def test_an_edited_store_is_never_graded(gate_ws, gate_server):
    """The issue's first case: a weak model's stored answers rewritten with their CRC
    recomputed. The rerun refuses them, naming the store, the items and the fix."""
    gate_server.set_script({"answer_key": gate_ws.answer_key(wrong=gate_ws.ids("Disease Diagnosis"))})
    model = gate_ws.openai(gate_server)
    gate_ws.run(model=model)
    assert gate_ws.gate_json()["verdict"] == "NOT QUALIFIED"
    assert _rewrite_store(gate_ws.path / ".medrcube", "A", forge_digest=False) == 27

    result = gate_ws.run(model=model)
    out = result.stdout.str()
    assert result.ret != 0 and gate_ws.gate_json()["verdict"] != "QUALIFIED"
    assert "digest does not verify" in out and str(gate_ws.path / ".medrcube" / DB_NAME) in out
    assert re.search(r"answer\(s\) for item\(s\) (cx-dd|cx-mr|br-or)-\d+", out)  # the items are named
    assert "--fresh" in out  # the fix
    assert {c["verdict"] for c in gate_ws.gate_json()["checks"]} == {"error"}  # not graded, not failed
    assert gate_server.stats()["total"] == 27  # and nothing was asked in their place


def test_with_the_site_key_a_forged_unsigned_cache_is_asked_again(gate_ws, gate_server, monkeypatch):
    """A "warm cache" handed over with a model: every answer forged right, with the CRC
    and the plain digest recomputed. Without the site key that is undetectable (and shown
    as UNSIGNED); with the key set, unsigned answers are not trusted and are asked live."""
    gate_server.set_script({"answer_key": gate_ws.answer_key(wrong=gate_ws.ids("Disease Diagnosis"))})
    model = gate_ws.openai(gate_server)
    gate_ws.run(model=model)
    _rewrite_store(gate_ws.path / ".medrcube", "B", forge_digest=True)

    monkeypatch.setenv(signing.KEY_ENV, "the-hospital's-key")
    gate_ws.run(model=model)
    doc = gate_ws.gate_json()
    assert gate_server.stats()["total"] == 54  # all 27 asked again, live
    assert doc["provenance"]["live"] == 27 and doc["provenance"]["stored"] == 0 and doc["provenance"]["signed"]
    assert doc["verdict"] == "NOT QUALIFIED"  # the model's own answers, not the forged ones


def _forge_right_letters(gate_ws, spec: str) -> int:
    """The issue's forged store: every stored answer of `spec` rewritten to the right
    letter, with the plain SHA-256 digest and the CRC recomputed (marked unsigned), as an
    editor who knows the format and the cube would. The rows are matched to their items by
    the store keys the run's own planner makes. Returns the rows forged."""
    from medrcube.cube import load_cube
    from medrcube.models.registry import load_adapter
    from medrcube.run.plan import plan_asks

    cube = load_cube(str(gate_ws.path / "cube" / "cube.jsonl"))
    adapter = load_adapter(spec, cube=cube)
    right = {ask.key: "ABCDEFGH"[ask.item.answer] for ask in plan_asks(cube, fingerprint=adapter.fingerprint,
                                                                        keyed_by_item=adapter.keyed_by_item)}
    conn = sqlite3.connect(gate_ws.path / ".medrcube" / DB_NAME)
    rows = conn.execute(f"SELECT {COLS} FROM responses").fetchall()
    for row in rows:
        key, _, refused, usage, *_rest = row
        text = right[key]
        edited = (key, text, *row[2:])
        model, created, endpoint, run = row[10:14]
        digest = signing.digest(_digest_payload(edited), None)
        crc = _checksum(key, text, refused, usage, row[7], row[9], (model, created, endpoint, run, digest, 0))
        conn.execute("UPDATE responses SET text = ?, checksum = ?, digest = ?, signed = 0 WHERE key = ?",
                     (text, crc, digest, key))
    conn.commit()
    conn.close()
    return len(rows)


def test_a_forged_store_of_a_random_model_is_never_graded_by_default(gate_ws):
    """The issue's second case, under the default profile and no site key: the stored
    answers of --model=random rewritten to the right letters with every plain digest
    recomputed. Authenticated by default, they are not graded: asked again, and said so."""
    gate_ws.run(model="random")
    first = gate_ws.gate_json()
    assert first["verdict"] != "QUALIFIED" and first["provenance"]["signer"] == "user secret"
    assert _forge_right_letters(gate_ws, "random") == 27

    result = gate_ws.run(model="random")
    doc = gate_ws.gate_json()
    assert doc["verdict"] == first["verdict"] != "QUALIFIED" and result.ret != 0
    assert doc["provenance"]["stored"] == 0 and doc["provenance"]["live"] == 27
    assert doc["provenance"]["unsigned_asked_again"] == 27
    assert {c["id"]: c["observed"] for c in doc["checks"]} == {c["id"]: c["observed"] for c in first["checks"]}
    result.stdout.fnmatch_lines(["27 stored answer(s) bound by a plain digest only * were not graded and were "
                                 "asked again*"])


def test_an_edited_run_directory_is_refused_by_report_and_verify(gate_ws):
    gate_ws.run(model=gate_ws.replay("weak.jsonl", wrong=gate_ws.ids("Disease Diagnosis")))
    run_dir = gate_ws.run_dirs()[-1]

    def cli(*args: str):
        return gate_ws.pytester.run(sys.executable, "-m", "medrcube.cli", *args)

    ok = cli("verify", str(run_dir))
    assert ok.ret == 0, ok.stdout.str()
    ok.stdout.fnmatch_lines(["*: verified, * files sealed, UNSIGNED*"])
    doc = json.loads((run_dir / "gate.json").read_text(encoding="utf-8"))
    doc["verdict"], doc["passed"] = "QUALIFIED", True
    (run_dir / "gate.json").write_text(json.dumps(doc), encoding="utf-8")
    bad = cli("verify", str(run_dir))
    assert bad.ret == 1
    bad.stdout.fnmatch_lines(["*FAILED verification*", "  gate.json: changed after sealing*"])
    report = cli("report", str(run_dir), "--out", "board", "--no-plots")
    assert report.ret == 1 and "gate.json: changed after sealing" in report.stderr.str()


def test_verify_fails_on_an_edited_page_and_on_an_added_file(gate_ws):
    """The issue's third case: "NOT QUALIFIED" changed to "QUALIFIED" in report.html, and a
    file added to the run directory. The page has its own seal, and its verdict is checked
    against gate.json's; every file of the directory is under one seal or the other."""
    gate_ws.run(model=gate_ws.replay("weak.jsonl", wrong=gate_ws.ids("Disease Diagnosis")))
    run_dir = gate_ws.run_dirs()[-1]

    def verify():
        return gate_ws.pytester.run(sys.executable, "-m", "medrcube.cli", "verify", str(run_dir))

    ok = verify()
    assert ok.ret == 0, ok.stdout.str()
    ok.stdout.fnmatch_lines(["*: verified, * files sealed, UNSIGNED*; report.html and * figure(s) under the page's seal"])
    page = run_dir / "report.html"
    original = page.read_text(encoding="utf-8")
    assert '<div class="word">NOT QUALIFIED</div>' in original
    page.write_text(original.replace('<div class="word">NOT QUALIFIED</div>', '<div class="word">QUALIFIED</div>'),
                    encoding="utf-8")
    bad = verify()
    assert bad.ret == 1
    bad.stdout.fnmatch_lines(["*FAILED verification*"])
    out = bad.stdout.str()
    assert "report.html: shows the verdict QUALIFIED, gate.json says NOT QUALIFIED" in out
    assert "report.html: changed after the page was sealed" in out

    page.write_text(original, encoding="utf-8")
    assert verify().ret == 0
    (run_dir / "notes.txt").write_text("added later\n", encoding="utf-8")
    (run_dir / "plots" / "extra.png").write_bytes(b"\x89PNG not a figure of this run")
    added = verify()
    assert added.ret == 1
    assert "notes.txt: added after sealing" in added.stdout.str()
    assert "plots/extra.png: added after the page was sealed" in added.stdout.str()

    (run_dir / "notes.txt").unlink()
    (run_dir / "plots" / "extra.png").unlink()
    (run_dir / "report.seal.json").unlink()  # a page drawn by hand, with no seal
    unsealed = verify()
    assert unsealed.ret == 1 and "report.html: not sealed" in unsealed.stdout.str()


def test_a_forged_baseline_is_a_usage_error(gate_ws, gate_server):
    """The issue's second case: an edited, all-wrong --baseline run would make a random
    candidate pass regression/overall. It fails verification: a usage error naming the file."""
    gate_ws.run(model=gate_ws.replay("good.jsonl"))
    baseline = gate_ws.run_dirs()[-1]
    rows = [json.loads(line) for line in (baseline / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    for row in rows:
        row["outcome"], row["extracted"] = "wrong", (row["answer"] + 1) % row["n_options"]
    (baseline / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    result = gate_ws.run(f"--baseline={baseline}", model="random")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert f"--baseline={baseline}" in err and "fails verification" in err
    assert "results.jsonl: changed after sealing" in err


def test_a_baseline_of_another_cube_names_both_fingerprints(gate_ws):
    gate_ws.run(model=gate_ws.replay("good.jsonl"))
    baseline = gate_ws.run_dirs()[-1]
    before = _run_json(baseline)["cube_fingerprint"]
    items = [dict(it) for it in gate_ws.items]
    items[0]["question"] = "Another question with the same id?"
    (gate_ws.path / "cube" / "cube.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")

    result = gate_ws.run(f"--baseline={baseline}", model="random")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "another cube" in err and before in err
    (after,) = [w.rstrip(":;,") for w in err.split() if len(w.rstrip(":;,")) == len(before) and w.rstrip(":;,") != before
                and all(ch in "0123456789abcdef" for ch in w.rstrip(":;,"))]
    assert after != before


@pytest.mark.parametrize("value", ["reports/20260101T000000Z-missing", "./typo-run"])
def test_a_mistyped_baseline_path_is_a_usage_error_and_no_request_is_sent(gate_ws, gate_server, monkeypatch, value):
    """The issue's fourth case: with OPENAI_API_KEY and OPENAI_BASE_URL set, as in CI, a
    missing baseline directory was taken for a model name and asked 1,064 times."""
    monkeypatch.setenv("OPENAI_BASE_URL", gate_server.base_url)
    result = gate_ws.run(f"--baseline={value}", model="random")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--baseline={value}: no such run directory" in result.stderr.str()
    assert gate_server.stats()["total"] == 0


def test_a_baseline_that_is_a_file_is_a_usage_error(gate_ws):
    (gate_ws.path / "baseline.txt").write_text("not a run\n", encoding="utf-8")
    result = gate_ws.run("--baseline=baseline.txt", model="random")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "is a file" in result.stderr.str()


def test_the_one_line_policy_is_refused(gate_ws):
    """The issue's third case: `overall: {bound: 0.01, above_chance: 0}` qualified a random model."""
    (gate_ws.path / "t.yaml").write_text("version: 1\noverall: {bound: 0.01, above_chance: 0}\n", encoding="utf-8")
    result = gate_ws.pytester.runpytest(*[a if a != "--thresholds=thresholds.yaml" else "--thresholds=t.yaml"
                                          for a in gate_ws.args(model="random")])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "overall: bound 0.01 (key overall) is at or below chance" in err and "at_chance: true" in err


def test_a_policy_allowed_at_chance_is_on_record(gate_ws):
    """Allowed explicitly, the same policy runs, and every output says how it differs
    from the shipped default: gate.json, JUnit, Allure and the summary's verdict block."""
    (gate_ws.path / "t.yaml").write_text("version: 1\noverall: {bound: 0.01, above_chance: 0, at_chance: true}\n",
                                         encoding="utf-8")
    args = [a if a != "--thresholds=thresholds.yaml" else "--thresholds=t.yaml" for a in gate_ws.args(model="random")]
    result = gate_ws.pytester.runpytest(*args, "--junitxml=junit.xml", "--alluredir=allure")
    policy = gate_ws.gate_json()["policy"]
    assert policy["differs"] is True and policy["at_chance"] == ["overall"]
    assert policy["digest"] == "sha256:" + __import__("hashlib").sha256((gate_ws.path / "t.yaml").read_bytes()).hexdigest()
    changes = {(d["change"], d["check"]): d for d in policy["differences"]}
    assert changes[("bound", "overall")]["default"] == 0.5 and changes[("bound", "overall")]["value"] == 0.01
    assert changes[("above_chance", "overall")]["value"] == 0.0
    assert ("removed", "Chest/X-Ray/Disease Diagnosis") in changes
    summary = policy["summary"]
    assert summary.startswith("policy differs from the shipped default: ") and "cell checks removed" in summary
    assert "overall bound 0.5 -> 0.01" in summary
    result.stdout.fnmatch_lines(["policy differs from the shipped default: *overall bound 0.5 -> 0.01*",
                                 "bounds at or below chance, allowed by `at_chance: true`: overall"])
    junit = (gate_ws.path / "junit.xml").read_text(encoding="utf-8")
    assert f'name="medrcube_policy_digest" value="{policy["digest"]}"' in junit
    assert 'name="medrcube_policy_differs" value="true"' in junit
    env = (gate_ws.path / "allure" / "environment.properties").read_text(encoding="utf-8")
    assert f"policy.digest={policy['digest']}" in env and "policy.differences=policy differs" in env
    run_dir = gate_ws.run_dirs()[-1]
    assert (run_dir / "thresholds.yaml").read_bytes() == (gate_ws.path / "t.yaml").read_bytes()  # on record
    seal = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert seal["identity"]["policy_digest"] == policy["digest"] and "thresholds.yaml" in seal["files"]


def test_the_deployment_profile_asks_every_item_live(gate_ws, gate_server):
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    (gate_ws.path / "thresholds.yaml").write_text(DEPLOYMENT, encoding="utf-8")
    model = gate_ws.openai(gate_server)
    gate_ws.run(model=model)
    gate_ws.run("--profile=deployment", model=model)
    doc = gate_ws.gate_json()
    assert gate_server.stats()["total"] == 54 and doc["fresh"] is True and doc["provenance"]["stored"] == 0
    gate_ws.run("--profile=deployment", "--no-fresh", model=model)
    assert gate_server.stats()["total"] == 54 and gate_ws.gate_json()["provenance"]["stored"] == 27


def test_the_workers_of_one_run_share_its_token(gate_ws, gate_server):
    """With pytest-xdist every worker asks its shard and reads the others' from the store:
    all of them are answers of this run (one token), none "from the store"."""
    gate_server.set_script({"answer_key": gate_ws.answer_key()})
    result = gate_ws.run_subprocess("-n", "2", "--fresh", model=gate_ws.openai(gate_server))
    assert "2 workers" in result.stdout.str() or "gw1" in result.stdout.str()
    provenance = gate_ws.gate_json()["provenance"]
    assert provenance["live"] == 27 and provenance["stored"] == 0 and provenance["from_runs"] == {}
    assert gate_server.stats()["total"] == 27


def test_another_model_answering_is_on_record_and_an_error_under_deployment(gate_ws, gate_server):
    """The issue's fourth case: an endpoint that lists the model asked for and reports
    another one for every answer. The served names are part of the sealed identity, the
    verdict block says so in one line, and the deployment profile grades nothing."""
    gate_server.set_script({"answer_key": gate_ws.answer_key(), "models": ["test-model"],
                            "model": "gpt-4o-mini-cheap"})
    model = gate_ws.openai(gate_server)
    result = gate_ws.run(model=model)
    doc = gate_ws.gate_json()
    assert doc["served_model_mismatches"] == {"gpt-4o-mini-cheap": 27} and doc["requested_model"] == "test-model"
    result.stdout.fnmatch_lines(["ANOTHER MODEL ANSWERED: 27 answer(s) name 'gpt-4o-mini-cheap', not the requested "
                                 "'test-model' (served_models in run.json); the verdict is about whatever answered*"])
    seal = json.loads((gate_ws.run_dirs()[-1] / "manifest.json").read_text(encoding="utf-8"))
    assert seal["identity"]["model"]["served_answers"] == {"gpt-4o-mini-cheap": 27}
    assert seal["identity"]["model"]["served_mismatches"] == {"gpt-4o-mini-cheap": 27}
    assert "ANOTHER MODEL ANSWERED" in (gate_ws.run_dirs()[-1] / "report.html").read_text(encoding="utf-8")

    (gate_ws.path / "thresholds.yaml").write_text(DEPLOYMENT, encoding="utf-8")
    strict = gate_ws.run("--profile=deployment", "--new-ledger", model=model)
    doc = gate_ws.gate_json()
    assert strict.ret == 11 and doc["verdict"] == "UNDECIDED"
    assert {c["verdict"] for c in doc["checks"]} == {"error"}
    assert all("another model answered" in c["message"] for c in doc["checks"])
    strict.stdout.fnmatch_lines(["ANOTHER MODEL ANSWERED: *; the deployment profile treats this as an error: no check "
                                 "is graded"])


def test_the_shipped_policy_is_not_built_again_to_compare_with_itself(tmp_path: Path) -> None:
    """gate.json's policy block: a run on the shipped file (or a byte-for-byte copy of it
    elsewhere) differs from the shipped default in nothing, so the default's checks are not
    built a second time to find that out; a file one byte apart is built and compared."""
    from medrcube.plugin.evidence import policy_record
    from medrcube.plugin.options import packaged_thresholds

    shipped = packaged_thresholds()
    assert shipped is not None
    copy = tmp_path / "thresholds.yaml"
    copy.write_bytes(Path(shipped).read_bytes())
    built: list[str | None] = []

    def build_default(profile: str | None) -> list:
        built.append(profile)
        return []

    record = policy_record(copy, "screening", [], build_default, [])
    assert built == [] and record["differs"] is False and record["differences"] == []
    assert record["digest"] == record["default_digest"] and record["file"] == str(copy)
    copy.write_bytes(copy.read_bytes() + b"# edited\n")
    record = policy_record(copy, "screening", [], build_default, [])
    assert built == ["screening"] and record["digest"] != record["default_digest"]
