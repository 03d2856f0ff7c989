"""Conversion of Gymnasium observation batches into checked TensorDicts.

Supported observation spaces: ``Box``, ``Discrete``, ``MultiDiscrete``,
``MultiBinary`` (stored under the key ``"obs"``) and ``Dict`` of those (one key
per entry, nested ``Dict`` spaces become nested TensorDicts).

Dtypes: floating ``Box`` observations travel in the adapter's float dtype
(float32 by default); integer and boolean ``Box`` observations (images, masks)
keep their dtype; ``Discrete`` and ``MultiDiscrete`` become int64;
``MultiBinary`` keeps int8. :func:`converted_space` describes the result as a
space.

Casts are NumPy's (a fraction of torch's cost on small arrays): a float64
value beyond the range of float32 becomes infinite, with NumPy's
``RuntimeWarning`` about the overflow, and fails the finiteness check below.

Every leaf of every batch is checked against the space before it is
converted: its shape must be ``[num_envs, *space.shape]`` and its dtype one
that converts without losing meaning (any real dtype for a floating ``Box``,
an integer dtype for integer leaves, ``bool`` for a boolean ``Box``). These
checks read array metadata only. After the cast, a floating leaf must be
finite (``np.isfinite(batch).all()``, a few microseconds on small batches):
a float64 value beyond the range of float32 fails it too.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, final

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from typedrl._validation import describe
from typedrl.errors import EnvContractError, NonFiniteError, SpecError
from typedrl.types import Obs

__all__ = [
    "LeafSpec",
    "ObservationConverter",
    "as_numpy",
    "check_finite",
    "converted_space",
    "new_tensordict",
    "refuse_unsupported",
]

# NumPy dtype kinds a leaf accepts, by the kind of the dtype it is converted to:
# floats take any real number; integers (and MultiBinary's int8) take integers
# (a float would be truncated); booleans take booleans only.
_ACCEPTED_KINDS = {"f": "fiu", "i": "iu", "u": "iu", "b": "b"}
_KIND_NAMES = {"fiu": "a real (float or integer)", "iu": "an integer", "b": "a bool"}


_LEAVES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
"""The leaf spaces observations may have (alone or in a ``Dict``)."""

_FLATTENABLE = (*_LEAVES, gym.spaces.Tuple, gym.spaces.Dict)
"""Spaces Gymnasium's ``FlattenObservation`` turns into one ``Box``."""


def _supported(space: gym.Space[Any]) -> bool:
    if isinstance(space, gym.spaces.Dict):
        return all(_supported(sub) for sub in space.spaces.values())
    return isinstance(space, _LEAVES)


def _flattenable(space: gym.Space[Any]) -> bool:
    if isinstance(space, gym.spaces.Dict | gym.spaces.Tuple):
        children = space.spaces.values() if isinstance(space, gym.spaces.Dict) else space.spaces
        return all(_flattenable(sub) for sub in children)
    return isinstance(space, _FLATTENABLE)


