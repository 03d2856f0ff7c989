"""Checkpoints: one file format for every typedrl trainer.

A checkpoint is *data, never code*. It is written with :func:`torch.save` as a
plain dict of tensors, numbers, strings and containers, and read back with
``torch.load(weights_only=True)`` only, so opening a file cannot run code.

- :class:`Checkpoint` is the in-memory, validated form shared by the PPO agent
  and the APG trainer: state dicts of modules, optimizers and schedulers,
  counters, the best score, the JSON-like config, per-rank RNG states
  (:class:`RngState`) and :class:`CheckpointMetadata`.
- :func:`save_checkpoint` writes atomically: a crash leaves either the old file
  or the new one, never half of one. :func:`load_checkpoint` raises
  :class:`~typedrl.errors.CheckpointError` naming the file for anything that is
  not a complete checkpoint of the supported schema.
- :func:`save_inference_checkpoint` / :func:`load_inference_checkpoint` handle
  the slim form (policy, observation normaliser and config) used for
  evaluation and export.
- :class:`CheckpointPaths` names the files of a run directory.

Only one process should write a file. In a distributed run the caller saves on
global rank 0 after gathering every rank's :func:`capture_rng_state` into
:attr:`Checkpoint.rng` (index = global rank); this module performs no
collectives.

Example:
    >>> import tempfile
    >>> import torch
    >>> from pathlib import Path
    >>> policy = torch.nn.Linear(3, 2)
    >>> checkpoint = Checkpoint(
    ...     kind="ppo",
    ...     modules={"policy": policy.state_dict()},
    ...     counters={"epoch": 12, "timesteps": 98_304},
    ...     config={"lr": 3e-4, "hidden_sizes": [64, 64]},
    ...     rng=(capture_rng_state(),),
    ... )
    >>> with tempfile.TemporaryDirectory() as directory:
    ...     paths = CheckpointPaths(directory)
    ...     written = save_checkpoint(paths.last, checkpoint)
    ...     restored = load_checkpoint(written, expected_kind="ppo")
    >>> restored.counters
    {'epoch': 12, 'timesteps': 98304}
    >>> load_into(policy, restored.modules["policy"], name="policy", path=written)
"""

import errno
import math
import os
import pickle
import random
import re
import secrets
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any, Final, Literal, TypeAlias, final

import numpy as np
import torch
from jaxtyping import Int64, UInt8
from torch import Tensor

from typedrl._validation import describe, no_type_check, non_negative_int
from typedrl.errors import CheckpointError, ConfigError, TypedRLError
from typedrl.protocols import SupportsStateDict

__all__ = [
    "CHECKPOINT_KINDS",
    "CHECKPOINT_SUFFIX",
    "FORMAT_MARKER",
    "OBSERVATION_NORMALIZER_KEY",
    "POLICY_KEY",
    "SCHEMA_VERSION",
    "Checkpoint",
    "CheckpointKind",
    "CheckpointMetadata",
    "CheckpointPaths",
    "InferenceCheckpoint",
    "RngState",
    "StrPath",
    "capture_rng_state",
    "load_checkpoint",
    "load_inference_checkpoint",
    "load_into",
    "restore_rng_state",
    "save_checkpoint",
    "save_inference_checkpoint",
]

SCHEMA_VERSION: Final = 1
"""Version of the on-disk layout this release writes and the only one it reads."""

FORMAT_MARKER: Final = "typedrl.checkpoint"
"""Value stored under the ``"format"`` key; files without it are foreign."""

CHECKPOINT_SUFFIX: Final = ".ckpt"
"""File-name suffix of the files named by :class:`CheckpointPaths`."""

POLICY_KEY: Final = "policy"
"""Key of the policy's state dict in :attr:`Checkpoint.modules` (required in every kind)."""

OBSERVATION_NORMALIZER_KEY: Final = "observation_normalizer"
"""Key of the observation normaliser's state dict in :attr:`Checkpoint.modules`, if any."""

CheckpointKind: TypeAlias = Literal["ppo", "apg", "inference"]
"""Which trainer wrote a checkpoint; ``"inference"`` is the slim, policy-only form."""

CHECKPOINT_KINDS: Final[tuple[CheckpointKind, ...]] = ("ppo", "apg", "inference")
"""Every valid :data:`CheckpointKind`."""

StrPath: TypeAlias = str | os.PathLike[str]
"""A file-system path given as ``str`` or :class:`os.PathLike`."""

_TRAINING_KINDS: Final[tuple[CheckpointKind, ...]] = ("ppo", "apg")
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_MT19937_KEY_SIZE: Final = 624
_PYTHON_STATE_SIZE: Final = 625  # random.getstate(): 624 key words and the position
_UINT32_LIMIT: Final = 2**32
_PERIODIC_PATTERN: Final = re.compile(r"epoch_(\d+)\.ckpt")
_PERIODIC_DIGITS: Final = 8
_PAYLOAD_KEYS: Final = (
    "format",
    "schema_version",
    "kind",
    "modules",
    "optimizers",
    "schedulers",
    "counters",
    "best_score",
    "config",
    "rng",
    "metadata",
)


# ---------------------------------------------------------------------------- value types


