"""A fake two-rank world for tests of code that reduces across ranks."""

from collections.abc import Callable
from typing import Any, final

import torch
from torch import Tensor


@final
class TwoRanks:
    """A two-rank world where the other rank's contribution is ``remote(tensor)``."""

    def __init__(self, remote: Callable[[Tensor], Tensor] | None = None) -> None:
        self.remote = remote if remote is not None else (lambda tensor: tensor.clone())
        self.calls: list[str] = []

    @property
    def world_size(self) -> int:
        return 2

    @property
    def rank(self) -> int:
        return 0

    @property
    def is_main(self) -> bool:
        return True

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def all_reduce_sum(self, tensor: Tensor) -> Tensor:
        self.calls.append("all_reduce_sum")
        return tensor + self.remote(tensor)

    def all_gather(self, tensor: Tensor) -> Tensor:
        self.calls.append("all_gather")
        return torch.stack((tensor, self.remote(tensor)))

    def broadcast(self, tensor: Tensor, src: int = 0) -> Tensor:
        self.calls.append("broadcast")
        return tensor.clone()

    def barrier(self) -> None:
        self.calls.append("barrier")

    def all_gather_object(self, obj: object) -> list[Any]:
        self.calls.append("all_gather_object")
        return [obj, obj]
