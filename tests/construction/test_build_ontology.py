"""The bundled ontology subset and the distractors drawn from it (similar vs normal, exclusivity)."""

from __future__ import annotations

from pathlib import Path

import pytest

from medrcube.construction.stages.distractors import (
    StrategyPlan,
    choose,
    exclusivity_problems,
    normal_pool,
    similar_pool,
)
from medrcube.construction.stages.ontology import (
    CATEGORIES,
    OntologyError,
    load_ontology,
    parse_ontology,
)

ONTO = load_ontology()
ANSWERABLE = [(c.id, r) for c in ONTO.concepts.values() for r in c.regions]


def test_the_bundled_ontology_is_consistent() -> None:
    assert len(ONTO) >= 100
    assert {c.category for c in ONTO.concepts.values()} == set(CATEGORIES)
    for c in ONTO.concepts.values():
        for s in c.similar:
            assert c.id in ONTO[s].similar, f"similar is symmetric: {c.id} / {s}"
        for o in c.overlaps:
            assert c.id in ONTO[o].overlaps
    assert ONTO.related_by_is_a("covid19_pneumonia", "pneumonia") and not ONTO.exclusive("pneumonia", "bacterial_pneumonia")
    assert not ONTO.exclusive("t2w", "flair") and not ONTO.exclusive("pulmonary_nodule", "calcification")
    assert ONTO.exclusive("pneumonia", "tuberculosis")
    for region in ("Brain", "Chest", "Lungs", "Heart", "Breast"):
        assert len([c for c in ONTO.concepts.values() if c.category == "disease" and c.in_region(region)]) >= 8, region


def test_lookup_by_name_synonym_and_region() -> None:
    assert ONTO.lookup("Alzheimer's disease").concept.id == "alzheimer_disease"
    assert ONTO.lookup("  COVID-19 ").concept.id == "covid19_pneumonia"
    assert ONTO.lookup("mass", region="Chest").concept.id == "pulmonary_mass"
    assert ONTO.lookup("mass", region="Breast").concept is None
    assert "no concept named 'bronchiectasis'" in ONTO.lookup("bronchiectasis").reason
    assert ONTO.lookup("t1", categories=("mr_protocol",)).concept.id == "t1w"


@pytest.mark.parametrize("strategy", ["similar", "normal"])
def test_every_answer_gets_exclusive_homogeneous_distractors(strategy: str) -> None:
    written = 0
    for cid, region in ANSWERABLE:
        choice = choose(ONTO, cid, region, strategy, k=3, seed="t")
        if choice is None:
            continue
        written += 1
        ids = [cid, *choice.distractors]
        assert exclusivity_problems(ONTO, ids) == [], (cid, region, ids)
        assert all(ONTO[d].in_region(region) for d in choice.distractors)
        if choice.strategy == "similar":
            assert set(choice.distractors) <= set(similar_pool(ONTO, cid, region, "t"))
        else:
            assert not set(choice.distractors) & ONTO[cid].similar
    assert written >= 0.95 * len(ANSWERABLE)


def test_similar_prefers_the_phenotype_and_normal_avoids_it() -> None:
    sim = choose(ONTO, "subdural_hematoma", "Brain", "similar", k=3, seed="x")
    assert sim.strategy == "similar" and {"epidural_hematoma", "subarachnoid_hemorrhage"} <= set(sim.distractors)
    norm = choose(ONTO, "subdural_hematoma", "Brain", "normal", k=3, seed="x")
    assert norm.strategy == "normal" and not set(norm.distractors) & {"epidural_hematoma", "subarachnoid_hemorrhage"}
    assert "bacterial_pneumonia" not in choose(ONTO, "pneumonia", "Chest", "similar", k=3, seed="x").distractors
    # Deterministic per seed, different across seeds somewhere.
    assert choose(ONTO, "glioma", "Brain", "normal", seed="a") == choose(ONTO, "glioma", "Brain", "normal", seed="a")
    assert len({choose(ONTO, "glioma", "Brain", "normal", seed=str(s)).distractors for s in range(8)}) > 1
    # A strategy that cannot fill the item gives way to one that can (never mixed).
    t2 = choose(ONTO, "t2w", "Brain", "similar", k=3, seed="x")
    assert t2.strategy == "normal" and len(t2.distractors) == 3 and set(t2.distractors) <= set(normal_pool(ONTO, "t2w", "Brain"))


def test_strategy_plan_spreads_the_fraction_evenly() -> None:
    plan = StrategyPlan(0.5)
    assert [plan.next("DD") for _ in range(6)] == ["normal", "similar"] * 3
    plan = StrategyPlan(0.25)
    assert [plan.next("AD") for _ in range(8)].count("similar") == 2
    with pytest.raises(ValueError):
        StrategyPlan(1.5)


@pytest.mark.parametrize(
    "concepts, message",
    [
        ([{"id": "a", "name": "A", "category": "disease", "regions": ["Brain"], "site": "s", "similar": ["b"]}], "names 'b', which is not defined"),
        ([{"id": "a", "name": "A", "category": "diseases", "regions": ["Brain"], "site": "s"}], r"'diseases' \(did you mean 'disease'\?\)"),
        ([{"id": "a", "name": "A", "category": "disease", "regions": ["Brain"], "site": "s", "is_a": ["b"]},
          {"id": "b", "name": "B", "category": "disease", "regions": ["Brain"], "site": "s", "is_a": ["a"]}], "own ancestor"),
        ([{"id": "a", "name": "A", "category": "disease", "regions": ["Brain"], "site": "s", "synonym": ["x"]}], r"unknown key 'synonym' \(did you mean 'synonyms'\?\)"),
        ([{"id": "A b", "name": "A", "category": "disease", "regions": ["Brain"], "site": "s"}], "lower_snake_case"),
        ([{"id": "a", "name": "A", "category": "disease", "regions": [], "site": "s"}], "regions' is empty"),
    ],
)
def test_a_bad_ontology_file_names_the_concept_and_key(concepts, message) -> None:
    with pytest.raises(OntologyError, match=message):
        parse_ontology({"version": 1, "concepts": concepts}, "site-onto.yaml")


def test_a_site_ontology_file_loads(tmp_path: Path) -> None:
    p = tmp_path / "onto.yaml"
    p.write_text("concepts:\n  - {id: a, name: A, category: disease, regions: [Brain], site: s, similar: [b]}\n"
                 "  - {id: b, name: B, category: disease, regions: [Brain], site: s}\n", encoding="utf-8")  # fmt: skip
    onto = load_ontology(p)
    assert onto["b"].similar == {"a"} and choose(onto, "a", "Brain", "similar", k=3).distractors == ("b",)