@final
@no_type_check
@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class RngState:
    """The global random-number-generator states of one process (one rank).

    Everything is stored as tensors and plain numbers so that it survives
    ``torch.load(weights_only=True)``. Build one with :func:`capture_rng_state`
    and apply it with :func:`restore_rng_state`; construction validates every
    field and raises :class:`~typedrl.errors.ConfigError` naming the field.

    Generators a trainer creates itself (a :class:`torch.Generator` of an env or
    a sampler) are not global and belong in the trainer's state dicts instead.
    """

    torch_cpu: UInt8[Tensor, " torch_state"]
    """:func:`torch.get_rng_state`: the default CPU generator, a ``uint8`` CPU tensor."""

    torch_cuda: tuple[UInt8[Tensor, " cuda_state"], ...] = ()
    """:func:`torch.cuda.get_rng_state_all`: one state per visible CUDA device, or empty."""

    numpy_key: Int64[Tensor, " 624"]
    """Key of numpy's legacy global ``MT19937`` generator, as ``int64`` values in ``[0, 2**32)``."""

    numpy_pos: int
    """Position in :attr:`numpy_key`, in ``[0, 624]``."""

    numpy_has_gauss: int
    """``1`` when numpy holds a cached Gaussian draw, else ``0``."""

    numpy_cached_gaussian: float
    """The cached Gaussian draw (meaningful when :attr:`numpy_has_gauss` is ``1``)."""

    python_version: int
    """First item of :func:`random.getstate` (the state-format version)."""

    python_state: Int64[Tensor, " 625"]
    """Second item of :func:`random.getstate` (624 key words and the position), as ``int64``."""

    python_gauss_next: float | None
    """Third item of :func:`random.getstate`: the cached :func:`random.gauss` draw, if any."""

    def __post_init__(self) -> None:
        _check_state_tensor("RngState.torch_cpu", self.torch_cpu)
        cuda: object = self.torch_cuda
        if isinstance(cuda, list):
            object.__setattr__(self, "torch_cuda", tuple(cuda))
        if not isinstance(self.torch_cuda, tuple):
            raise ConfigError(
                f"RngState.torch_cuda must be a tuple of tensors, got {describe(self.torch_cuda)}"
            )
        for index, cuda_state in enumerate(self.torch_cuda):
            _check_state_tensor(f"RngState.torch_cuda[{index}]", cuda_state)
        _check_word_tensor("RngState.numpy_key", self.numpy_key, _MT19937_KEY_SIZE)
        _check_int_range("RngState.numpy_pos", self.numpy_pos, 0, _MT19937_KEY_SIZE)
        _check_int_range("RngState.numpy_has_gauss", self.numpy_has_gauss, 0, 1)
        _check_float("RngState.numpy_cached_gaussian", self.numpy_cached_gaussian)
        _check_int_range("RngState.python_version", self.python_version, 0, _INT64_MAX)
        _check_word_tensor("RngState.python_state", self.python_state, _PYTHON_STATE_SIZE)
        if self.python_gauss_next is not None:
            _check_float("RngState.python_gauss_next", self.python_gauss_next)

    def __repr__(self) -> str:
        return f"RngState(torch_cuda_devices={len(self.torch_cuda)})"


@final
@no_type_check
@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointMetadata:
    """Where and when a checkpoint was written; informative, never used to restore state.

    Example:
        >>> metadata = CheckpointMetadata.now(world_size=4)
        >>> metadata.world_size, metadata.torch_version == torch.__version__
        (4, True)
    """

    typedrl_version: str
    """Version of typedrl that wrote the file."""

    torch_version: str
    """Version of torch that wrote the file."""

    created: str
    """Creation time, ISO 8601 in UTC (``2025-01-31T12:00:00+00:00``)."""

    world_size: int = 1
    """Number of ranks of the run; :attr:`Checkpoint.rng` holds one state per rank."""

    def __post_init__(self) -> None:
        for name in ("typedrl_version", "torch_version", "created"):
            value: object = getattr(self, name)
            if type(value) is not str:
                raise ConfigError(
                    f"CheckpointMetadata.{name} must be a builtin str, got {describe(value)}"
                )
        _check_int_range("CheckpointMetadata.world_size", self.world_size, 1, _INT64_MAX)

    @classmethod
    def now(cls, *, world_size: int = 1) -> "CheckpointMetadata":
        """Describe a checkpoint written now by this process's typedrl and torch.

        Args:
            world_size: Number of ranks of the run (1 without distribution).
        """
        return cls(
            typedrl_version=_typedrl_version(),
            torch_version=str(torch.__version__),  # a TorchVersion would not load back
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            world_size=world_size,
        )


