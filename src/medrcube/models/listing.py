"""The pre-flight of an API adapter: list the endpoint's models once, before the run.

Listing models is cheap, served by OpenAI, Anthropic and Gemini and by vLLM, SGLang and
TGI alike, and is never a generation request, so the run's request counts stay those of
its items. It goes through the adapter's own client (its URL, key and timeout), and its
failure is read by the adapter's own wire hook (`_failed`), so the words are the same as
a failed request's. A connection failure, a refused key, or a list that does not hold the
model (nor a dated snapshot of it) is a problem; anything else (a server without the
route, a slow one) lets the run go on with its retries.

A name the list holds only in another spelling (a path prefix such as vLLM's and
`transformers serve`'s `./my-vlm`, another case, an `:tag`, a dated snapshot) is resolved
when exactly one listed model matches: the adapter then asks under the listed name
(`Preflight.resolved`), which the run keeps on record as the served model. Several
matches, or none, end the run before its first request, with "did you mean" when a listed
name is close: a server pinned to one model refuses every other name, and a run must
not send a whole cube of requests to learn it.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable, Sequence

from medrcube.models.base import ErrorKind, Preflight, same_model
from medrcube.models.provider_errors import Attempt

__all__ = ["LISTED_MAX", "other_spellings", "preflight_by_listing"]

# Model ids read from a paginated list at most: a pre-flight must stay one cheap call (or a
# few pages), and a model absent from a truncated list is not called missing (below).
LISTED_MAX = 2000


async def preflight_by_listing(spec: str, url: str, name: str, base_url_env: str,
                               list_ids: Callable[[], Awaitable[list[str]]],
                               read_failure: Callable[[Exception], Attempt]) -> Preflight:
    """The Preflight of the adapter `spec` asking for model `name` at `url` (configured
    by `base_url_env` or models.yaml): `list_ids` lists the endpoint's models,
    `read_failure` turns the client's exception into the Attempt a failed request would
    give (raising for anything that is not the client's)."""
    try:
        ids = await list_ids()
    except Exception as exc:  # noqa: BLE001 - read by the adapter's own wire hook below
        try:
            failed = read_failure(exc)
        except Exception:  # noqa: BLE001 - not an error of the client: no problem to report
            return Preflight()
        if failed.kind is ErrorKind.CONNECTION:
            cause = exc.__cause__ or exc
            return Preflight(problem=(
                f"the model endpoint {url} cannot be reached ({spec}): connection failed ({type(cause).__name__}: "
                f"{cause}); check the base URL ({base_url_env} or models.yaml) and that the server is up"))
        if failed.kind is ErrorKind.AUTH:
            return Preflight(problem=f"the model endpoint {url} refused the key ({spec}): {failed.message}")
        return Preflight()
    if not ids or name in ids:  # nothing to compare with, or the name as asked
        return Preflight(served=name if ids else None)
    if len(ids) >= LISTED_MAX:  # a list cut short proves nothing about the name
        return Preflight()
    shown = ", ".join(repr(i) for i in ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    spellings = other_spellings(name, ids)
    if len(spellings) == 1:  # one listed name is this one spelled otherwise: asked under it
        return Preflight(served=spellings[0], resolved=True)
    if spellings:
        named = ", ".join(repr(i) for i in spellings)
        return Preflight(problem=(
            f"the model endpoint {url} lists several models that could be {name!r} ({spec}): {named}; "
            "set the model name (--model, or model in models.yaml) to the one you mean"))
    close = difflib.get_close_matches(name, ids, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    # Every request would be refused (a server pinned to one model answers 400).
    return Preflight(problem=(
        f"the model endpoint {url} does not serve the model {name!r} ({spec}): its model list holds {shown}; "
        f"{hint}set the model name (--model, or model in models.yaml) to one of them"))


def _bare(name: str) -> str:
    """A model name without what a listing may add or drop: case, a leading `./`, a
    directory path, an `:tag` (ollama's `:latest`)."""
    s = name.strip().lower()
    s = s.rsplit("/", 1)[-1]
    return s.split(":", 1)[0] if ":" in s else s


def other_spellings(name: str, ids: Sequence[str]) -> list[str]:
    """The listed ids that name the model `name` asks for, spelled otherwise: a path prefix
    (`./my-vlm`, `/models/my-vlm`), another case, a tag (`llava:latest`), or a dated or
    versioned snapshot (`same_model`). The caller resolves one, and refuses several."""
    bare = _bare(name)
    found = [i for i in ids if same_model(name, i) or _bare(i) == bare]
    return list(dict.fromkeys(found))
