"""Conversion of Gymnasium observation batches into TensorDicts.

Supported observation spaces: ``Box``, ``Discrete``, ``MultiDiscrete``,
``MultiBinary`` (stored under the key ``"obs"``) and ``Dict`` of those (one key
per entry, nested ``Dict`` spaces become nested TensorDicts).

Dtypes: floating ``Box`` observations travel in the adapter's float dtype
(float32 by default); integer ``Box`` observations (images) keep their integer
dtype; ``Discrete`` and ``MultiDiscrete`` become int64; ``MultiBinary`` keeps int8.
"""

import functools
import inspect
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
    return _replace_leaf_rows(data, rows, items)


def _replace_leaf_rows(data: Any, rows: Sequence[int], items: Sequence[Any]) -> np.ndarray:
    """A copy of the array ``data`` with ``data[rows[k]] = items[k]``."""
    if len(rows) != len(items):
        raise ValueError(f"got {len(rows)} rows but {len(items)} items to put in them")
    array = np.array(data, copy=True)
    # Indexing beats zip(..., strict=True) here: this runs on every step where rows end.
    for k, row in enumerate(rows):
        array[row] = items[k]
    return array


# TensorDict's constructor re-validates every leaf; the leaves built here have the
# right batch size and device by construction, so the unchecked constructor is
# used where the installed tensordict provides it (it saves about 2 us a step).
# Nested levels are built bottom-up as TensorDicts, so the constructor never has
# to look for plain dicts among the values (``nested=False``) when it can skip it.
_NEW_UNSAFE = getattr(TensorDict, "_new_unsafe", None)
if _NEW_UNSAFE is not None and "nested" in inspect.signature(_NEW_UNSAFE).parameters:
    _NEW_UNSAFE = functools.partial(_NEW_UNSAFE, nested=False)


def _tensordict(leaves: dict[str, Any], batch_size: torch.Size, device: torch.device) -> Obs:
    if _NEW_UNSAFE is not None:
        fast: Obs = _NEW_UNSAFE(leaves, batch_size=batch_size, device=device)
        return fast
    return TensorDict(leaves, batch_size=batch_size, device=device)


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
        self._batch_size = torch.Size((num_envs,))
        self._is_dict = isinstance(space, gym.spaces.Dict)
        self._dtypes = _dtype_tree(space, float_dtype, "observation space")

    def _leaf(self, array: Any, dtype: torch.dtype, copy: bool) -> torch.Tensor:
        if copy:
            # np.array(copy=True) detaches the tensor from buffers the env may reuse.
            array = np.array(array, copy=True)
        tensor = torch.from_numpy(array)
        if tensor.dtype != dtype:
            tensor = tensor.to(dtype)
        if self._on_cpu:
            return tensor
        return tensor.to(self.device, non_blocking=True)

    def _tree(self, data: Any, dtypes: Any, copy: bool) -> dict[str, Any]:
        return {
            key: (
                _tensordict(self._tree(data[key], sub, copy), self._batch_size, self.device)
                if isinstance(sub, dict)
                else self._leaf(data[key], sub, copy)
            )
            for key, sub in dtypes.items()
        }

    def batch(self, data: Any, *, copy: bool = True) -> Obs:
        """Convert one batched observation (``num_envs`` rows) into a TensorDict.

        Args:
            data: The batch: an array, or a dict of them for a ``Dict`` space.
            copy: Copy every leaf first, so that the tensors never alias the
                caller's arrays. Pass ``False`` only for leaves that nothing
                else holds or will write to, and that are writeable NumPy arrays
                with non-negative strides (such as a fresh ``copy.deepcopy`` of
                an array): the tensors then share their memory.
        """
        if not self._is_dict:
            leaf = self._leaf(data, self._dtypes, copy)
            return _tensordict({"obs": leaf}, self._batch_size, self.device)
        return self._convert_dict(data, copy=copy)

    def batch_with_rows(self, data: Any, rows: Sequence[int], items: Sequence[Any]) -> Obs:
        """Convert a batch whose row ``rows[k]`` is replaced by the single observation ``items[k]``.

        Used for terminal observations: the replacement happens on the NumPy
        side, before the one conversion, which is far cheaper than an indexed
        TensorDict assignment. ``data`` and ``items`` are copied, never aliased.
        """
        # Both helpers return fresh arrays: no second copy is needed.
        if self._is_dict:
            return self._convert_dict(_replace_rows(self.space, data, rows, items), copy=False)
        return self.batch(_replace_leaf_rows(data, rows, items), copy=False)

    def _convert_dict(self, data: Any, *, copy: bool) -> Obs:
        if not isinstance(data, dict):
            raise SpecError(
                f"expected a dict observation for {self.space!r}, got {type(data).__name__}"
            )
        return _tensordict(self._tree(data, self._dtypes, copy), self._batch_size, self.device)