@final
@no_type_check
@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class Checkpoint:
    """Everything a trainer needs to resume, as validated plain data.

    Construction checks every field and raises
    :class:`~typedrl.errors.ConfigError` naming the offending field and path
    (``Checkpoint.config['optimizer']['betas']``): a value that
    ``torch.load(weights_only=True)`` could not read back is refused *before*
    anything is written.

    The state dicts are held by reference, as :meth:`torch.nn.Module.state_dict`
    returns them (their tensors share memory with the live parameters): build
    the checkpoint right before saving it.

    Rules between fields: :data:`POLICY_KEY` is in :attr:`modules` for every
    kind; training kinds (``"ppo"``, ``"apg"``) hold one :class:`RngState` per
    rank (``len(rng) == metadata.world_size``); ``"inference"`` checkpoints
    hold no optimizer, scheduler or RNG state.

    Example:
        >>> import torch
        >>> Checkpoint(kind="apg", modules={"policy": {}}, counters={"updates": 1.5e3})
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: Checkpoint.rng must hold one RngState per rank
        (metadata.world_size=1) in a checkpoint of kind 'apg', got 0
        >>> Checkpoint(kind="inference", modules={"policy": {}}, config={"sizes": (64, 64)})
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: Checkpoint.config['sizes'] must be JSON-like ...
    """

    schema_version: int = SCHEMA_VERSION
    """Layout version; always :data:`SCHEMA_VERSION` (files of other versions do not load)."""

    kind: CheckpointKind
    """Which trainer wrote the checkpoint (``"ppo"``, ``"apg"``) or ``"inference"``."""

    modules: dict[str, dict[str, Any]]
    """State dicts of modules and normalisers by name: :data:`POLICY_KEY` (required),
    ``"critic"``, ``"target_critic"``, :data:`OBSERVATION_NORMALIZER_KEY`, ..."""

    optimizers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Optimizer state dicts by name (``"policy"``, ``"critic"``, ...)."""

    schedulers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Learning-rate scheduler state dicts by name."""

    counters: dict[str, int | float] = field(default_factory=dict)
    """Progress counters (epochs, updates, timesteps): ``int`` in the int64 range or finite
    ``float``; builtin types only (convert numpy and tensor scalars with ``int()``/``float()``)."""

    best_score: float | None = None
    """Best evaluation score so far (finite), or ``None`` before the first evaluation."""

    config: dict[str, Any] = field(default_factory=dict)
    """The run's configuration, JSON-like: ``str``, ``int``, ``float``, ``bool``, ``None``,
    ``list`` and ``dict`` with ``str`` keys (no tuples, no numpy values)."""

    rng: tuple[RngState, ...] = ()
    """One :class:`RngState` per rank, indexed by global rank; a list is converted to a tuple."""

    metadata: CheckpointMetadata = field(default_factory=CheckpointMetadata.now)
    """Versions, creation time and world size; by default this process, world size 1."""

    def __post_init__(self) -> None:
        if isinstance(self.schema_version, bool) or self.schema_version != SCHEMA_VERSION:
            raise ConfigError(
                f"Checkpoint.schema_version must be {SCHEMA_VERSION}, "
                f"got {describe(self.schema_version)}"
            )
        kind: object = self.kind
        if type(kind) is not str or kind not in CHECKPOINT_KINDS:
            raise ConfigError(
                f"Checkpoint.kind must be one of {list(CHECKPOINT_KINDS)}, got {describe(kind)}"
            )
        for group in ("modules", "optimizers", "schedulers"):
            _check_state_group(f"Checkpoint.{group}", getattr(self, group))
        if POLICY_KEY not in self.modules:
            raise ConfigError(
                f"Checkpoint.modules must hold the policy's state dict under {POLICY_KEY!r}, "
                f"got keys {sorted(self.modules)}"
            )
        _check_counters(self.counters)
        if self.best_score is not None:
            _check_float("Checkpoint.best_score", self.best_score, finite=True)
        if not isinstance(self.config, dict):
            raise ConfigError(f"Checkpoint.config must be a dict, got {describe(self.config)}")
        _check_json("Checkpoint.config", self.config)
        self._check_rng_and_metadata()

    def _check_rng_and_metadata(self) -> None:
        rng: object = self.rng
        if isinstance(rng, list):
            object.__setattr__(self, "rng", tuple(rng))
        if not isinstance(self.rng, tuple) or not all(
            isinstance(state, RngState) for state in self.rng
        ):
            raise ConfigError(
                f"Checkpoint.rng must be a tuple of RngState, got {describe(self.rng)}"
            )
        if not isinstance(self.metadata, CheckpointMetadata):
            raise ConfigError(
                f"Checkpoint.metadata must be a CheckpointMetadata, got {describe(self.metadata)}"
            )
        if self.kind == "inference":
            for name in ("optimizers", "schedulers", "rng"):
                if getattr(self, name):
                    raise ConfigError(
                        f"Checkpoint.{name} must be empty in an 'inference' checkpoint; "
                        "save a 'ppo' or 'apg' checkpoint to resume training"
                    )
        elif len(self.rng) != self.metadata.world_size:
            raise ConfigError(
                f"Checkpoint.rng must hold one RngState per rank "
                f"(metadata.world_size={self.metadata.world_size}) in a checkpoint of kind "
                f"{self.kind!r}, got {len(self.rng)}"
            )

    def rng_state(self, rank: int) -> RngState:
        """Return the RNG state saved by global rank ``rank``.

        Raises:
            CheckpointError: The checkpoint holds no state for ``rank`` (it was
                written with a different world size, or is an inference checkpoint).
        """
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < len(self.rng):
            raise CheckpointError(
                f"the checkpoint holds RNG states for {len(self.rng)} rank(s) "
                f"(world size {self.metadata.world_size}), rank {rank!r} asked; "
                "resume with the world size the checkpoint was written with"
            )
        return self.rng[rank]

    def __repr__(self) -> str:
        return (
            f"Checkpoint(kind={self.kind!r}, modules={sorted(self.modules)}, "
            f"optimizers={sorted(self.optimizers)}, schedulers={sorted(self.schedulers)}, "
            f"counters={self.counters!r}, best_score={self.best_score!r}, "
            f"ranks={len(self.rng)})"
        )


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class InferenceCheckpoint:
    """What :func:`load_inference_checkpoint` returns: all that acting needs."""

    policy_state: dict[str, Any]
    """The policy's state dict."""

    observation_normalizer_state: dict[str, Any] | None
    """The observation normaliser's state dict, or ``None`` when the run used none."""

    config: dict[str, Any]
    """The JSON-like config saved with the policy (to rebuild its architecture)."""

    kind: CheckpointKind
    """Kind of the file it was read from (training checkpoints hold a policy too)."""

    metadata: CheckpointMetadata
    """Versions, creation time and world size of the file."""

    def __repr__(self) -> str:
        return (
            f"InferenceCheckpoint(kind={self.kind!r}, policy_keys={sorted(self.policy_state)}, "
            f"observation_normalizer={self.observation_normalizer_state is not None})"
        )


