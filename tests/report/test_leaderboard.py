"""The leaderboard on synthetic runs of known structure: Table 1 values and marks, the cell
clustering (two groups of cells correlated within, not across), credibility and the
shortcut/accuracy correlation against hand-computed values, determinism, refusal of
mixed runs."""

from __future__ import annotations

import csv
import io
import math
import random
from pathlib import Path

import numpy as np
import pytest
from report_builders import counts_records, rec, write_run
from scipy import stats

from medrcube.cli import main
from medrcube.metrics.accuracy import accuracy
from medrcube.records import Outcome
from medrcube.report.leaderboard import MixedRunsError, leaderboard
from medrcube.report.readers import read_run

# Two groups of cells. Models' skills on group 1 and group 2 follow two orthogonal
# +/-1 patterns (zero mean, zero correlation), so cells correlate within a group only.
GROUP1 = [("Brain", "MRI", "Modality Recognition"), ("Brain", "MRI", "Imaging Protocol Recognition"),
          ("Brain", "MRI", "Disease Diagnosis"), ("Brain", "CT", "Organ Recognition"),
          ("Brain", "CT", "Disease Diagnosis")]
GROUP2 = [("Chest", "X-Ray", "Modality Recognition"), ("Chest", "X-Ray", "View Recognition"),
          ("Chest", "X-Ray", "Disease Diagnosis"), ("Lungs", "CT", "Organ Recognition"),
          ("Lungs", "CT", "Abnormality Diagnosis")]
H1 = [1, 1, 1, 1, -1, -1, -1, -1]
H2 = [1, 1, -1, -1, 1, 1, -1, -1]
N_PER_CELL = 60


def _cell_correct(model: int, cell_index: int, skill: float, rng: random.Random) -> int:
    return max(0, min(N_PER_CELL, round(N_PER_CELL * skill) + rng.randint(-2, 2)))


@pytest.fixture(scope="module")
def grouped_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict[str, dict[tuple, int]]]:
    """8 models; per model and cell, N_PER_CELL items of which a known number are right."""
    root = tmp_path_factory.mktemp("grouped")
    rng = random.Random(7)
    dirs, truth = [], {}
    for m in range(8):
        name = f"model-{m}"
        records, correct = [], {}
        for g, (cells, pattern) in enumerate(((GROUP1, H1), (GROUP2, H2))):
            skill = 0.5 + 0.3 * pattern[m]
            for ci, cell in enumerate(cells):
                k = _cell_correct(m, ci, skill, rng)
                correct[cell] = k
                records += counts_records(f"g{g}c{ci}", cell, N_PER_CELL, k)
        truth[name] = correct
        dirs.append(write_run(root, name, records))
    return dirs, truth


def test_clustering_recovers_the_two_groups_of_cells(grouped_runs, tmp_path: Path) -> None:
    dirs, truth = grouped_runs
    result = leaderboard(dirs, tmp_path / "lb", plots=False)
    cc = result.correlation
    assert cc is not None
    clusters = cc.clusters(2)
    assert len({clusters[c] for c in GROUP1}) == 1
    assert len({clusters[c] for c in GROUP2}) == 1
    assert clusters[GROUP1[0]] != clusters[GROUP2[0]]
    # The dendrogram order keeps each group together (Figure 3a reads as two blocks).
    positions = {c: i for i, c in enumerate(cc.clustered)}
    g1 = sorted(positions[c] for c in GROUP1)
    assert g1 == list(range(g1[0], g1[0] + len(GROUP1)))
    # Anatomical order (Figure 3b): Brain before Chest before Lungs, MRI before CT... as in the taxonomy.
    assert [c[0] for c in cc.anatomical] == ["Brain"] * 5 + ["Chest"] * 3 + ["Lungs"] * 2
    assert cc.anatomical == [GROUP1[3], GROUP1[4], GROUP1[0], GROUP1[1], GROUP1[2], *GROUP2]
    # The correlation of two cells is Pearson's r of their accuracies across the 8 models.
    models = sorted(truth)
    for a, b in ((GROUP1[0], GROUP1[2]), (GROUP1[1], GROUP2[3])):
        xa = np.array([truth[m][a] / N_PER_CELL for m in models])
        xb = np.array([truth[m][b] / N_PER_CELL for m in models])
        r = ((xa - xa.mean()) * (xb - xb.mean())).sum() / math.sqrt(((xa - xa.mean()) ** 2).sum() * ((xb - xb.mean()) ** 2).sum())
        assert cc.corr.at[a, b] == pytest.approx(r, abs=1e-12)
    assert cc.corr.at[GROUP1[0], GROUP1[2]] > 0.9
    assert abs(cc.corr.at[GROUP1[1], GROUP2[3]]) < 0.5
    # The CSV holds the same matrix in dendrogram order.
    rows = list(csv.reader(io.StringIO((tmp_path / "lb" / "cell_correlation.csv").read_text())))
    assert rows[0][1:] == ["/".join(c) for c in cc.clustered]
    assert float(rows[1][1]) == pytest.approx(1.0)


