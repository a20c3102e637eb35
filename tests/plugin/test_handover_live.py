"""The controller's own records handed over as they are (GateSession.handover(live=True))
merge into the run a worker's JSON dicts of the same records give (plugin/handover.py)."""

from __future__ import annotations

import dataclasses
import json

from medrcube.plugin.handover import merge_handovers
from medrcube.records import GradedRecord, Outcome


def _handover(records: list, worker: str, sent: int) -> dict:
    return {"worker": worker, "records": records, "requests_sent": sent, "judge_requests": 0, "usage": {},
            "started": 1.0, "finished": 2.0, "wall_s": 1.0, "aborted": None, "info": {"variants": ["standard"]}}


def test_live_records_merge_as_their_dicts_do() -> None:
    base = dict(dataset="ds", task="t", modality="CT", part="Brain", image="img/1.png", image_digest="sha256:ab",
                variant="standard", rotation=0, answer=1, n_options=4, prompt_hash="ph", response="B", extracted=1,
                how="bare_letter", outcome=Outcome.CORRECT)
    records = [GradedRecord(item_id=f"i{k}", cached=k % 2 == 0, **base) for k in range(6)]
    # another process of the run sent i0 (cached for this one): not cached for the run
    other = [dataclasses.replace(records[0], cached=False).to_dict()]
    as_dicts = [json.loads(json.dumps(r.to_dict())) for r in records]
    live = merge_handovers([_handover(list(records), "main", 3), _handover(other, "gw1", 1)])
    dicts = merge_handovers([_handover(as_dicts, "main", 3), _handover(other, "gw1", 1)])
    assert live.records == dicts.records
    assert [r.cached for r in live.records] == [False, False, True, False, True, False]
    assert (live.requests_sent, live.cache_hits) == (dicts.requests_sent, dicts.cache_hits) == (4, 2)