# ---------------------------------------------------------------------------- RNG states


def capture_rng_state() -> RngState:
    """Capture this process's global torch, numpy and Python RNG states.

    Covers the default torch CPU generator, every visible CUDA device (when
    CUDA is available), numpy's legacy global generator (``np.random.*``) and
    the :mod:`random` module. In a distributed run every rank captures its own
    and the caller gathers them, in rank order, into :attr:`Checkpoint.rng`.

    Raises:
        ConfigError: numpy's global generator was replaced by one other than ``MT19937``.

    Example:
        >>> import random
        >>> state = capture_rng_state()
        >>> first = (torch.rand(2).tolist(), np.random.rand(), random.random())
        >>> restore_rng_state(state)
        >>> first == (torch.rand(2).tolist(), np.random.rand(), random.random())
        True
    """
    numpy_state = np.random.get_state(legacy=True)
    if not isinstance(numpy_state, tuple):
        raise ConfigError(
            "numpy's global generator must be MT19937 to be checkpointed, "
            f"got {numpy_state.get('bit_generator')!r}"
        )
    _, key, pos, has_gauss, cached_gaussian = numpy_state
    python_version, python_state, python_gauss_next = random.getstate()
    cuda = tuple(torch.cuda.get_rng_state_all()) if torch.cuda.is_available() else ()
    return RngState(
        torch_cpu=torch.get_rng_state(),
        torch_cuda=cuda,
        numpy_key=torch.from_numpy(key.astype(np.int64)),
        numpy_pos=int(pos),
        numpy_has_gauss=int(has_gauss),
        numpy_cached_gaussian=float(cached_gaussian),
        python_version=int(python_version),
        python_state=torch.tensor(python_state, dtype=torch.int64),
        python_gauss_next=python_gauss_next,
    )


def restore_rng_state(state: RngState) -> None:
    """Restore the global RNG states captured by :func:`capture_rng_state`, exactly.

    The next draws of torch (CPU and CUDA), numpy's global generator and
    :mod:`random` are then the ones that followed the capture. CUDA states are
    restored when CUDA is available; without CUDA they are ignored (there is
    no CUDA generator to restore, and a GPU run resumed on a CPU is not
    bit-exact anyway).

    Raises:
        CheckpointError: CUDA is available, but the number of visible devices
            differs from the number of saved CUDA states. Nothing is changed.
    """
    cuda_available = bool(state.torch_cuda) and torch.cuda.is_available()
    if cuda_available and torch.cuda.device_count() != len(state.torch_cuda):
        raise CheckpointError(
            f"the RNG state holds {len(state.torch_cuda)} CUDA generator state(s), but "
            f"{torch.cuda.device_count()} CUDA device(s) are visible; resume with the same "
            "visible devices (CUDA_VISIBLE_DEVICES) as the run that saved it"
        )
    torch.set_rng_state(state.torch_cpu)
    if cuda_available:
        torch.cuda.set_rng_state_all(list(state.torch_cuda))
    np.random.set_state(
        (
            "MT19937",
            state.numpy_key.numpy().astype(np.uint32),
            state.numpy_pos,
            state.numpy_has_gauss,
            state.numpy_cached_gaussian,
        )
    )
    random.setstate(
        (state.python_version, tuple(state.python_state.tolist()), state.python_gauss_next)
    )


# ---------------------------------------------------------------------------- save and load


def save_checkpoint(path: StrPath, checkpoint: Checkpoint) -> Path:
    """Write ``checkpoint`` to ``path`` atomically.

    The file is written under a temporary name in the same folder, flushed and
    fsynced, then moved onto ``path`` with :func:`os.replace`, and the folder
    is fsynced (POSIX). A crash or an error at any point leaves the previous
    file at ``path`` (if any) untouched and removes the temporary file. Missing
    parent folders are created.

    Call it from one process only (global rank 0 in a distributed run).

    Args:
        path: Destination file, conventionally from :class:`CheckpointPaths`.
        checkpoint: The validated checkpoint.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        CheckpointError: The file could not be written; the message names it.
    """
    target = Path(path)
    _atomic_save(_to_payload(checkpoint), target)
    return target


def load_checkpoint(
    path: StrPath,
    *,
    expected_kind: CheckpointKind | None = None,
    map_location: str | torch.device = "cpu",
) -> Checkpoint:
    """Read and validate a checkpoint written by :func:`save_checkpoint`.

    The file is opened with ``torch.load(weights_only=True)``, which can only
    create tensors and plain containers: loading runs no code from the file.

    Args:
        path: The checkpoint file.
        expected_kind: Refuse checkpoints of another kind (a PPO trainer passes
            ``"ppo"``). ``None`` accepts every kind.
        map_location: Device the tensors are loaded onto (RNG states always
            stay on the CPU).

    Returns:
        The validated checkpoint.

    Raises:
        CheckpointError: The message names the file and the problem: it is
            missing, empty, truncated or corrupt; foreign (not written by
            typedrl, or holding Python objects other than plain data); of
            another schema version (found and supported versions shown); of
            another kind than ``expected_kind``; or a field is malformed (the
            field is named).
    """
    file = Path(path)
    return _from_payload(_read_payload(file, map_location), file, expected_kind)


