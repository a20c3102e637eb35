"""The check kind `toy_share`: the share of standard answers graded right reaches
`toy_share: {min_share: BOUND}` of the policy. Like any kind module it imports at its top
only what imports nothing of the gate back (the kinds registry), the rest where it runs."""

from __future__ import annotations

from typing import Any

from medrcube.gate.kinds import BuildContext, KindEntry

NAME = "toy_share"


def read_policy(checker: Any, key: str, value: Any) -> float:
    section = checker.mapping(key, value, ("min_share",))
    return float(checker.prob(f"{key}.min_share", section.get("min_share"), "a share of answers"))


def build(ctx: BuildContext) -> list[Any]:
    from medrcube.gate.checks import Check

    bound = ctx.section(NAME)
    if bound is None:
        return []
    return [Check(id="toy_share/overall", kind=NAME, metric="standard_right", part=None, modality=None, task=None,
                  bound=bound, rule="point", confidence=0.95, min_n=10, max_error_rate=0.05,
                  source="toy_share.min_share",
                  labels={"part": "All parts", "modality": "Toy", "task": "Toy", "level": "overall",
                          "severity": "normal", "kind": NAME})]


def evidence(check: Any, records: list[Any]) -> Any:
    from medrcube.gate.evidence import collect_site

    return collect_site(check, [r for r in records if r.variant == "standard"], lambda r: r.correct)


KIND = KindEntry(NAME, "toy share of right answers", "test_toy_share", "The toy kind: a share of right answers.",
                 off="the toy kind needs `toy_share: {min_share: BOUND}`", epic="Toy kind", summary_line=True,
                 observed="share", prefix="toy_share/", section=NAME, read_policy=read_policy, build=build,
                 evidence=evidence)