def refuse_unsupported(space: gym.Space[Any]) -> None:
    """Refuse an observation space typedrl cannot turn into tensors, naming the wrapper that can.

    Every ``Dict`` key whose space is not supported is named (MiniGrid's
    ``'mission'`` ``Text``, a ``Tuple``), with the ``--wrapper`` that keeps the
    others (``FilterObservation``) and, when Gymnasium can flatten the whole
    space into one ``Box``, ``FlattenObservation`` (the fix of a ``Tuple``); a
    ``Text`` key (MiniGrid's mission) also names MiniGrid's ``ImgObsWrapper``.

    Raises:
        SpecError: One line naming the keys (or the space) and the fix.

    Example:
        >>> import gymnasium as gym
        >>> space = gym.spaces.Dict(
        ...     {"image": gym.spaces.Box(0, 255, (7, 7, 3)), "mission": gym.spaces.Text(8)}
        ... )
        >>> refuse_unsupported(space)
        Traceback (most recent call last):
        ...
        typedrl.errors.SpecError: observation space['mission']: unsupported observation space
        Text(1, 8, charset=...); expected Box, Discrete, MultiDiscrete, MultiBinary or a Dict
        of those: keep the other keys with --wrapper 'FilterObservation(filter_keys=["image"])'
        (MiniGrid: or keep the image alone with --wrapper minigrid.wrappers:ImgObsWrapper)
    """
    if _supported(space):
        return
    flatten = (
        " or flatten the whole observation into one Box with --wrapper FlattenObservation"
        if _flattenable(space)
        else ""
    )
    if isinstance(space, gym.spaces.Dict):
        bad = [key for key, sub in space.spaces.items() if not _supported(sub)]
        kept = [key for key in space.spaces if key not in bad]
        where = f"observation space[{bad[0]!r}]" if len(bad) == 1 else f"observation keys {bad}"
        got = ", ".join(repr(space.spaces[key]) for key in bad)
        keys = ", ".join(f'"{key}"' for key in kept)
        keep = f"keep the other keys with --wrapper 'FilterObservation(filter_keys=[{keys}])'"
        fix = f"{keep}{flatten}" if kept else (flatten.removeprefix(" or ") or _OWN_WRAPPER)
        if any(key == "mission" or isinstance(space.spaces[key], gym.spaces.Text) for key in bad):
            # MiniGrid's text mission: its own wrapper keeps the image alone.
            fix += f" ({_MINIGRID_IMAGE})"
        raise SpecError(
            f"{where}: unsupported observation space {got}; expected Box, Discrete, "
            f"MultiDiscrete, MultiBinary or a Dict of those: {fix}"
        )
    fix = flatten.removeprefix(" or ") if flatten else _OWN_WRAPPER
    raise SpecError(
        f"observation space: unsupported observation space {space!r}; expected Box, Discrete, "
        f"MultiDiscrete, MultiBinary or a Dict of those: {fix}"
    )


_MINIGRID_IMAGE: Final = (
    "MiniGrid: or keep the image alone with --wrapper minigrid.wrappers:ImgObsWrapper"
)

_OWN_WRAPPER: Final = (
    "encode it as arrays with a gymnasium.ObservationWrapper of your own (--wrapper module:Class)"
)