def load_into(
    target: SupportsStateDict, state: dict[str, Any], *, name: str, path: StrPath
) -> None:
    """Load ``state`` into ``target``, turning a mismatch into a clear error.

    Missing or unexpected keys, shape mismatches and parameter-group
    mismatches raised by ``target.load_state_dict`` become a
    :class:`~typedrl.errors.CheckpointError` that names the component and the
    file. A module may be partly updated when the error is raised: discard it.

    Args:
        target: The module, optimizer, scheduler or normaliser to restore.
        state: Its state dict from the checkpoint (passed as is, so a module's
            ``_metadata`` is kept).
        name: Component name for the message (``"policy"``, ``"optimizers['critic']"``).
        path: The checkpoint file, for the message.

    Raises:
        CheckpointError: ``target`` refused the state.
    """
    try:
        target.load_state_dict(state)
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError, TypedRLError) as err:
        raise CheckpointError(
            f"cannot restore {name} from checkpoint {Path(path)}: {type(err).__name__}: "
            f"{err}\nThe checkpoint was probably written for another architecture or "
            "config: compare the config stored in it with the current one."
        ) from err


def save_inference_checkpoint(
    path: StrPath,
    *,
    policy_state: dict[str, Any],
    config: dict[str, Any],
    observation_normalizer_state: dict[str, Any] | None = None,
) -> Path:
    """Write a slim ``"inference"`` checkpoint: policy, normaliser and config only.

    Args:
        path: Destination file (written atomically, as :func:`save_checkpoint`).
        policy_state: The policy's state dict.
        config: The JSON-like config needed to rebuild the policy.
        observation_normalizer_state: The observation normaliser's state dict, if any.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        ConfigError: A value cannot be stored (the path to it is named).
        CheckpointError: The file could not be written.

    Example:
        >>> import tempfile
        >>> import torch
        >>> from pathlib import Path
        >>> policy = torch.nn.Linear(4, 2)
        >>> with tempfile.TemporaryDirectory() as directory:
        ...     path = save_inference_checkpoint(
        ...         Path(directory) / "policy.ckpt",
        ...         policy_state=policy.state_dict(),
        ...         config={"obs_dim": 4, "act_dim": 2},
        ...     )
        ...     loaded = load_inference_checkpoint(path)
        >>> loaded.kind, loaded.config, loaded.observation_normalizer_state
        ('inference', {'obs_dim': 4, 'act_dim': 2}, None)
        >>> _ = policy.load_state_dict(loaded.policy_state)
    """
    modules = {POLICY_KEY: policy_state}
    if observation_normalizer_state is not None:
        modules[OBSERVATION_NORMALIZER_KEY] = observation_normalizer_state
    return save_checkpoint(path, Checkpoint(kind="inference", modules=modules, config=config))


def load_inference_checkpoint(
    path: StrPath, *, map_location: str | torch.device = "cpu"
) -> InferenceCheckpoint:
    """Read the policy, observation normaliser and config of any checkpoint.

    Accepts slim ``"inference"`` files and full training checkpoints alike
    (every kind holds the policy under :data:`POLICY_KEY`), so a run's
    ``best.ckpt`` can be evaluated or exported directly.

    Raises:
        CheckpointError: As :func:`load_checkpoint`.
    """
    checkpoint = load_checkpoint(path, map_location=map_location)
    return InferenceCheckpoint(
        policy_state=checkpoint.modules[POLICY_KEY],
        observation_normalizer_state=checkpoint.modules.get(OBSERVATION_NORMALIZER_KEY),
        config=checkpoint.config,
        kind=checkpoint.kind,
        metadata=checkpoint.metadata,
    )


# ---------------------------------------------------------------------------- file names