def test_table1_values_ranks_and_layout(grouped_runs, tmp_path: Path) -> None:
    dirs, truth = grouped_runs
    result = leaderboard(dirs, tmp_path / "lb", plots=False)
    headers = list(result.table.columns)
    assert headers == ["Overall", "MR", "VR", "IPR", "OR", "RG", "DD", "AD", "SG", "CT", "X-Ray", "MRI", "US",
                       "Brain", "Chest", "Heart", "Lungs", "Breast"]
    # Every value is the metrics package's accuracy over that column's records.
    for d in dirs[:3]:
        run = read_run(d)
        label = run.label
        std = run.of_variant("standard")
        assert result.table.at[label, "Overall"] == round(100 * accuracy(std).acc, 2)
        dd = [r for r in std if r.task == "Disease Diagnosis"]
        assert result.table.at[label, "DD"] == round(100 * accuracy(dd).acc, 2)
        assert result.counts.at[label, "DD"] == len(dd)
        brain = [r for r in std if r.part == "Brain"]
        assert result.table.at[label, "Brain"] == round(100 * accuracy(brain).acc, 2)
    assert math.isnan(result.table.at["model-0", "SG"])  # no Severity Grading item at all
    # Rows are sorted by Overall, best first.
    overall = [result.table.at[m, "Overall"] for m in result.order]
    assert overall == sorted(overall, reverse=True)
    # Best (rank 1) bold and second best (rank 2) underlined, in Markdown and HTML.
    best = result.table["Brain"].max()
    second = sorted(set(result.table["Brain"].dropna()), reverse=True)[1]
    md = (tmp_path / "lb" / "leaderboard.md").read_text()
    assert f"**{best:.2f}**" in md and f"<ins>{second:.2f}</ins>" in md
    page = (tmp_path / "lb" / "leaderboard.html").read_text()
    assert f"<b>{best:.2f}</b>" in page and f"<u>{second:.2f}</u>" in page
    # The CSV marks them in <column>_rank.
    table = list(csv.DictReader(io.StringIO((tmp_path / "lb" / "leaderboard.csv").read_text())))
    for row in table:
        v = float(row["Brain"])
        expected = 1 if v == best else 2 if v == second else None
        assert int(row["Brain_rank"]) == expected if expected else int(row["Brain_rank"]) >= 3
        assert row["SG"] == "" and row["SG_rank"] == ""


@pytest.fixture(scope="module")
def credibility_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict[str, tuple[int, int, int, int]]]:
    """Five models on 100 images, each image with one Disease Diagnosis (high-level) and one
    Organ Recognition (lower-level) item; a model's (A, B, C, D) image counts are known.
    model-many-D gets most diagnoses right while failing the perception."""
    groups = {
        "m0": (30, 10, 55, 5),
        "m1": (35, 10, 40, 15),
        "m2": (40, 10, 25, 25),
        "m3": (45, 5, 20, 30),
        "model-many-D": (15, 5, 10, 70),
    }
    root = tmp_path_factory.mktemp("cred")
    dirs = []
    for name, (a, b, c, d) in groups.items():
        outcomes = [(True, True)] * a + [(True, False)] * b + [(False, False)] * c + [(False, True)] * d
        records = []
        for i, (low_ok, high_ok) in enumerate(outcomes):
            image = f"img/{i:03d}.png"
            records.append(rec(f"dd-{i:03d}", ("Chest", "X-Ray", "Disease Diagnosis"), correct=high_ok, image=image))
            records.append(rec(f"or-{i:03d}", ("Chest", "X-Ray", "Organ Recognition"), correct=low_ok, image=image))
        dirs.append(write_run(root, name, records))
    return dirs, groups


