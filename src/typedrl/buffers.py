"""The on-policy experience buffer and its minibatch plan.

:class:`ExperienceBuffer` stores one epoch of ``num_steps x num_envs``
transitions under registered keys and checks that every key was written at
every step before the data can be read. :func:`minibatch_indices` cuts the flattened
epoch into shuffled minibatches of a fixed size, in a number that depends only
on the configuration, so every rank of a data-parallel run takes the same
number of optimizer steps.

Layout
------

Storage is **time-major**: every key is stored as
``[num_steps, num_envs, *shape]`` and :meth:`ExperienceBuffer.flatten` maps
step ``t`` of env ``i`` to sample ``t * num_envs + i``. Advantage estimation
(:func:`typedrl.advantages.compute_gae`) works on the same
``[num_steps, num_envs]`` layout before flattening.

Ghost transitions
-----------------

Every buffer has the key ``"valid"`` (``torch.bool``, one flag per step and
env), registered at construction and written like any other key. Ghost
samples (``valid == False``) stay in the flattened data and in the minibatch
index space, so the number and size of minibatches never depend on the data
(identical on every rank, which data-parallel training needs); losses mask
them out with the ``"valid"`` key.
"""

import math
from collections.abc import ItemsView, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import (
    Final,
    NamedTuple,
    Protocol,
    TypeAlias,
    TypeVar,
    cast,
    final,
    runtime_checkable,
)

import numpy as np
import numpy.typing as npt
import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl._validation import positive_int
from typedrl.errors import ConfigError, SpecError
from typedrl.types import BatchIndices

__all__ = [
    "VALID_KEY",
    "BufferKey",
    "ExperienceBuffer",
    "KeyMapping",
    "KeySpec",
    "minibatch_count",
    "minibatch_indices",
    "validate_batch_plan",
]

BufferKey: TypeAlias = str | tuple[str, ...]
"""A buffer key: a string, or a tuple of strings for a nested TensorDict entry.

Keys are reported in TensorDict's canonical form: a one-element tuple
``("reward",)`` is the same key as ``"reward"``.
"""

VALID_KEY: Final = "valid"
"""The key of the per-step validity mask every :class:`ExperienceBuffer` registers."""

_MAX_LISTED_STEPS: Final = 8

KeyT_co = TypeVar("KeyT_co", covariant=True)
ValueT_co = TypeVar("ValueT_co", covariant=True)


@runtime_checkable
class KeyMapping(Protocol[KeyT_co, ValueT_co]):
    """How the buffer's signatures spell "a mapping of buffer keys to values" for type checkers.

    :class:`~collections.abc.Mapping` is invariant in its key type, so a
    ``dict[str, Tensor]`` would not type-check where a
    ``Mapping[str | tuple[str, ...], Tensor]`` is expected. This protocol only
    reads ``items()``, which makes it covariant: dicts keyed by strings, by
    tuples or by both all fit. It is runtime-checkable so that the runtime
    type checks can test for ``items()``; the buffer itself requires a real
    :class:`~collections.abc.Mapping`.
    """

    def items(self) -> ItemsView[KeyT_co, ValueT_co]:
        """The mapping's ``(key, value)`` pairs."""
        ...


@final
class KeySpec(NamedTuple):
    """Shape (per row, without the ``num_steps, num_envs`` axes) and dtype of a key."""

    shape: tuple[int, ...]
    """Shape of one env's entry at one step; ``()`` for a scalar per row."""

    dtype: torch.dtype
    """Storage dtype (a write is copied into it)."""