def _leaf_numpy_dtype(space: gym.Space[Any], float_dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The NumPy dtype a leaf of ``space`` is converted to.

    ``space`` is one of the leaves :func:`refuse_unsupported` lets through, which
    every caller runs first: Box, Discrete, MultiDiscrete or MultiBinary.
    """
    if isinstance(space, gym.spaces.Box):
        return float_dtype if space.dtype.kind == "f" else space.dtype
    if isinstance(space, gym.spaces.Discrete | gym.spaces.MultiDiscrete):
        return np.dtype(np.int64)
    # MultiBinary, the one leaf left.
    return np.dtype(np.int8)


def _cast_bounds(bound: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """``bound`` in ``dtype``, rounded exactly as observations are.

    Rounding to nearest is monotonic, so an observation within the original
    bounds stays within the cast ones; a bound beyond the range of ``dtype``
    becomes infinite, as an observation beyond it does.
    """
    with np.errstate(over="ignore"):
        return bound.astype(dtype)


def converted_space(space: gym.Space[Any], float_dtype: torch.dtype) -> gym.Space[Any]:
    """The observation space of the batches :class:`ObservationConverter` returns.

    A floating ``Box`` becomes a ``Box`` of ``float_dtype`` with the same
    bounds (cast as the observations are), ``Discrete`` and ``MultiDiscrete``
    spaces int64 ones; a space that the conversion leaves as it is is returned
    itself.

    Args:
        space: The env's single-row observation space.
        float_dtype: Dtype of floating-point ``Box`` observations.

    Returns:
        ``space``, or a copy with the dtypes of the converted observations.

    Raises:
        SpecError: If a leaf of ``space`` is not supported.

    Example:
        >>> import gymnasium as gym, numpy as np, torch
        >>> converted_space(gym.spaces.Box(-1, 1, (2,), np.float64), torch.float32)
        Box(-1.0, 1.0, (2,), float32)
    """
    refuse_unsupported(space)
    target = torch.empty(0, dtype=float_dtype).numpy().dtype
    return _converted(space, target)


def _converted(space: gym.Space[Any], float_dtype: np.dtype[Any]) -> gym.Space[Any]:
    """``space`` with its leaves' converted dtypes (:func:`refuse_unsupported` ran first)."""
    if isinstance(space, gym.spaces.Dict):
        children = {key: _converted(sub, float_dtype) for key, sub in space.spaces.items()}
        if all(children[key] is sub for key, sub in space.spaces.items()):
            return space
        # A sequence of pairs keeps the order of the keys (a dict would be sorted).
        return gym.spaces.Dict(list(children.items()))
    dtype = _leaf_numpy_dtype(space, float_dtype)
    if space.dtype != dtype:
        if isinstance(space, gym.spaces.Box):
            low, high = _cast_bounds(space.low, dtype), _cast_bounds(space.high, dtype)
            return gym.spaces.Box(low, high, shape=space.shape, dtype=dtype)
        if isinstance(space, gym.spaces.Discrete):
            return gym.spaces.Discrete(int(space.n), start=int(space.start), dtype=dtype.type)
        if isinstance(space, gym.spaces.MultiDiscrete):
            return gym.spaces.MultiDiscrete(space.nvec, dtype=dtype.type, start=space.start)
    # Nothing to convert (MultiBinary is always int8, which is what it converts to).
    return space


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class LeafSpec:
    """What one observation leaf must look like, worked out once from the space."""

    name: str
    """The leaf's key for messages: ``'obs'``, ``'policy'`` or ``('extra', 'flag')``."""

    space: gym.Space[Any]
    """The env's own space of this leaf."""

    batch_shape: tuple[int, ...]
    """``(num_envs, *space.shape)``."""

    row_shape: tuple[int, ...]
    """``space.shape``."""

    dtype: np.dtype[Any]
    """The NumPy dtype the leaf is converted to."""

    kinds: str
    """The NumPy dtype kinds the leaf accepts."""

    floating: bool
    """Whether :attr:`dtype` is a floating dtype, whose values :func:`check_finite` checks."""


def _leaf_tree(
    space: gym.Space[Any], num_envs: int, float_dtype: np.dtype[Any], path: tuple[str, ...]
) -> Any:
    """A :class:`LeafSpec` per leaf of the space, shaped like it (dicts for Dict spaces)."""
    if isinstance(space, gym.spaces.Dict):
        return {
            key: _leaf_tree(sub, num_envs, float_dtype, (*path, key))
            for key, sub in space.spaces.items()
        }
    dtype = _leaf_numpy_dtype(space, float_dtype)
    row_shape = tuple(space.shape or ())
    if not path:
        name = "'obs'"
    elif len(path) == 1:
        name = repr(path[0])
    else:
        name = repr(path)
    return LeafSpec(
        name=name,
        space=space,
        batch_shape=(num_envs, *row_shape),
        row_shape=row_shape,
        dtype=dtype,
        kinds=_ACCEPTED_KINDS[dtype.kind],
        floating=dtype.kind == "f",
    )


def new_tensordict(leaves: dict[str, Any], batch_size: torch.Size, device: torch.device) -> Obs:
    """A TensorDict of ``leaves``, which must already have ``batch_size`` and ``device``.

    TensorDict's public constructor; ``non_blocking=False`` because the leaves are on
    ``device`` already: nothing is copied, and no transfer is recorded or waited for.
    """
    return TensorDict(leaves, batch_size=batch_size, device=device, non_blocking=False)


# Where a batch comes from, for messages: (caller, step or None, what the batch is).
_Context = tuple[str, int | None, str]


def _prefix(context: _Context) -> str:
    where, step, _ = context
    return where if step is None else f"{where} (step {step})"


def check_finite(array: np.ndarray, leaf: LeafSpec, context: _Context) -> None:
    """Raise unless the batch ``array`` of ``leaf`` (in the leaf's dtype) is all finite.

    Raises:
        NonFiniteError: If it holds a NaN or an infinity; the message names
            the call, the step, the leaf's key, the first bad row and its value.
    """
    if not leaf.floating or np.isfinite(array).all():
        return
    bad = ~np.isfinite(array.reshape(array.shape[0], -1))
    rows: list[int] = bad.any(axis=1).nonzero()[0].tolist()
    row = rows[0]
    values = array[row].reshape(-1)
    column = int(bad[row].nonzero()[0][0])
    at = f"[{column}]" if values.size > 1 else ""
    raise NonFiniteError(
        f"{_prefix(context)}: {context[2]} {leaf.name} of row {row} holds "
        f"{values[column].item()!r}{at} (as {array.dtype}), expected finite values for the "
        f"env's single_observation_space {leaf.space!r} (non-finite rows: {rows})"
    )


def as_numpy(value: Any, context: _Context, *names: str) -> np.ndarray:
    """``np.asarray(value)`` of a wrapped env's output ``context`` (``names`` say which part).

    Raises:
        EnvContractError: If NumPy cannot convert ``value``; the message names
            the call, the step and the output.
    """
    try:
        return np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as error:
        name = " ".join((context[2], *names))
        raise EnvContractError(
            f"{_prefix(context)}: {name} must be a NumPy array, as Gymnasium's vector API "
            f"returns, got {describe(value)} ({error})"
        ) from error


@final
class ObservationConverter:
    """Checks batched NumPy observations of one space and turns them into TensorDicts.

    The expected shape and dtype of every leaf are worked out once; each batch
    then costs a shape comparison and a dtype identity test per leaf before
    its conversion, and a finiteness test (:func:`check_finite`) per floating
    leaf after it. Anything that does not fit the space raises
    :class:`~typedrl.errors.EnvContractError` naming the caller (``where``),
    the step, the leaf's key, what came and what the space declares; a NaN or
    an infinity raises :class:`~typedrl.errors.NonFiniteError` naming the row too.

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
        >>> converter.batch(np.zeros((3, 4)), where="MyEnv.step", step=7)
        Traceback (most recent call last):
        ...
        typedrl.errors.EnvContractError: MyEnv.step (step 7): observation 'obs' has shape
        [3, 4], expected [3, 2] ([num_envs, *space.shape]) from the env's
        single_observation_space Box(-1.0, 1.0, (2,), float32)
    """

    def __init__(
        self,
        space: gym.Space[Any],
        *,
        num_envs: int,
        device: torch.device,
        float_dtype: torch.dtype = torch.float32,
    ) -> None:
        refuse_unsupported(space)
        self.space = space
        self.num_envs = num_envs
        self.device = device
        self._on_cpu = device.type == "cpu"
        self._batch_size = torch.Size((num_envs,))
        self._is_dict = isinstance(space, gym.spaces.Dict)
        numpy_float = torch.empty(0, dtype=float_dtype).numpy().dtype
        self._leaves = _leaf_tree(space, num_envs, numpy_float, ())
        self.single_leaf: LeafSpec | None = None if self._is_dict else self._leaves
        """The one leaf of a non-``Dict`` space, for callers that convert it inline."""
        self.converted_space = _converted(space, numpy_float)
        """The space of the returned observations (see :func:`converted_space`)."""

    # ---------------------------------------------------------------- public

    def batch(
        self,
        data: Any,
        *,
        copy: bool = True,
        where: str = "ObservationConverter.batch",
        step: int | None = None,
        what: str = "observation",
    ) -> Obs:
        """Check and convert one batched observation (``num_envs`` rows) into a TensorDict.

        Args:
            data: The batch: an array, or a dict of them for a ``Dict`` space.
            copy: Copy every leaf first, so that the tensors never alias the
                caller's arrays. Pass ``False`` only for leaves that nothing
                else holds or will write to, and that are writeable NumPy arrays
                with non-negative strides (such as a fresh ``copy.deepcopy`` of
                an array): the tensors then share their memory. A leaf whose
                dtype is converted is always copied.
            where: Who returned ``data``, for messages (``"GymnasiumVecEnv.step"``).
            step: The step number, for messages; ``None`` outside steps.
            what: What ``data`` is, for messages.

        Raises:
            EnvContractError: If a leaf is missing or not an array, or its shape
                or dtype does not fit the space.
            NonFiniteError: If a floating leaf holds a NaN or an infinity.
        """
        leaf = self.single_leaf
        if leaf is None:
            return self._convert_tree(data, self._leaves, (where, step, what), copy=copy)
        # The common case, inline: one array of the right shape and dtype kind.
        if type(data) is np.ndarray and data.shape == leaf.batch_shape:
            dtype = data.dtype
            if dtype is leaf.dtype:
                array = np.array(data, copy=True) if copy else data
            elif dtype.kind in leaf.kinds:
                array = data.astype(leaf.dtype)
            else:
                raise self._dtype_error(leaf, dtype, (where, step, what))
        else:
            array = self._array(data, leaf, (where, step, what), copy=copy)
        check_finite(array, leaf, (where, step, what))
        tensor = torch.from_numpy(array)
        if not self._on_cpu:
            tensor = tensor.to(self.device, non_blocking=True)
        return new_tensordict({"obs": tensor}, self._batch_size, self.device)

    def batch_with_rows(
        self,
        data: Any,
        rows: Sequence[int],
        items: Sequence[Any],
        *,
        where: str = "ObservationConverter.batch_with_rows",
        step: int | None = None,
        what: str = "final_obs",
    ) -> Obs:
        """Convert a batch whose row ``rows[k]`` is replaced by the single observation ``items[k]``.

        Used for terminal observations: the replacement happens on the NumPy
        side, before the one conversion, which is far cheaper than an indexed
        TensorDict assignment. ``data`` and ``items`` are copied, never
        aliased; each item is checked against the space's row shape and dtype.

        Raises:
            EnvContractError: If ``data`` or an item does not fit the space.
            NonFiniteError: If a floating leaf of the result holds a NaN or an infinity.
        """
        leaf = self.single_leaf
        if leaf is None:
            context = (where, step, what)
            replaced = self._replace_rows(self._leaves, data, rows, items, context)
            return self._convert_tree(replaced, self._leaves, context, copy=False)
        # The common case, inline: one array, rows that are arrays of the right shape.
        if type(data) is np.ndarray and data.shape == leaf.batch_shape:
            if data.dtype.kind not in leaf.kinds:
                raise self._dtype_error(leaf, data.dtype, (where, step, what))
            array = data.astype(leaf.dtype)  # a copy, in the leaf's dtype
        else:
            array = self._array(data, leaf, (where, step, what), copy=True)
        row_shape, kinds = leaf.row_shape, leaf.kinds
        # Indexing beats zip(..., strict=True) here: this runs on every step where rows end.
        for k, row in enumerate(rows):
            item = items[k]
            if not (
                type(item) is np.ndarray and item.shape == row_shape and item.dtype.kind in kinds
            ):
                item = self._row(item, leaf, row, (where, step, what))
            array[row] = item
        check_finite(array, leaf, (where, step, what))
        tensor = torch.from_numpy(array)
        if not self._on_cpu:
            tensor = tensor.to(self.device, non_blocking=True)
        return new_tensordict({"obs": tensor}, self._batch_size, self.device)

    # ------------------------------------------------------------- helpers

    def _array(self, data: Any, leaf: LeafSpec, context: _Context, *, copy: bool) -> np.ndarray:
        """``data`` checked against ``leaf``, as an array of the leaf's dtype."""
        array = data if type(data) is np.ndarray else as_numpy(data, context, leaf.name)
        if array.shape != leaf.batch_shape:
            raise self._shape_error(leaf, array.shape, context)
        dtype = array.dtype
        if dtype is not leaf.dtype and dtype != leaf.dtype:
            if dtype.kind not in leaf.kinds:
                raise self._dtype_error(leaf, dtype, context)
            # NumPy's cast is a fraction of torch's on small arrays, and copies.
            return array.astype(leaf.dtype)
        if copy:
            # np.array(copy=True) detaches the tensor from buffers the env may reuse.
            return np.array(array, copy=True)
        return array

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        tensor = torch.from_numpy(array)
        if self._on_cpu:
            return tensor
        return tensor.to(self.device, non_blocking=True)

    def _convert_tree(self, data: Any, leaves: Any, context: _Context, *, copy: bool) -> Obs:
        values = self._entries(data, leaves, context)
        converted: dict[str, Any] = {}
        for key, sub in leaves.items():
            if isinstance(sub, dict):
                converted[key] = self._convert_tree(values[key], sub, context, copy=copy)
            else:
                array = self._array(values[key], sub, context, copy=copy)
                check_finite(array, sub, context)
                converted[key] = self._tensor(array)
        return new_tensordict(converted, self._batch_size, self.device)

    def _entries(
        self, data: Any, leaves: dict[str, Any], context: _Context, row: int | None = None
    ) -> Any:
        """``data`` if it is a dict with exactly the keys of ``leaves``; raise otherwise."""
        what = context[2] if row is None else f"{context[2]} of row {row}"
        if not isinstance(data, dict):
            raise EnvContractError(
                f"{_prefix(context)}: {what} must be a dict with keys {list(leaves)} for "
                f"the env's single_observation_space {self.space!r}, got {describe(data)}"
            )
        # dict_keys compare as sets, in C: a fraction of a Python loop over the keys.
        if data.keys() != leaves.keys():
            missing = [key for key in leaves if key not in data]
            extra = [key for key in data if key not in leaves]
            raise EnvContractError(
                f"{_prefix(context)}: {what} has keys {list(data)}, expected {list(leaves)} "
                f"(missing {missing}, unexpected {extra}) from the env's "
                f"single_observation_space {self.space!r}"
            )
        return data

    def _replace_rows(
        self, leaves: Any, data: Any, rows: Sequence[int], items: Sequence[Any], context: _Context
    ) -> Any:
        """A copy of the batch ``data`` with ``data[rows[k]] = items[k]``, leaf by leaf."""
        if isinstance(leaves, dict):
            data = self._entries(data, leaves, context)
            for row, item in zip(rows, items, strict=True):
                self._entries(item, leaves, context, row)
            return {
                key: self._replace_rows(
                    sub, data[key], rows, [item[key] for item in items], context
                )
                for key, sub in leaves.items()
            }
        array = self._array(data, leaves, context, copy=True)
        # Indexing beats zip(..., strict=True) here: this runs on every step where rows end.
        for k, row in enumerate(rows):
            array[row] = self._row(items[k], leaves, row, context)
        return array

    def _row(self, item: Any, leaf: LeafSpec, row: int, context: _Context) -> np.ndarray:
        """One row's observation ``item`` checked against ``leaf``."""
        value = item if type(item) is np.ndarray else as_numpy(item, context, leaf.name)
        if value.shape != leaf.row_shape:
            raise self._shape_error(leaf, value.shape, context, row=row)
        if value.dtype.kind not in leaf.kinds:
            raise self._dtype_error(leaf, value.dtype, context, row=row)
        return value

    def _shape_error(
        self, leaf: LeafSpec, got: tuple[int, ...], context: _Context, *, row: int | None = None
    ) -> EnvContractError:
        if row is None:
            expected, layout, of_row = leaf.batch_shape, "[num_envs, *space.shape]", ""
        else:
            expected, layout, of_row = leaf.row_shape, "space.shape", f" of row {row}"
        return EnvContractError(
            f"{_prefix(context)}: {context[2]} {leaf.name}{of_row} has shape {list(got)}, "
            f"expected {list(expected)} ({layout}) from the env's single_observation_space "
            f"{leaf.space!r}"
        )

    def _dtype_error(
        self, leaf: LeafSpec, got: np.dtype[Any], context: _Context, *, row: int | None = None
    ) -> EnvContractError:
        of_row = "" if row is None else f" of row {row}"
        return EnvContractError(
            f"{_prefix(context)}: {context[2]} {leaf.name}{of_row} has dtype {got}, expected "
            f"{_KIND_NAMES[leaf.kinds]} dtype (converted to {leaf.dtype}) from the env's "
            f"single_observation_space {leaf.space!r}"
        )
