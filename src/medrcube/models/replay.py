"""`replay:FILE`: answer with responses recorded earlier, never with a guess.

Two formats are read, told apart by the first non-blank character:

- JSON Lines (`{`): one object per line with `id` and `response` (a string, or null for
  a recorded failure), optionally `variant` (default "standard") and `rotation`
  (default 0). medrcube's own results.jsonl has these fields, so a run replays.
- A JSON list (`[`): the MedRCube reference evaluator's `results.json`, whose entries
  carry `id` and `model_response`; those responses are to the standard prompt.

A request for which the file holds no response gets an error Response naming the item
and the file: grading a missing answer as wrong (or picking one) would corrupt the gate.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from medrcube.models.base import AdapterBase, ErrorKind, Request, Response
from medrcube.models.models_file import ModelSpecError
from medrcube.models.strict_json import DuplicateKeyError, loads_strict

_Key = tuple[str, str, int]  # (item id, variant name, rotation)
# A request's variant may carry its rotation ("shuffled:2", "shuffled@2", "shuffled#2").
_VARIANT = re.compile(r"^(?P<name>[^:@#/]+)(?:[:@#/](?:r)?(?P<rot>\d+))?$")


def split_variant(variant: str) -> tuple[str, int]:
    """("shuffled", 2) for "shuffled:2"; (variant, 0) when no rotation is attached."""
    m = _VARIANT.match(variant or "standard")
    if not m:
        return variant, 0
    return m["name"], int(m["rot"] or 0)


class ReplayAdapter(AdapterBase):
    """Responses from a file (module docstring); fingerprint `replay:<sha256 of the file>`."""

    keyed_by_item = True  # responses are recorded per item: see ModelAdapter

    def __init__(self, path: str | Path, *, concurrency: int | None = None, batch_size: int = 256):
        self.path = Path(path)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            raise ModelSpecError(f"replay file {str(self.path)!r} not found") from None
        except OSError as e:
            raise ModelSpecError(f"replay file {str(self.path)!r} cannot be read: {e}") from None
        self.spec = f"replay:{path}"
        self.fingerprint = "replay:" + hashlib.sha256(data).hexdigest()
        self.batch_size = batch_size
        self.concurrency = concurrency or 4
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ModelSpecError(f"replay file {str(self.path)!r} is not UTF-8 text") from None
        self._responses: dict[_Key, str | None] = {}
        if text.lstrip().startswith("["):
            self._read_results_json(text)
        else:
            self._read_jsonl(text)
        if not self._responses:
            raise ModelSpecError(f"replay file {str(self.path)!r} holds no responses")

    def __len__(self) -> int:
        return len(self._responses)

    # -- reading ---------------------------------------------------------------------

    def _add(self, key: _Key, response: Any, where: str) -> None:
        if response is not None and not isinstance(response, str):
            raise ModelSpecError(f"{where}: the response must be a string (or null), got {type(response).__name__}")
        if key in self._responses:
            raise ModelSpecError(
                f"{where}: a second response for item {key[0]!r} (variant {key[1]!r}, rotation {key[2]}); "
                "a replay file holds one response per item and variant"
            )
        self._responses[key] = response

    def _read_jsonl(self, text: str) -> None:
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{self.path}:{n}"
            try:
                rec = loads_strict(line)
            except DuplicateKeyError as e:
                raise ModelSpecError(f"{where}: {e}; write each field once") from None
            except json.JSONDecodeError as e:
                raise ModelSpecError(f"{where}: not a JSON object ({e.msg}); expected one {{id, response}} per line") from None
            if not isinstance(rec, Mapping):
                raise ModelSpecError(f"{where}: expected a JSON object with 'id' and 'response'")
            for field in ("id", "response"):
                if field not in rec:
                    alt = " (a reference results.json is a JSON list, not JSON Lines)" if "model_response" in rec else ""
                    raise ModelSpecError(f"{where}: missing field {field!r}{alt}")
            variant = rec.get("variant") or "standard"
            rotation = rec.get("rotation") or 0
            if not isinstance(variant, str) or isinstance(rotation, bool) or not isinstance(rotation, int):
                raise ModelSpecError(f"{where}: 'variant' must be a string and 'rotation' an integer")
            self._add((str(rec["id"]), variant, rotation), rec["response"], where)

    def _read_results_json(self, text: str) -> None:
        try:
            records = loads_strict(text)
        except DuplicateKeyError as e:
            raise ModelSpecError(f"{self.path}: {e}; write each field once") from None
        except json.JSONDecodeError as e:
            raise ModelSpecError(f"{self.path}: not valid JSON ({e.msg} at line {e.lineno})") from None
        for i, rec in enumerate(records):
            where = f"{self.path} entry {i}"
            if not isinstance(rec, Mapping) or "id" not in rec or "model_response" not in rec:
                raise ModelSpecError(
                    f"{where}: expected an object with 'id' and 'model_response' (the reference evaluator's results.json)"
                )
            self._add((str(rec["id"]), "standard", 0), rec["model_response"], where)

    # -- answering -------------------------------------------------------------------

    def lookup(self, req: Request) -> Response:
        name, rotation = split_variant(req.variant)
        key = (req.item_id, name, rotation)
        if key not in self._responses:
            which = "" if (name, rotation) == ("standard", 0) else f" (variant {name!r}, rotation {rotation})"
            return Response(
                text=None,
                error=f"no response for item {req.item_id}{which} in {self.path}",
                error_kind=ErrorKind.INTERNAL,
            )
        text = self._responses[key]
        if text is None:
            return Response(
                text=None,
                error=f"the response for item {req.item_id} in {self.path} is null (a failure when it was recorded)",
                error_kind=ErrorKind.INTERNAL,
            )
        return Response(text=text)

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        return [self.lookup(r) for r in requests]

    async def aclose(self) -> None:
        return None