@final
@no_type_check
class CheckpointPaths:
    """File names of a run's checkpoint folder.

    - :attr:`last`: ``last.ckpt``, overwritten at every checkpoint (resume from it);
    - :attr:`best`: ``best.ckpt``, overwritten when the score strictly improves;
    - :meth:`periodic`: ``epoch_<n>.ckpt`` with ``n`` zero-padded to 8 digits
      (``epoch_00000042.ckpt``), so that names sort in numeric order. ``n`` is
      the trainer's progress counter (the epoch for PPO, the update for APG);
      numbers of more than 8 digits are written in full and still recognised.

    Temporary files of interrupted writes (``.<name>.<random>.tmp``) are never
    listed.

    Example:
        >>> paths = CheckpointPaths("runs/cartpole/checkpoints")
        >>> paths.last.name, paths.best.name, paths.periodic(42).name
        ('last.ckpt', 'best.ckpt', 'epoch_00000042.ckpt')
    """

    __slots__ = ("_directory",)

    def __init__(self, directory: StrPath) -> None:
        self._directory = Path(directory)

    @property
    def directory(self) -> Path:
        """The folder the checkpoints live in (created by the first save)."""
        return self._directory

    @property
    def last(self) -> Path:
        """``<directory>/last.ckpt``."""
        return self._directory / f"last{CHECKPOINT_SUFFIX}"

    @property
    def best(self) -> Path:
        """``<directory>/best.ckpt``."""
        return self._directory / f"best{CHECKPOINT_SUFFIX}"

    def periodic(self, index: int) -> Path:
        """``<directory>/epoch_<index>.ckpt``, ``index`` zero-padded to 8 digits.

        Raises:
            ConfigError: ``index`` is not a non-negative ``int``.
        """
        non_negative_int("CheckpointPaths.periodic", "index", index)
        return self._directory / f"epoch_{index:0{_PERIODIC_DIGITS}d}{CHECKPOINT_SUFFIX}"

    def periodic_checkpoints(self) -> list[tuple[int, Path]]:
        """Every periodic checkpoint in the folder as ``(index, path)``, by increasing index.

        An absent folder has none.
        """
        if not self._directory.is_dir():
            return []
        found = []
        for entry in self._directory.iterdir():
            match = _PERIODIC_PATTERN.fullmatch(entry.name)
            if match is not None and entry.is_file():
                found.append((int(match.group(1)), entry))
        return sorted(found)

    def latest_periodic(self) -> Path | None:
        """The periodic checkpoint with the highest index, or ``None`` if there is none."""
        found = self.periodic_checkpoints()
        return found[-1][1] if found else None

    def prune_periodic(self, *, keep: int) -> list[Path]:
        """Delete all but the ``keep`` highest-numbered periodic checkpoints.

        :attr:`last` and :attr:`best` are never touched.

        Returns:
            The deleted files.

        Raises:
            ConfigError: ``keep`` is not a non-negative ``int``.
        """
        non_negative_int("CheckpointPaths.prune_periodic", "keep", keep)
        found = self.periodic_checkpoints()
        doomed = [path for _, path in found[: max(len(found) - keep, 0)]]
        for path in doomed:
            path.unlink(missing_ok=True)
        return doomed

    def __repr__(self) -> str:
        return f"CheckpointPaths({str(self._directory)!r})"


# ---------------------------------------------------------------------------- validation


def _check_state_tensor(where: str, value: object) -> None:
    if (
        not isinstance(value, Tensor)
        or value.dtype != torch.uint8
        or value.ndim != 1
        or value.device.type != "cpu"
    ):
        raise ConfigError(f"{where} must be a 1-D uint8 CPU tensor, got {_describe_any(value)}")


def _check_word_tensor(where: str, value: object, size: int) -> None:
    if (
        not isinstance(value, Tensor)
        or value.dtype != torch.int64
        or tuple(value.shape) != (size,)
        or value.device.type != "cpu"
    ):
        raise ConfigError(
            f"{where} must be an int64 CPU tensor of shape [{size}], got {_describe_any(value)}"
        )
    if bool((value < 0).any()) or bool((value >= _UINT32_LIMIT).any()):
        raise ConfigError(f"{where} must hold 32-bit words in [0, 2**32)")


