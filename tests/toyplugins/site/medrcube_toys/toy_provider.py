"""The model `toy:SALT`: answers the option whose index is the first byte of
sha256(SALT, the image's bytes) modulo the number of options: a function of the pixels
it is shown, so a perturbed image can change the answer."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from medrcube.models.base import AdapterBase, ModelAdapter, Request, Response
from medrcube.models.providers import OpenContext, Provider

LETTERS = "ABCDEFGHIJ"


class ToyAdapter(AdapterBase):
    def __init__(self, salt: str, *, spec: str, concurrency: int | None) -> None:
        self.salt = salt
        self.spec = spec
        self.fingerprint = f"toy:{salt}"
        self.concurrency = concurrency or 2

    def choose(self, req: Request) -> int:
        material = self.salt.encode() + b"".join(image.read() for image in req.images)
        return hashlib.sha256(material).digest()[0] % max(1, len(req.options))

    async def generate(self, requests: Sequence[Request]) -> list[Response]:
        return [Response(text=LETTERS[self.choose(r)]) for r in requests]


def open_toy(argument: str | None, ctx: OpenContext) -> ModelAdapter:
    return ToyAdapter(argument or "0", spec=ctx.spec, concurrency=ctx.concurrency)


PROVIDER = Provider("toy", "toy[:SALT]", "a toy model answering from the image's bytes (tests/toyplugins)",
                    open_toy)
