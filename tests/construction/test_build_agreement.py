"""Agreement with a clinician: Cohen's kappa and the Table 5 layout, against values computed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from medrcube.construction.stages.agreement import (
    AgreementError,
    agreement,
    cohen_kappa,
    main,
    read_judgments_csv,
    read_review_jsonl,
)
from medrcube.construction.stages.review import CODES

P, F = True, False
# Ten items. Model and clinician differ on 1.1 for items 8 and 10, and on 1.3 for item 9;
# every other principle is "pass" for both.
MODEL_11 = [P, P, P, P, P, P, P, P, F, F]
EXPERT_11 = [P, P, P, P, P, P, P, F, F, P]
MODEL_13 = [P, P, P, P, P, P, P, P, P, F]
EXPERT_13 = [P, P, P, P, P, P, P, P, F, F]


def _table() -> tuple[dict, dict]:
    model, expert = {}, {}
    for i in range(10):
        item = f"it-{i + 1:02d}"
        model[item] = {c: True for c in CODES} | {"1.1": MODEL_11[i], "1.3": MODEL_13[i]}
        expert[item] = {c: True for c in CODES} | {"1.1": EXPERT_11[i], "1.3": EXPERT_13[i]}
    return model, expert


def test_kappa_matches_hand_computed_values() -> None:
    # 1.1: po = 8/10; model 8 P / 2 F, expert 8 P / 2 F; pe = (8*8 + 2*2)/100 = 0.68; kappa = 0.12/0.32
    assert cohen_kappa(MODEL_11, EXPERT_11) == pytest.approx(0.375)
    # 1.3: po = 9/10; model 9/1, expert 8/2; pe = (9*8 + 1*2)/100 = 0.74; kappa = 0.16/0.26
    assert cohen_kappa(MODEL_13, EXPERT_13) == pytest.approx(0.16 / 0.26)
    assert cohen_kappa([P, F, P, F], [F, P, F, P]) == pytest.approx(-1.0)  # po 0, pe 0.5
    assert cohen_kappa(["a", "b", "c"], ["a", "b", "c"]) == pytest.approx(1.0)
    assert cohen_kappa([P, P], [P, P]) is None  # chance agreement 1: undefined
    assert cohen_kappa([], []) is None
    with pytest.raises(ValueError, match="one pair per item"):
        cohen_kappa([P], [P, F])


def test_table_5_rows_and_the_sample_level() -> None:
    table = agreement(*_table())
    rows = {r.key: r for r in table.rows}
    assert [r.key for r in table.rows] == list(CODES)
    assert (rows["1.1"].n, rows["1.1"].agree, rows["1.1"].agreement) == (10, 8, 0.8)
    assert rows["1.1"].kappa == pytest.approx(0.375)
    assert (rows["1.3"].agree, rows["1.3"].agreement) == (9, 0.9) and rows["1.3"].kappa == pytest.approx(0.6153846)
    assert (rows["2.2"].agree, rows["2.2"].agreement, rows["2.2"].kappa) == (10, 1.0, None)
    # Sample level: items 8, 9 and 10 differ somewhere: 7/10 equal. Accept (all pass): model
    # accepts items 1-8, clinician 1-7: po = 0.9, pe = (8*7 + 2*3)/100 = 0.62, kappa = 0.28/0.38.
    assert (table.sample.n, table.sample.agree, table.sample.agreement) == (10, 7, 0.7)
    assert table.sample.kappa == pytest.approx(0.28 / 0.38)
    md = table.to_markdown()
    assert md.splitlines()[0] == "| Principle | n | Agreement | Cohen's kappa |"
    assert "| 1.1 Clinical and anatomical accuracy | 10 | 80.0% | 0.375 |" in md
    assert "| 2.2 Mutual exclusivity | 10 | 100.0% | n/a |" in md
    assert "| Sample level (all judgments equal) | 10 | 70.0% | 0.737 |" in md


def test_items_judged_by_one_rater_only_are_counted_apart() -> None:
    model, expert = _table()
    model["only-model"] = {c: True for c in CODES}
    expert["only-expert"] = {c: False for c in CODES}
    table = agreement(model, expert)
    assert (table.only_model, table.only_expert, table.sample.n) == (1, 1, 10)


def test_wide_and_long_csv_layouts_read_the_same(tmp_path: Path) -> None:
    model, expert = _table()
    word = {True: "pass", False: "fail"}
    wide = tmp_path / "wide.csv"
    wide.write_text("item_id," + ",".join(CODES) + "\n" + "".join(
        f"{i}," + ",".join(word[j[c]] for c in CODES) + "\n" for i, j in expert.items()), encoding="utf-8")  # fmt: skip
    long = tmp_path / "long.csv"
    long.write_text("item_id,principle,judgment\n" + "".join(
        f"{i},{c},{'yes' if j[c] else 'no'}\n" for i, j in expert.items() for c in CODES), encoding="utf-8")  # fmt: skip
    assert read_judgments_csv(wide) == read_judgments_csv(long) == expert


@pytest.mark.parametrize(
    "text, message",
    [
        ("id_x,1.1\na,pass\n", "no 'item_id' column"),
        ("item_id,notes\na,pass\n", "neither the wide layout"),
        ("item_id,1.1\na,maybe\n", r"line 2 column '1.1': judgment 'maybe' is neither pass nor fail"),
        ("item_id,principle,judgment\na,1.5,pass\n", r"line 2 column 'principle' is '1.5' \(did you mean"),
        ("item_id,principle,judgment\na,1.1,pass\na,1.1,fail\n", "judged twice"),
        ("item_id,1.1\na,pass\na,fail\n", "appears twice"),
    ],
)
def test_bad_judgment_files_say_where_and_how_to_fix(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "j.csv"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(AgreementError, match=message):
        read_judgments_csv(p)


def test_the_command_line_prints_the_table(tmp_path: Path, capsys) -> None:
    import json

    model, expert = _table()
    review = tmp_path / "review.jsonl"
    review.write_text("".join(json.dumps({"id": i, "status": "pass", "verdicts": {c: "pass" if v else "fail" for c, v in j.items()}}) + "\n"
                              for i, j in model.items()), encoding="utf-8")  # fmt: skip
    assert read_review_jsonl(review) == model
    experts = tmp_path / "e.csv"
    experts.write_text("item_id," + ",".join(CODES) + "\n" + "".join(
        f"{i}," + ",".join("1" if j[c] else "0" for c in CODES) + "\n" for i, j in expert.items()), encoding="utf-8")  # fmt: skip
    assert main([str(experts), str(review)]) == 0
    assert "| 1.3 Unambiguous phrasing | 10 | 90.0% | 0.615 |" in capsys.readouterr().out