@final
class ExperienceBuffer:
    """One epoch of on-policy transitions, stored time-major.

    Usage, in order:

    1. Register every key before writing it: :meth:`register_key` for a
       single key, :meth:`register_from` for every leaf of a TensorDict (the
       first observation, the outputs of one setup forward of the model), and
       :meth:`check_spec` to compare the registered keys with a declared spec.
       The key ``"valid"`` (``torch.bool``, shape ``()``) is registered at
       construction.
    2. For each step ``t`` of the epoch, :meth:`write` every key (in one call
       or several).
    3. Read the epoch with :meth:`stacked` (``[num_steps, num_envs]``) or
       :meth:`flatten` (``[num_steps * num_envs]``, time-major). Both first
       run :meth:`check_complete`.
    4. :meth:`reset_epoch` before writing the next epoch.

    Writes are the hot path of every rollout and are not validated: a write
    copies each tensor into its key's storage with :meth:`torch.Tensor.copy_`,
    so the tensor must have the registered per-row shape (``[num_envs,
    *shape]``), and it takes the storage's dtype and device. Write coverage is
    tracked in host memory (one flag per key and step), so that
    :meth:`check_complete` can refuse an epoch with a key missing at some step
    (stale data from the last epoch) without synchronising with the device.

    Args:
        num_envs: Rows of the vector env (a positive int).
        num_steps: Steps per epoch (a positive int).
        device: Device of the storage.

    Raises:
        ConfigError: If ``num_envs`` or ``num_steps`` is not a positive int.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> buffer = ExperienceBuffer(num_envs=2, num_steps=3, device="cpu")
        >>> obs = TensorDict({"obs": torch.zeros(2, 4)}, batch_size=[2])
        >>> buffer.register_from(obs, prefix="obs")
        (('obs', 'obs'),)
        >>> buffer.register_key("reward", (), torch.float32)
        >>> for t in range(3):
        ...     buffer.write(t, obs, prefix="obs")
        ...     buffer.write(t, {"reward": torch.full((2,), float(t)),
        ...                      "valid": torch.ones(2, dtype=torch.bool)})
        >>> flat = buffer.flatten()
        >>> flat.batch_size, flat["reward"].tolist()
        (torch.Size([6]), [0.0, 0.0, 1.0, 1.0, 2.0, 2.0])
        >>> buffer.reset_epoch()
        >>> buffer.write(0, {"reward": torch.zeros(2)})
        >>> buffer.flatten()
        Traceback (most recent call last):
        ...
        typedrl.errors.SpecError: ExperienceBuffer: the epoch is incomplete, keys not written:
        'valid' at steps [0, 1, 2] (3 of 3); ('obs', 'obs') at steps [0, 1, 2] (3 of 3);
        'reward' at steps [1, 2] (2 of 3). Write every registered key once per step
    """

    def __init__(self, *, num_envs: int, num_steps: int, device: torch.device | str) -> None:
        self.num_envs: Final[int] = positive_int("ExperienceBuffer", "num_envs", num_envs)
        """Rows per step."""
        self.num_steps: Final[int] = positive_int("ExperienceBuffer", "num_steps", num_steps)
        """Steps per epoch."""
        self.num_samples: Final = self.num_steps * self.num_envs
        """``num_steps * num_envs``: the batch size of :meth:`flatten`."""
        # Allocating resolves the device index ("cuda" -> "cuda:0").
        self.device: Final = torch.empty(0, device=device).device
        """Device of the storage (with its index resolved, e.g. ``cuda:0``)."""
        self._storage = TensorDict({}, batch_size=[num_steps, num_envs], device=self.device)
        self._specs: dict[BufferKey, KeySpec] = {}
        self._tensors: dict[BufferKey, Tensor] = {}
        self._written: dict[BufferKey, npt.NDArray[np.bool_]] = {}
        self.register_key(VALID_KEY, (), torch.bool)

    # ------------------------------------------------------------------ properties

    @property
    def keys(self) -> tuple[BufferKey, ...]:
        """Registered keys in registration order (``"valid"`` first)."""
        return tuple(self._specs)

    @property
    def specs(self) -> Mapping[BufferKey, KeySpec]:
        """Read-only mapping of each registered key to its per-row shape and dtype."""
        return MappingProxyType(dict(self._specs))

    # ---------------------------------------------------------------- registration

    def register_key(self, key: BufferKey, shape: Sequence[int], dtype: torch.dtype) -> None:
        """Register one key, stored as ``[num_steps, num_envs, *shape]``.

        Args:
            key: A string, or a tuple of strings for a nested entry. A key is
                registered once, and never both as a tensor and as a nested
                TensorDict.
            shape: Per-row shape (``()`` for one scalar per env and step).
            dtype: Storage dtype.
        """
        key = _canonical_key(key)
        spec = KeySpec(tuple(shape), dtype)
        tensor = torch.empty(
            (self.num_steps, self.num_envs, *spec.shape), dtype=spec.dtype, device=self.device
        )
        self._storage.set(key, tensor)
        self._specs[key] = spec
        self._tensors[key] = tensor
        self._written[key] = np.zeros(self.num_steps, dtype=np.bool_)

    def register_from(self, data: TensorDict, *, prefix: BufferKey = ()) -> tuple[BufferKey, ...]:
        """Register every tensor leaf of ``data`` with its per-row shape and dtype.

        Meant for the first observation of a rollout and for the outputs of one
        setup forward of the model.

        Args:
            data: A TensorDict with ``batch_size == [num_envs]``.
            prefix: Key under which the leaves are nested (``"obs"`` turns leaf
                ``"policy"`` into ``("obs", "policy")``); ``()`` for none. Pass
                the same prefix to :meth:`write`.

        Returns:
            The registered keys, in the order of ``data``'s leaves.
        """
        prefix_key = _as_tuple(prefix)
        keys = []
        for leaf_key, leaf in data.items(include_nested=True, leaves_only=True):
            key = _join(prefix_key, leaf_key)
            self.register_key(key, tuple(leaf.shape[1:]), leaf.dtype)
            keys.append(key)
        return tuple(keys)

    def check_spec(
        self, expected: KeyMapping[BufferKey, tuple[Sequence[int], torch.dtype]]
    ) -> None:
        """Check declared keys against the registered ones.

        Every key of ``expected`` must be registered with exactly that per-row
        shape and dtype; registered keys absent from ``expected`` are fine.

        Args:
            expected: Key to ``(shape, dtype)`` (a :class:`KeySpec` works too).

        Raises:
            SpecError: Listing every missing key and every mismatch, with the
                expected and the registered shape and dtype.
        """
        problems: list[str] = []
        for raw_key, (shape, dtype) in expected.items():
            key = _canonical_key(raw_key)
            declared = KeySpec(tuple(shape), dtype)
            got = self._specs.get(key)
            if got is None:
                problems.append(f"key {key!r} is not registered (expected {_show(declared)})")
            elif got != declared:
                problems.append(f"key {key!r}: expected {_show(declared)}, got {_show(got)}")
        if problems:
            raise SpecError(
                "ExperienceBuffer.check_spec: the rollout spec does not match the registered "
                f"keys: {'; '.join(problems)}. Registered keys: {self._describe_keys()}"
            )

    # --------------------------------------------------------------------- writing

    def write(
        self,
        step: int,
        data: TensorDict | KeyMapping[BufferKey, Tensor],
        *,
        prefix: BufferKey = (),
    ) -> None:
        """Write the entries of ``data`` at ``step``.

        Each tensor is copied into its registered key's storage (see the
        class docstring: writes are not validated); nothing synchronises
        with the device.

        Args:
            step: Step index in ``[0, num_steps)``.
            data: A TensorDict whose tensor leaves are written (its batch size
                is not checked), or a mapping of key to tensor.
            prefix: Prepended to every key of ``data`` (see :meth:`register_from`).
        """
        prefix_key = _as_tuple(prefix)
        entries = (
            data.items(include_nested=True, leaves_only=True)
            if isinstance(data, TensorDict)
            else data.items()
        )
        # A TensorDict's leaves are tensors.
        for key, value in cast("Iterable[tuple[BufferKey, Tensor]]", entries):
            canonical = _join(prefix_key, _canonical_key(key))
            self._tensors[canonical][step].copy_(value)
            self._written[canonical][step] = True

    def check_complete(self) -> None:
        """Check that every registered key was written at every step of this epoch.

        Host-side only.

        Raises:
            SpecError: Naming each incomplete key with its missing steps.
        """
        problems: list[str] = []
        for key, written in self._written.items():
            missing = np.flatnonzero(~written)
            if missing.size:
                shown = ", ".join(str(int(s)) for s in missing[:_MAX_LISTED_STEPS])
                more = ", ..." if missing.size > _MAX_LISTED_STEPS else ""
                problems.append(
                    f"{key!r} at steps [{shown}{more}] ({missing.size} of {self.num_steps})"
                )
        if problems:
            raise SpecError(
                "ExperienceBuffer: the epoch is incomplete, keys not written: "
                f"{'; '.join(problems)}. Write every registered key once per step"
            )

    def reset_epoch(self) -> None:
        """Start a new epoch: forget which steps were written (the data stays until overwritten)."""
        for written in self._written.values():
            written[:] = False

    # --------------------------------------------------------------------- reading

    def stacked(self) -> TensorDict:
        """The complete epoch as a TensorDict with ``batch_size == [num_steps, num_envs]``.

        The leaves share memory with the buffer (valid until the next write);
        adding keys to the returned TensorDict (advantages, returns) does not
        change the buffer.

        Raises:
            SpecError: If the epoch is incomplete (see :meth:`check_complete`).
        """
        self.check_complete()
        return self._storage.copy()

    def flatten(self) -> TensorDict:
        """The complete epoch with ``batch_size == [num_steps * num_envs]``, time-major.

        Sample ``t * num_envs + i`` is step ``t`` of env ``i``; this equals
        ``stacked().reshape(-1)``. The leaves share memory with the buffer.

        Raises:
            SpecError: If the epoch is incomplete (see :meth:`check_complete`).
        """
        return self.stacked().reshape(-1)

    def __repr__(self) -> str:
        return (
            f"ExperienceBuffer(num_envs={self.num_envs}, num_steps={self.num_steps}, "
            f"device={self.device}, keys={self._describe_keys()})"
        )

    # --------------------------------------------------------------------- private

    def _describe_keys(self) -> str:
        return "[" + ", ".join(repr(key) for key in self._specs) + "]"