def _check_int_range(where: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{where} must be an int in [{low}, {high}], got {describe(value)}")


def _check_float(where: str, value: object, *, finite: bool = False) -> None:
    if type(value) is not float or (finite and not math.isfinite(value)):
        adjective = "finite " if finite else ""
        raise ConfigError(f"{where} must be a {adjective}float, got {describe(value)}")


def _check_counters(counters: object) -> None:
    if not isinstance(counters, dict):
        raise ConfigError(f"Checkpoint.counters must be a dict, got {describe(counters)}")
    for key, value in counters.items():
        where = f"Checkpoint.counters[{key!r}]"
        if type(key) is not str:
            raise ConfigError(f"Checkpoint.counters keys must be str, got {describe(key)}")
        if type(value) is int:
            _check_int_range(where, value, _INT64_MIN, _INT64_MAX)
        elif type(value) is not float or not math.isfinite(value):
            raise ConfigError(
                f"{where} must be an int in the int64 range or a finite float (builtin types; "
                f"convert numpy or tensor scalars with int() or float()), got {describe(value)}"
            )


def _check_state_group(where: str, group: object) -> None:
    if not isinstance(group, dict):
        raise ConfigError(f"{where} must be a dict of state dicts, got {describe(group)}")
    for name, state in group.items():
        if type(name) is not str:
            raise ConfigError(f"{where} keys must be str, got {describe(name)}")
        if not isinstance(state, dict):
            raise ConfigError(f"{where}[{name!r}] must be a state dict, got {describe(state)}")
        _check_storable(f"{where}[{name!r}]", state)


# Exactly what ``torch.load(weights_only=True)`` accepts without extra allow-listing.
_STORABLE_LEAVES: Final[tuple[type, ...]] = (
    str,
    bytes,
    bytearray,
    int,
    float,
    bool,
    complex,
    type(None),
    torch.dtype,
    torch.device,
    torch.layout,
    Tensor,
    torch.nn.Parameter,
)
_STORABLE_CONTAINERS: Final[tuple[type, ...]] = (
    dict,
    OrderedDict,
    Counter,
    list,
    tuple,
    torch.Size,
    set,
)


def _check_storable(where: str, value: object) -> None:
    kind = type(value)
    if kind in _STORABLE_LEAVES:
        return
    if kind in _STORABLE_CONTAINERS:
        if isinstance(value, dict):
            for key, item in value.items():
                _check_storable(f"{where} (key {key!r})", key)
                _check_storable(f"{where}[{key!r}]", item)
        elif isinstance(value, list | tuple | set):
            for index, item in enumerate(value):
                _check_storable(f"{where}[{index}]", item)
        return
    raise ConfigError(
        f"{where} holds {_describe_any(value)}, which torch.load(weights_only=True) cannot "
        "read back; a state dict may hold only tensors, numbers, str, bytes, bool, None, "
        "dtypes, devices and plain dict/list/tuple/set containers"
    )


def _check_json(where: str, value: object) -> None:
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return
    if isinstance(value, list) and kind is list:
        for index, item in enumerate(value):
            _check_json(f"{where}[{index}]", item)
        return
    if isinstance(value, dict) and kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise ConfigError(f"{where} keys must be str, got {describe(key)}")
            _check_json(f"{where}[{key!r}]", item)
        return
    hint = "; use a list instead of a tuple" if isinstance(value, tuple) else ""
    raise ConfigError(
        f"{where} must be JSON-like (str, int, float, bool, None, list, or dict with str keys), "
        f"got {describe(value)}{hint}"
    )


def _describe_any(value: object) -> str:
    if isinstance(value, Tensor):
        shape = list(value.shape)
        return f"a {type(value).__name__} of dtype {value.dtype}, shape {shape} on {value.device}"
    return describe(value)


def _typedrl_version() -> str:
    try:
        return version("typedrl")
    except PackageNotFoundError:  # running from a source tree
        return "0.0.0"


# ---------------------------------------------------------------------------- on-disk form


def _to_payload(checkpoint: Checkpoint) -> dict[str, Any]:
    metadata = checkpoint.metadata
    return {
        "format": FORMAT_MARKER,
        "schema_version": checkpoint.schema_version,
        "kind": checkpoint.kind,
        "modules": checkpoint.modules,
        "optimizers": checkpoint.optimizers,
        "schedulers": checkpoint.schedulers,
        "counters": checkpoint.counters,
        "best_score": checkpoint.best_score,
        "config": checkpoint.config,
        "rng": [_rng_to_payload(state) for state in checkpoint.rng],
        "metadata": {
            "typedrl_version": metadata.typedrl_version,
            "torch_version": metadata.torch_version,
            "created": metadata.created,
            "world_size": metadata.world_size,
        },
    }


def _rng_to_payload(state: RngState) -> dict[str, Any]:
    return {
        "torch": {"cpu": state.torch_cpu, "cuda": list(state.torch_cuda)},
        "numpy": {
            "bit_generator": "MT19937",
            "key": state.numpy_key,
            "pos": state.numpy_pos,
            "has_gauss": state.numpy_has_gauss,
            "cached_gaussian": state.numpy_cached_gaussian,
        },
        "python": {
            "version": state.python_version,
            "state": state.python_state,
            "gauss_next": state.python_gauss_next,
        },
    }


def _fields(where: str, raw: object, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a dict with keys {list(keys)}, got {describe(raw)}")
    missing = [key for key in keys if key not in raw]
    unexpected = sorted(repr(key) for key in raw if key not in keys)
    if missing or unexpected:
        raise ConfigError(
            f"{where} must have the keys {list(keys)}; missing {missing}, unexpected "
            f"[{', '.join(unexpected)}]"
        )
    return raw


def _is_str(value: object, expected: str) -> bool:
    # Loaded values may be tensors, whose == is elementwise: compare types first.
    return type(value) is str and value == expected


def _on_cpu(value: Any) -> Any:
    return value.cpu() if isinstance(value, Tensor) else value


def _rng_from_payload(index: int, raw: object) -> RngState:
    where = f"rng[{index}]"
    top = _fields(where, raw, ("torch", "numpy", "python"))
    torch_part = _fields(f"{where}['torch']", top["torch"], ("cpu", "cuda"))
    numpy_part = _fields(
        f"{where}['numpy']",
        top["numpy"],
        ("bit_generator", "key", "pos", "has_gauss", "cached_gaussian"),
    )
    python_part = _fields(f"{where}['python']", top["python"], ("version", "state", "gauss_next"))
    if not _is_str(numpy_part["bit_generator"], "MT19937"):
        raise ConfigError(
            f"{where}['numpy']['bit_generator'] must be 'MT19937', "
            f"got {describe(numpy_part['bit_generator'])}"
        )
    cuda = torch_part["cuda"]
    if not isinstance(cuda, list):
        raise ConfigError(f"{where}['torch']['cuda'] must be a list, got {describe(cuda)}")
    try:
        return RngState(
            torch_cpu=_on_cpu(torch_part["cpu"]),
            torch_cuda=tuple(_on_cpu(item) for item in cuda),
            numpy_key=_on_cpu(numpy_part["key"]),
            numpy_pos=numpy_part["pos"],
            numpy_has_gauss=numpy_part["has_gauss"],
            numpy_cached_gaussian=numpy_part["cached_gaussian"],
            python_version=python_part["version"],
            python_state=_on_cpu(python_part["state"]),
            python_gauss_next=python_part["gauss_next"],
        )
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from err


def _metadata_from_payload(raw: object) -> CheckpointMetadata:
    fields = _fields("metadata", raw, ("typedrl_version", "torch_version", "created", "world_size"))
    return CheckpointMetadata(**fields)


def _read_payload(file: Path, map_location: str | torch.device) -> object:
    if not file.exists():
        raise CheckpointError(f"checkpoint file {file} does not exist")
    if not file.is_file():
        raise CheckpointError(f"checkpoint {file} is not a regular file")
    try:
        if file.stat().st_size == 0:
            raise CheckpointError(
                f"checkpoint file {file} is empty (0 bytes): an interrupted copy, or a "
                "file written by something other than save_checkpoint"
            )
        return torch.load(file, weights_only=True, map_location=map_location)
    except CheckpointError:
        raise
    except PermissionError as err:
        raise CheckpointError(f"cannot read checkpoint {file}: {err}") from err
    except pickle.UnpicklingError as err:
        detail = _weights_only_detail(str(err))
        if detail.startswith("Unsupported global"):
            raise CheckpointError(
                f"checkpoint {file} is not a typedrl checkpoint: it holds Python objects "
                f"other than tensors and plain containers ({detail}); typedrl loads data "
                "only, never code"
            ) from err
        raise CheckpointError(_unreadable(file, err, detail)) from err
    except Exception as err:  # zip, EOF, OS and key errors of truncated or foreign files
        raise CheckpointError(_unreadable(file, err, str(err))) from err


def _weights_only_detail(text: str) -> str:
    # torch's message around the reason suggests unsafe loading; keep the reason only.
    marker = "WeightsUnpickler error:"
    start = text.find(marker)
    detail = " ".join(text[start + len(marker) :].split()) if start >= 0 else text
    for stop in (" was not an allowed global", " Check the documentation", ". Please use"):
        detail = detail.split(stop, maxsplit=1)[0]
    return detail


def _unreadable(file: Path, err: BaseException, detail: str) -> str:
    first_line = (detail.strip().splitlines() or [""])[0]
    return (
        f"checkpoint {file} is truncated, corrupt or not a torch.save file "
        f"({type(err).__name__}: {first_line})"
    )


def _from_payload(raw: object, file: Path, expected_kind: CheckpointKind | None) -> Checkpoint:
    if not isinstance(raw, dict) or not _is_str(raw.get("format"), FORMAT_MARKER):
        found = (
            f"a dict with keys {sorted(map(str, raw))[:8]}"
            if isinstance(raw, dict)
            else _describe_any(raw)
        )
        raise CheckpointError(
            f"checkpoint {file} is not a typedrl checkpoint: expected a dict with "
            f"'format': {FORMAT_MARKER!r}, found {found}; a bare state dict is loaded "
            "with torch.load(weights_only=True) and load_state_dict instead"
        )
    found_version = raw.get("schema_version")
    if type(found_version) is not int or found_version != SCHEMA_VERSION:
        newer = type(found_version) is int and found_version > SCHEMA_VERSION
        advice = "upgrade typedrl to read it" if newer else "it cannot be read by this release"
        raise CheckpointError(
            f"checkpoint {file} has schema_version {found_version!r}, but this typedrl "
            f"supports schema_version {SCHEMA_VERSION} only; {advice}"
        )
    kind = raw.get("kind")
    if type(kind) is not str or kind not in CHECKPOINT_KINDS:
        raise CheckpointError(
            f"checkpoint {file} is malformed: 'kind' must be one of {list(CHECKPOINT_KINDS)}, "
            f"got {describe(kind)}"
        )
    if expected_kind is not None and kind != expected_kind:
        raise CheckpointError(
            f"checkpoint {file} is of kind {kind!r}, expected kind {expected_kind!r}"
        )
    try:
        fields = _fields("the checkpoint", raw, _PAYLOAD_KEYS)
        rng = fields["rng"]
        if not isinstance(rng, list):
            raise ConfigError(f"rng must be a list, got {describe(rng)}")
        return Checkpoint(
            schema_version=fields["schema_version"],
            kind=kind,
            modules=fields["modules"],
            optimizers=fields["optimizers"],
            schedulers=fields["schedulers"],
            counters=fields["counters"],
            best_score=fields["best_score"],
            config=fields["config"],
            rng=tuple(_rng_from_payload(index, item) for index, item in enumerate(rng)),
            metadata=_metadata_from_payload(fields["metadata"]),
        )
    except ConfigError as err:
        raise CheckpointError(f"checkpoint {file} is malformed: {err}") from err


# ---------------------------------------------------------------------------- atomic write


def _atomic_save(payload: dict[str, Any], target: Path) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temp, handle = _open_temp(target)
    except OSError as err:
        raise CheckpointError(f"cannot write checkpoint {target}: {err}") from err
    try:
        with handle:
            torch.save(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
        temp.replace(target)
    except Exception as err:
        temp.unlink(missing_ok=True)
        raise CheckpointError(
            f"cannot write checkpoint {target} ({type(err).__name__}: {err}); "
            "the previous file, if any, is unchanged"
        ) from err
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_directory(target)


def _open_temp(target: Path) -> tuple[Path, IO[bytes]]:
    # Created by hand rather than with tempfile.mkstemp: mkstemp's mode is 0o600,
    # while a checkpoint should get the permissions the umask gives any new file.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        temp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            descriptor = os.open(temp, flags, 0o666)
        except FileExistsError:
            continue
        try:
            return temp, os.fdopen(descriptor, "wb")
        except BaseException:
            os.close(descriptor)
            temp.unlink(missing_ok=True)
            raise


def _fsync_directory(target: Path) -> None:
    # Makes the rename itself durable. Only POSIX can open a directory for fsync.
    if os.name != "posix":
        return
    descriptor = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    except OSError as err:
        # Some file systems (network mounts) cannot fsync a directory; the rename stands.
        if err.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise CheckpointError(
                f"checkpoint {target} was written, but its folder could not be synced: {err}"
            ) from err
    finally:
        os.close(descriptor)
