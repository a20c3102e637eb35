"""A site check is decided by the gate: the built-in checks' clustered evidence, in their family."""

from __future__ import annotations

from medrcube.gate.checks import Check, CheckKind
from medrcube.gate.evaluate import decide_joining, evaluate_gate
from medrcube.gate.evidence import collect, collect_site
from medrcube.gate.verdict import Status
from medrcube.records import GradedRecord, Outcome


def _record(i: int, image: int, ok: bool) -> GradedRecord:
    return GradedRecord(
        item_id=f"i{i}", dataset="d", task="Disease Diagnosis", modality="X-Ray", part="Chest", image=f"img{image}",
        image_digest=None, variant="standard", rotation=0, answer=0, n_options=4, prompt_hash="h",
        response="A" if ok else "B", extracted=0 if ok else 1, how="bare_letter",
        outcome=Outcome.CORRECT if ok else Outcome.WRONG)


def _check(cid: str, kind: CheckKind, required: bool = True) -> Check:
    return Check(id=cid, kind=kind, metric="accuracy" if kind is not CheckKind.SITE else "proportion", part=None,
                 modality=None, task=None, bound=0.6, rule="lower_bound", confidence=0.95, min_n=10,
                 max_error_rate=0.05, required=required)


# 200 images of 3 items each (the cluster-robust interval) and 12 images of 10 (few images:
# the few-images one); whole images right or wrong, so clustering matters.
MANY = [_record(3 * j + k, j, j % 5 != 0) for j in range(200) for k in range(3)]
FEW = [_record(10 * j + k, j, j % 4 != 0) for j in range(12) for k in range(10)]


def test_a_site_check_on_items_sharing_images_gets_the_same_interval_as_a_built_in_check() -> None:
    for records in (MANY, FEW):
        built_in = collect(_check("overall", CheckKind.OVERALL), records)
        site = collect_site(_check("site/x", CheckKind.SITE), records, lambda r: r.outcome is Outcome.CORRECT)
        assert site.interval == built_in.interval and site.method == built_in.method
        assert site.criteria[0].p_pass == built_in.criteria[0].p_pass
        assert site.interval is not None and site.interval[1] - site.interval[0] > 0.1  # images, not items
    assert "ICC raised" in collect_site(_check("s", CheckKind.SITE), FEW, lambda r: r.correct).method


def test_a_site_check_joins_the_holm_family_of_the_built_in_checks() -> None:
    checks = [_check(f"c{i}", CheckKind.OVERALL) for i in range(4)]
    family = evaluate_gate(checks, MANY).evidences
    # 0.8 observed against a bound of 0.95: decisively missed, Holm-adjusted over 4 + 1 checks.
    site = Check(id="site/x", kind=CheckKind.SITE, metric="proportion", part=None, modality=None, task=None,
                 bound=0.95, rule="lower_bound", confidence=0.95, min_n=10, max_error_rate=0.05)
    v = decide_joining(family, collect_site(site, MANY, lambda r: r.correct))
    assert v.status is Status.FAIL and v.details["family_size"] == 5
    assert "Holm" in v.guarantee and "5 checks" in v.guarantee