def test_credibility_and_shortcut_correlation_match_hand_computed_values(credibility_runs, tmp_path: Path) -> None:
    dirs, groups = credibility_runs
    result = leaderboard(dirs, tmp_path / "lb", plots=False)
    cred = result.credibility
    for name, (a, b, c, d) in groups.items():
        assert [int(cred.at[name, g]) for g in "ABCD"] == [a, b, c, d]
        assert cred.at[name, "luck_rate"] == pytest.approx(d / (a + d))
        assert cred.at[name, "rationality"] == pytest.approx(1 - d / (a + d))
        assert cred.at[name, "shortcut_prob"] == pytest.approx(d / (c + d))
        assert cred.at[name, "high_level_acc"] == pytest.approx((a + d) / 100)
    assert cred.at["model-many-D", "shortcut_prob"] == pytest.approx(70 / 80)

    # Pearson r by its definition, p from the t distribution with n - 2 degrees of freedom.
    x = np.array([(a + d) / 100 for a, b, c, d in groups.values()])
    y = np.array([d / (c + d) for a, b, c, d in groups.values()])
    r = float(((x - x.mean()) * (y - y.mean())).sum() / math.sqrt(((x - x.mean()) ** 2).sum() * ((y - y.mean()) ** 2).sum()))
    n = len(x)
    t = r * math.sqrt((n - 2) / (1 - r * r))
    p = float(2 * stats.t.sf(abs(t), n - 2))
    assert result.shortcut is not None
    assert result.shortcut.n == 5
    assert result.shortcut.r == pytest.approx(r, abs=1e-12)
    assert result.shortcut.p == pytest.approx(p, rel=1e-9)
    md = (tmp_path / "lb" / "credibility.md").read_text()
    assert f"Pearson r = {r:.3f}" in md
    rows = {row["model"]: row for row in csv.DictReader(io.StringIO((tmp_path / "lb" / "credibility.csv").read_text()))}
    assert rows["model-many-D"]["D"] == "70" and rows["model-many-D"]["shortcut_prob"] == f"{70 / 80:.4f}"


def test_the_figures_are_written_and_embedded(credibility_runs, grouped_runs, tmp_path: Path) -> None:
    result = leaderboard(credibility_runs[0], tmp_path / "cred")
    for name in ("credibility_quadrant", "shortcut_vs_accuracy"):
        assert (tmp_path / "cred" / "plots" / f"{name}.png").stat().st_size > 1000
        assert (tmp_path / "cred" / "plots" / f"{name}.svg").is_file()
    page = (tmp_path / "cred" / "leaderboard.html").read_text()
    assert page.count('src="data:image/png;base64,') >= 2
    assert "http://" not in page and "https://" not in page
    assert f"{result.shortcut.r:.3f}" in page
    assert "with the least-squares line (r = " in page  # the caption says what was computed

    # Two models: no correlation, and the caption under the scatter says so.
    leaderboard(credibility_runs[0][:2], tmp_path / "two")
    two = (tmp_path / "two" / "leaderboard.html").read_text()
    assert "not computed" not in two
    assert "2 models with both values; the correlation (Pearson r, p) needs at least 3" in two
    assert "points only, no correlation computed" in two

    leaderboard(grouped_runs[0], tmp_path / "grouped")
    for name in ("correlation_clustered", "correlation_anatomical"):
        assert (tmp_path / "grouped" / "plots" / f"{name}.png").stat().st_size > 1000


def test_same_runs_give_byte_identical_csv_and_markdown(credibility_runs, tmp_path: Path) -> None:
    dirs, _ = credibility_runs
    leaderboard(dirs, tmp_path / "one", plots=False)
    leaderboard(list(reversed(dirs)), tmp_path / "two", plots=False)
    names = sorted(p.name for p in (tmp_path / "one").iterdir() if p.suffix in (".csv", ".md"))
    assert {"leaderboard.csv", "leaderboard.md", "credibility.csv", "credibility.md", "cell_accuracy.csv"} <= set(names)
    for name in names:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name