def _show(spec: KeySpec) -> str:
    return f"shape {list(spec.shape)}, dtype {spec.dtype}"


def _canonical_key(key: BufferKey) -> BufferKey:
    """One-element tuples become plain strings, as in TensorDict."""
    return key[0] if isinstance(key, tuple) and len(key) == 1 else key


def _as_tuple(key: BufferKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else key


def _join(prefix: tuple[str, ...], key: BufferKey) -> BufferKey:
    if not prefix:
        return key
    return (*prefix, *_as_tuple(key))


# ------------------------------------------------------------------------ minibatches


def _checked_plan(
    where: str, num_samples: int, samples_text: str, *, batch_size: object, num_mini_epochs: object
) -> int:
    """The minibatch count of ``num_samples`` (described by ``samples_text`` in errors)."""
    epochs = positive_int(where, "num_mini_epochs", num_mini_epochs)
    size = positive_int(where, "batch_size", batch_size)
    if size > num_samples:
        raise ConfigError(
            f"{where}: batch_size ({size}) must be <= the number of samples "
            f"({samples_text}); lower batch_size or collect more samples"
        )
    # Exact integer ceil(num_samples * num_mini_epochs / batch_size).
    return -(-num_samples * epochs // size)


def minibatch_count(*, num_samples: int, batch_size: int, num_mini_epochs: int) -> int:
    """Number of minibatches :func:`minibatch_indices` returns.

    ``ceil(num_samples * num_mini_epochs / batch_size)``, computed exactly in integers.

    Args:
        num_samples: Samples per epoch (``num_steps * num_envs``), a positive int.
        batch_size: Samples per minibatch, a positive int ``<= num_samples``.
        num_mini_epochs: Passes over the data per epoch, a positive int.

    Raises:
        ConfigError: If a number is not a positive int or ``batch_size > num_samples``.

    Example:
        >>> minibatch_count(num_samples=10, batch_size=4, num_mini_epochs=3)
        8
        >>> minibatch_count(num_samples=10, batch_size=16, num_mini_epochs=3)
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: minibatch_count: batch_size (16) must be <= the number of
        samples (num_samples = 10); lower batch_size or collect more samples
    """
    where = "minibatch_count"
    positive_int(where, "num_samples", num_samples)
    samples_text = f"num_samples = {num_samples}"
    return _checked_plan(
        where, num_samples, samples_text, batch_size=batch_size, num_mini_epochs=num_mini_epochs
    )


def validate_batch_plan(
    *, num_envs: int, num_steps: int, num_mini_epochs: int, batch_size: int
) -> int:
    """Check one rank's minibatch plan and return its minibatch count per epoch.

    In data-parallel training every rank collects ``num_envs * num_steps``
    samples and must run the same number of minibatches (a mismatch deadlocks
    the gradient all-reduce). This checks the local numbers; comparing the
    returned count across ranks is the caller's job.

    Args:
        num_envs: Env rows per rank.
        num_steps: Steps per epoch.
        num_mini_epochs: Passes over the data per epoch.
        batch_size: Samples per minibatch per rank.

    Returns:
        ``ceil(num_envs * num_steps * num_mini_epochs / batch_size)``.

    Raises:
        ConfigError: Naming the numbers, if one is not a positive int or the
            per-rank batch size exceeds the per-rank sample count.

    Example:
        >>> validate_batch_plan(num_envs=8, num_steps=16, num_mini_epochs=4, batch_size=48)
        11
        >>> validate_batch_plan(num_envs=4, num_steps=8, num_mini_epochs=1, batch_size=64)
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: validate_batch_plan: batch_size (64) must be <= the number
        of samples (num_envs 4 x num_steps 8 = 32 per rank); lower batch_size or collect more
        samples
    """
    where = "validate_batch_plan"
    positive_int(where, "num_envs", num_envs)
    positive_int(where, "num_steps", num_steps)
    num_samples = num_envs * num_steps
    samples_text = f"num_envs {num_envs} x num_steps {num_steps} = {num_samples} per rank"
    return _checked_plan(
        where, num_samples, samples_text, batch_size=batch_size, num_mini_epochs=num_mini_epochs
    )


def minibatch_indices(
    *, num_samples: int, batch_size: int, num_mini_epochs: int, generator: torch.Generator
) -> list[BatchIndices]:
    """Shuffled minibatch indices for ``num_mini_epochs`` passes over ``num_samples`` samples.

    The rule: draw one fresh random permutation of ``range(num_samples)`` per
    mini-epoch, concatenate them, and cut the sequence into consecutive chunks
    of ``batch_size``. When ``batch_size`` does not divide
    ``num_samples * num_mini_epochs``, the last chunk is topped up from the
    start of one further permutation, so that every minibatch is full. Hence:

    - there are exactly ``ceil(num_samples * num_mini_epochs / batch_size)``
      minibatches (:func:`minibatch_count`), each of exactly ``batch_size``
      indices in ``[0, num_samples)``;
    - every sample appears ``num_mini_epochs`` or ``num_mini_epochs + 1``
      times, and exactly ``count * batch_size - num_samples * num_mini_epochs``
      samples appear ``num_mini_epochs + 1`` times;
    - a minibatch that lies within one permutation has no repeated index; one
      that straddles two permutations may repeat an index.

    Ghost samples are not removed: the count depends on the configuration
    only, and losses mask ghosts with the ``"valid"`` key.

    Args:
        num_samples: Samples per epoch, a positive int.
        batch_size: Samples per minibatch, a positive int ``<= num_samples``.
        num_mini_epochs: Passes over the data, a positive int.
        generator: Source of randomness; the indices are ``int64`` tensors on
            the generator's device.

    Returns:
        The minibatches, each an ``int64`` tensor of shape ``[batch_size]``.

    Raises:
        ConfigError: As :func:`minibatch_count`.

    Example:
        >>> import torch
        >>> batches = minibatch_indices(
        ...     num_samples=5, batch_size=2, num_mini_epochs=1,
        ...     generator=torch.Generator().manual_seed(0),
        ... )
        >>> [batch.shape[0] for batch in batches]
        [2, 2, 2]
        >>> sorted(torch.cat(batches)[:5].tolist())
        [0, 1, 2, 3, 4]
    """
    count = minibatch_count(
        num_samples=num_samples, batch_size=batch_size, num_mini_epochs=num_mini_epochs
    )
    return _shuffled_minibatches(num_samples, batch_size, count, generator)


def _shuffled_minibatches(
    num_samples: int, batch_size: int, count: int, generator: torch.Generator
) -> list[BatchIndices]:
    """:func:`minibatch_indices` for numbers already checked: ``count`` minibatches."""
    total = count * batch_size
    # Enough permutations to fill every minibatch (one top-up when batch_size <= num_samples).
    num_permutations = math.ceil(total / num_samples)
    order = torch.cat(
        [
            torch.randperm(num_samples, generator=generator, device=generator.device)
            for _ in range(num_permutations)
        ]
    )
    return list(order[:total].view(count, batch_size).unbind(0))
