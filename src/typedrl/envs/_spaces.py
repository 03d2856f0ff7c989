"""Conversion of Gymnasium observation batches into TensorDicts.

Supported observation spaces: ``Box``, ``Discrete``, ``MultiDiscrete``,
``MultiBinary`` (stored under the key ``"obs"``) and ``Dict`` of those (one key
per entry, nested ``Dict`` spaces become nested TensorDicts).

Dtypes: floating ``Box`` observations travel in the adapter's float dtype
(float32 by default); integer ``Box`` observations (images) keep their integer
dtype; ``Discrete`` and ``MultiDiscrete`` become int64; ``MultiBinary`` keeps int8.
"""

from collections.abc import Sequence
from typing import Any, final

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from typedrl._types import Obs
from typedrl.errors import SpecError

__all__ = ["ObservationConverter"]


def _leaf_dtype(space: gym.Space[Any], float_dtype: torch.dtype, where: str) -> torch.dtype:
    if isinstance(space, gym.spaces.Box):
        if np.issubdtype(space.dtype, np.floating):
            return float_dtype
        return torch.from_numpy(np.zeros(0, dtype=space.dtype)).dtype
    if isinstance(space, gym.spaces.Discrete | gym.spaces.MultiDiscrete):
        return torch.int64
    if isinstance(space, gym.spaces.MultiBinary):
        return torch.int8
    raise SpecError(
        f"{where}: unsupported observation space {space!r}; expected Box, Discrete, "
        "MultiDiscrete, MultiBinary or a Dict of those"
    )


def _replace_rows(
    space: gym.Space[Any], data: Any, rows: Sequence[int], items: Sequence[Any]
) -> Any:
    """A copy of the batch ``data`` with ``data[rows[k]] = items[k]``, leaf by leaf."""
    if isinstance(space, gym.spaces.Dict):
        return {
            key: _replace_rows(sub, data[key], rows, [item[key] for item in items])
            for key, sub in space.spaces.items()
        }
    array = np.array(data, copy=True)
    for row, item in zip(rows, items, strict=True):
        array[row] = item
    return array


# TensorDict's constructor re-validates every leaf; the leaves built here have the
# right batch size and device by construction, so the unchecked constructor is
# used where the installed tensordict provides it (it saves about 2 us a step).
_NEW_UNSAFE = getattr(TensorDict, "_new_unsafe", None)


def _tensordict(leaves: dict[str, Any], batch: int, device: torch.device) -> Obs:
    if _NEW_UNSAFE is not None:
        fast: Obs = _NEW_UNSAFE(leaves, batch_size=torch.Size((batch,)), device=device)
        return fast
    return TensorDict(leaves, batch_size=[batch], device=device)


def _dtype_tree(space: gym.Space[Any], float_dtype: torch.dtype, where: str) -> Any:
    """The torch dtype of each leaf, shaped like the space (dicts for Dict spaces)."""
    if isinstance(space, gym.spaces.Dict):
        return {
            key: _dtype_tree(sub, float_dtype, f"{where}[{key!r}]")
            for key, sub in space.spaces.items()
        }
    return _leaf_dtype(space, float_dtype, where)


@final
class ObservationConverter:
    """Turns batched NumPy observations of one space into TensorDicts on a device.

    Args:
        space: The single-row observation space.
        num_envs: Rows per batch.
        device: Device of the produced tensors.
        float_dtype: Dtype of floating-point ``Box`` observations.

    Example:
        >>> import gymnasium as gym, numpy as np, torch
        >>> converter = ObservationConverter(
        ...     gym.spaces.Box(-1, 1, (2,)), num_envs=3, device=torch.device("cpu")
        ... )
        >>> converter.batch(np.zeros((3, 2))).batch_size
        torch.Size([3])
    """

    def __init__(
        self,
        space: gym.Space[Any],
        *,
        num_envs: int,
        device: torch.device,
        float_dtype: torch.dtype = torch.float32,
    ) -> None:
        self.space = space
        self.num_envs = num_envs
        self.device = device
        self._on_cpu = device.type == "cpu"
        self._is_dict = isinstance(space, gym.spaces.Dict)
        self._dtypes = _dtype_tree(space, float_dtype, "observation space")

    def _leaf(self, array: Any, dtype: torch.dtype) -> torch.Tensor:
        # np.array(copy=True) detaches the tensor from buffers the env may reuse.
        tensor = torch.from_numpy(np.array(array, copy=True))
        if tensor.dtype != dtype:
            tensor = tensor.to(dtype)
        if self._on_cpu:
            return tensor
        return tensor.to(self.device, non_blocking=True)

    def _tree(self, data: Any, dtypes: Any, batch: int) -> dict[str, Any]:
        return {
            key: (
                _tensordict(self._tree(data[key], sub, batch), batch, self.device)
                if isinstance(sub, dict)
                else self._leaf(data[key], sub)
            )
            for key, sub in dtypes.items()
        }

    def batch(self, data: Any) -> Obs:
        """Convert one batched observation (``num_envs`` rows) into a TensorDict."""
        return self._convert(data, self.num_envs)

    def batch_with_rows(self, data: Any, rows: Sequence[int], items: Sequence[Any]) -> Obs:
        """Convert a batch whose row ``rows[k]`` is replaced by the single observation ``items[k]``.

        Used for terminal observations: the replacement happens on the NumPy
        side, before the one conversion, which is far cheaper than an indexed
        TensorDict assignment.
        """
        return self._convert(_replace_rows(self.space, data, rows, items), self.num_envs)

    def _convert(self, data: Any, batch: int) -> Obs:
        if not self._is_dict:
            return _tensordict({"obs": self._leaf(data, self._dtypes)}, batch, self.device)
        if not isinstance(data, dict):
            raise SpecError(
                f"expected a dict observation for {self.space!r}, got {type(data).__name__}"
            )
        return _tensordict(self._tree(data, self._dtypes, batch), batch, self.device)
