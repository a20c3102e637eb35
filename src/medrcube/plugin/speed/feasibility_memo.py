"""The feasibility pass of the gate's start-up, remembered per cube content (docs/speed.md).

`feasibility_memo` gives gate/feasible.py's `assess` a memo (cube/derived_cache.py) whose
key is the SHA-256 of the items' content, the checks, the policy and the source of the
gate and the metrics (the code that decides): another cube, another bound or another
release of the decision code is a miss. What is cached is only which checks are
undecidable and why; the checks themselves are always built from the policy at hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def feasibility_memo(checks: Sequence[Any], items_digest: str, policy: Any) -> Callable[..., dict[str, str]]:
    import medrcube.gate
    import medrcube.metrics
    from medrcube.cube.derived_cache import cached, digest_of, package_sources, source_digest

    code = source_digest(package_sources(Path(medrcube.gate.__file__).parent, Path(medrcube.metrics.__file__).parent))
    parts = {"items": items_digest, "checks": digest_of(list(checks)), "policy": digest_of(policy), "code": code}

    def decode(value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            raise ValueError("not a mapping")
        return {str(k): str(v) for k, v in value.items()}

    def memo(compute: Callable[[], dict[str, str]]) -> dict[str, str]:
        return cached("feasibility", parts, compute, dict, decode)

    return memo