def test_table4_shows_blind_accuracy_and_the_drop(tmp_path: Path) -> None:
    cell = ("Chest", "X-Ray", "Disease Diagnosis")
    std = counts_records("q", cell, 40, 30)  # 75% with the image
    blind = [rec(f"q-{i:03d}", cell, correct=i < 10, variant="blind") for i in range(40)]  # 25% without
    a = write_run(tmp_path, "with-blind", std + blind)
    b = write_run(tmp_path, "other", counts_records("q", cell, 40, 20))
    # A blind-only run of a third model, paired by model fingerprint with its standard run.
    c_std = write_run(tmp_path, "third-std", counts_records("q", cell, 40, 36), model="third", fingerprint="fp3")
    c_blind = write_run(tmp_path, "third-blind", [rec(f"q-{i:03d}", cell, correct=i < 4, variant="blind") for i in range(40)],
                        model="third", fingerprint="fp3")
    result = leaderboard([a, b, c_std, c_blind], tmp_path / "lb", plots=False)
    assert result.text_only is not None
    assert result.text_only.at["with-blind", "Overall"] == 25.0
    assert result.text_only_drops["with-blind"] == pytest.approx(0.5)
    assert result.text_only.at["third", "Overall"] == 10.0
    assert result.text_only_drops["third"] == pytest.approx(0.8)
    assert "other" not in result.text_only.index
    md = (tmp_path / "lb" / "text_only.md").read_text()
    assert "| with-blind | 25.00 (-50.00) |" in md
    assert "| third | 10.00 (-80.00) |" in md
    assert list(result.table.index).count("third") == 1  # the blind-only run has no Table 1 row


def test_runs_on_different_cubes_or_templates_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cell = ("Chest", "X-Ray", "Disease Diagnosis")
    a = write_run(tmp_path, "a", counts_records("q", cell, 10, 5), cube_fingerprint="cube-A")
    b = write_run(tmp_path, "b", counts_records("q", cell, 10, 6), cube_fingerprint="cube-B")
    c = write_run(tmp_path, "c", counts_records("q", cell, 10, 7), template="reasoning")
    with pytest.raises(MixedRunsError) as e:
        leaderboard([a, b], tmp_path / "lb")
    msg = str(e.value)
    assert "cube fingerprint" in msg and str(a) in msg and str(b) in msg and "cube-A" in msg and "cube-B" in msg
    with pytest.raises(MixedRunsError) as e:
        leaderboard([a, c], tmp_path / "lb")
    assert "prompt template" in str(e.value) and "reasoning" in str(e.value) and str(c) in str(e.value)
    assert not (tmp_path / "lb" / "leaderboard.csv").exists()
    # The command says the same and exits 1.
    assert main(["report", str(a), str(b), "--out", str(tmp_path / "cli")]) == 1
    err = capsys.readouterr().err
    assert "cube fingerprint" in err and str(b) in err


def test_errors_and_unavailable_items_are_not_counted_as_wrong(tmp_path: Path) -> None:
    cell = ("Chest", "X-Ray", "Disease Diagnosis")
    records = counts_records("q", cell, 10, 5) + [
        rec("e1", cell, outcome=Outcome.ERROR), rec("u1", cell, outcome=Outcome.UNAVAILABLE),
    ]
    other = counts_records("q", cell, 10, 2) + [rec("e1", cell), rec("u1", cell, correct=False)]
    result = leaderboard([write_run(tmp_path, "a", records), write_run(tmp_path, "b", other)], tmp_path / "lb",
                         plots=False)
    assert result.table.at["a", "Overall"] == 50.0 and result.counts.at["a", "Overall"] == 10
    assert result.table.at["b", "Overall"] == pytest.approx(25.0)


def test_the_report_command_writes_the_leaderboard_and_each_run_page(
    credibility_runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs, _ = credibility_runs
    runs = [tmp_path / d.name for d in dirs[:2]]
    for src, dst in zip(dirs[:2], runs, strict=True):
        dst.mkdir()
        for f in src.iterdir():
            if f.is_file() and f.suffix in (".json", ".jsonl"):
                (dst / f.name).write_bytes(f.read_bytes())
    out = tmp_path / "board"
    assert main(["report", *map(str, runs), "--out", str(out), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert str(out / "leaderboard.html") in printed and "m0: overall" in printed
    for name in ("leaderboard.csv", "leaderboard.md", "credibility.csv", "analysis.json", "leaderboard.html"):
        assert (out / name).is_file(), name
    assert not (out / "plots").exists()
    for run in runs:
        page = (run / "report.html").read_text(encoding="utf-8")
        assert "NO GATE RUN" in page and "Credibility" in page
