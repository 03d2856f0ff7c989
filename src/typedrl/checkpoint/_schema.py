"""The checkpoint schema: validated value types and their on-disk (payload) form.

:class:`Checkpoint`, :class:`RngState` and :class:`CheckpointMetadata` check
every field on construction. :func:`to_payload` turns a checkpoint into the
plain dict that is written; :func:`from_payload` validates a loaded dict,
upgrades an older schema version to :data:`SCHEMA_VERSION` and rebuilds the
checkpoint.
"""

import math
import re
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, final

import torch
from jaxtyping import Int64, UInt8
from torch import Tensor

from typedrl._validation import IntRange, describe, json_object, no_type_check
from typedrl.errors import CheckpointError, ConfigError
from typedrl.policies._factory import PolicyFactory

__all__ = [
    "DEFAULT_POLICY",
    "FORMAT_MARKER",
    "POLICY_KEY",
    "SCHEMA_VERSION",
    "Checkpoint",
    "CheckpointKind",
    "CheckpointMetadata",
    "RngState",
    "check_kind",
    "from_payload",
    "to_payload",
]

SCHEMA_VERSION: Final = 3
"""Version of the on-disk layout this release writes.

Files of every earlier version are read too and upgraded when they are loaded
(the *Schema versions* section of the checkpoints guide lists each migration
rule). Version 2 added :attr:`Checkpoint.env_id`: a file of version 1 loads with
``env_id=None``. Version 3 added :attr:`Checkpoint.policy_factory`: a file of an
earlier version loads with :data:`DEFAULT_POLICY`.
"""

FORMAT_MARKER: Final = "typedrl.checkpoint"
"""Value stored under the ``"format"`` key; files without it are foreign."""

POLICY_KEY: Final = "policy"
"""Key of the policy's state dict in :attr:`Checkpoint.modules` (required in every kind)."""

CheckpointKind: TypeAlias = str
"""Which trainer wrote a checkpoint: the kind a trainer declares (``"ppo"``, ``"apg"``, yours).

Identifier-like: a letter or ``_``, then letters, digits, ``_``, ``.`` or
``-``, 64 characters at most (:func:`check_kind`)."""

DEFAULT_POLICY: Final = "default"
""":attr:`Checkpoint.policy_factory` of a file written before policy factories were
recorded (schema 1 and 2, by PPO, APG or SHAC): the trainer's default policy,
built from the checkpoint's config."""

_KIND: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_MT19937_KEY_SIZE: Final = 624
_PYTHON_STATE_SIZE: Final = 625  # random.getstate(): 624 key words and the position
_UINT32_LIMIT: Final = 2**32
_SCHEMA_1_KEYS: Final = (
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
_PAYLOAD_KEYS: Final[dict[int, tuple[str, ...]]] = {
    1: _SCHEMA_1_KEYS,
    2: (*_SCHEMA_1_KEYS[:3], "env_id", *_SCHEMA_1_KEYS[3:]),
    3: (*_SCHEMA_1_KEYS[:3], "env_id", "policy_factory", *_SCHEMA_1_KEYS[3:]),
}
"""The top-level keys of the file of each readable schema version."""


# ---------------------------------------------------------------------------- value types


def check_kind(kind: object, *, where: str = "Checkpoint.kind") -> str:
    """``kind`` if it is a valid :data:`CheckpointKind`, else a ConfigError naming ``where``.

    Example:
        >>> check_kind("random_search")
        'random_search'
        >>> check_kind("my trainer")
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: Checkpoint.kind must be an identifier-like str (a letter \
or _, then letters, digits, _, . or -; 64 characters at most), got 'my trainer'
    """
    if type(kind) is not str or _KIND.match(kind) is None:
        got = repr(kind) if type(kind) is str else describe(kind)
        raise ConfigError(
            f"{where} must be an identifier-like str (a letter or _, then letters, digits, "
            f"_, . or -; 64 characters at most), got {got}"
        )
    return kind


@final
@no_type_check
@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class RngState:
    """The global random-number-generator states of one process (one rank).

    Everything is stored as tensors and plain numbers so that it survives
    ``torch.load(weights_only=True)``. Build one with
    :func:`~typedrl.checkpoint.capture_rng_state` and apply it with
    :func:`~typedrl.checkpoint.restore_rng_state`; construction validates every
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
        IntRange(0, _MT19937_KEY_SIZE)("RngState", "numpy_pos", self.numpy_pos)
        IntRange(0, 1)("RngState", "numpy_has_gauss", self.numpy_has_gauss)
        _check_float("RngState.numpy_cached_gaussian", self.numpy_cached_gaussian)
        IntRange(0, _INT64_MAX)("RngState", "python_version", self.python_version)
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
        IntRange(1, _INT64_MAX)("CheckpointMetadata", "world_size", self.world_size)

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

    Rules between fields: :data:`POLICY_KEY` is in :attr:`modules`, and
    :attr:`rng` holds one :class:`RngState` per rank
    (``len(rng) == metadata.world_size``).

    Example:
        >>> Checkpoint(kind="apg", modules={"policy": {}}, counters={"updates": 1.5e3})
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: Checkpoint.rng must hold one RngState per rank
        (metadata.world_size=1) in a checkpoint of kind 'apg', got 0
        >>> Checkpoint(kind="ppo", modules={"policy": {}}, config={"sizes": (64, 64)})
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: Checkpoint.config['sizes'] must be JSON-like ...
    """

    schema_version: int = SCHEMA_VERSION
    """Layout version; always :data:`SCHEMA_VERSION` (files of earlier versions are
    upgraded when they are loaded)."""

    kind: CheckpointKind
    """Which trainer wrote the checkpoint: its declared kind (``"ppo"``, ``"apg"``, ...)."""

    env_id: str | None = None
    """Id of the env the run trained on (``"CartPole-v1"``, ``"typedrl/Pendulum-v0"``),
    so that evaluating or exporting needs no more than the file; ``None`` when unknown
    (an env built by hand, or a file of schema version 1)."""

    policy_factory: PolicyFactory | Literal["default"] | None = None
    """How to rebuild the policy saved under :data:`POLICY_KEY`: a
    :class:`~typedrl.policies.PolicyFactory` (stored as ``{"target": ...,
    "kwargs": ...}``); :data:`DEFAULT_POLICY` for a file written before factories
    were recorded (the trainer's default policy of :attr:`config`); ``None`` when the
    run recorded none (a policy passed without a factory)."""

    modules: dict[str, dict[str, Any]]
    """State dicts of modules and normalisers by name: :data:`POLICY_KEY` (required),
    ``"critic"``, ``"target_critic"``, ``"observation_normalizer"``, ..."""

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
    ``list`` and ``dict`` with ``str`` keys, builtin types only (no tuples, no numpy values)."""

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
        check_kind(self.kind)
        factory: object = self.policy_factory
        if not (factory is None or factory == DEFAULT_POLICY or isinstance(factory, PolicyFactory)):
            raise ConfigError(
                "Checkpoint.policy_factory must be a PolicyFactory, "
                f"{DEFAULT_POLICY!r} or None, got {describe(factory)}"
            )
        env_id: object = self.env_id
        if env_id is not None and type(env_id) is not str:
            hint = "; convert it with str(...)" if isinstance(env_id, str) else ""
            raise ConfigError(
                "Checkpoint.env_id must be a builtin str (the env id, as 'CartPole-v1') or "
                f"None when unknown, got {describe(env_id)}{hint}"
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
        json_object("Checkpoint", "config", self.config)
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
        if len(self.rng) != self.metadata.world_size:
            raise ConfigError(
                f"Checkpoint.rng must hold one RngState per rank "
                f"(metadata.world_size={self.metadata.world_size}) in a checkpoint of kind "
                f"{self.kind!r}, got {len(self.rng)}"
            )

    def rng_state(self, rank: int) -> RngState:
        """Return the RNG state saved by global rank ``rank``.

        Raises:
            CheckpointError: The checkpoint holds no state for ``rank`` (it was
                written with a different world size).
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
            f"Checkpoint(kind={self.kind!r}, env_id={self.env_id!r}, "
            f"policy_factory={self.policy_factory!r}, "
            f"modules={sorted(self.modules)}, optimizers={sorted(self.optimizers)}, "
            f"schedulers={sorted(self.schedulers)}, counters={self.counters!r}, "
            f"best_score={self.best_score!r}, ranks={len(self.rng)})"
        )


# ---------------------------------------------------------------------------- validation


def _check_state_tensor(where: str, value: object) -> None:
    if (
        not isinstance(value, Tensor)
        or value.dtype != torch.uint8
        or value.ndim != 1
        or value.device.type != "cpu"
    ):
        raise ConfigError(f"{where} must be a 1-D uint8 CPU tensor, got {describe(value)}")


def _check_word_tensor(where: str, value: object, size: int) -> None:
    if (
        not isinstance(value, Tensor)
        or value.dtype != torch.int64
        or tuple(value.shape) != (size,)
        or value.device.type != "cpu"
    ):
        raise ConfigError(
            f"{where} must be an int64 CPU tensor of shape [{size}], got {describe(value)}"
        )
    if bool((value < 0).any()) or bool((value >= _UINT32_LIMIT).any()):
        raise ConfigError(f"{where} must hold 32-bit words in [0, 2**32)")


def _check_float(where: str, value: object, *, finite: bool = False) -> None:
    if type(value) is not float or (finite and not math.isfinite(value)):
        adjective = "finite " if finite else ""
        raise ConfigError(f"{where} must be a {adjective}float, got {describe(value)}")


def _check_counters(counters: object) -> None:
    if not isinstance(counters, dict):
        raise ConfigError(f"Checkpoint.counters must be a dict, got {describe(counters)}")
    for key, value in counters.items():
        name = f"counters[{key!r}]"
        if type(key) is not str:
            raise ConfigError(f"Checkpoint.counters keys must be str, got {describe(key)}")
        if type(value) is int:
            IntRange(_INT64_MIN, _INT64_MAX)("Checkpoint", name, value)
        elif type(value) is not float or not math.isfinite(value):
            raise ConfigError(
                f"Checkpoint.{name} must be an int in the int64 range or a finite float "
                "(builtin types; convert numpy or tensor scalars with int() or float()), "
                f"got {describe(value)}"
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
        f"{where} holds {describe(value)}, which torch.load(weights_only=True) cannot "
        "read back; a state dict may hold only tensors, numbers, str, bytes, bool, None, "
        "dtypes, devices and plain dict/list/tuple/set containers"
    )


def _typedrl_version() -> str:
    try:
        return version("typedrl")
    except PackageNotFoundError:  # running from a source tree
        return "0.0.0"


# ---------------------------------------------------------------------------- on-disk form


def to_payload(checkpoint: Checkpoint) -> dict[str, Any]:
    """The plain dict written to disk: :data:`SCHEMA_VERSION`'s layout of ``checkpoint``."""
    metadata = checkpoint.metadata
    return {
        "format": FORMAT_MARKER,
        "schema_version": checkpoint.schema_version,
        "kind": checkpoint.kind,
        "env_id": checkpoint.env_id,
        "policy_factory": (
            checkpoint.policy_factory.to_dict()
            if isinstance(checkpoint.policy_factory, PolicyFactory)
            else checkpoint.policy_factory
        ),
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


def _schema_1_to_2(fields: dict[str, Any]) -> dict[str, Any]:
    # Schema 2 added the env id, which a file of schema 1 does not know.
    return {**fields, "schema_version": 2, "env_id": None}


def _schema_2_to_3(fields: dict[str, Any]) -> dict[str, Any]:
    # Schema 3 added the policy's factory; PPO, APG and SHAC trained their default policy.
    return {**fields, "schema_version": 3, "policy_factory": DEFAULT_POLICY}


def _policy_factory_from_payload(raw: object) -> PolicyFactory | Literal["default"] | None:
    if raw is None:
        return None
    if _is_str(raw, DEFAULT_POLICY):
        return DEFAULT_POLICY
    if not isinstance(raw, dict):
        raise ConfigError(
            f"policy_factory must be a dict with 'target' and 'kwargs', {DEFAULT_POLICY!r} or "
            f"None, got {describe(raw)}"
        )
    return PolicyFactory.from_dict(raw, where="policy_factory")


_UPGRADES: Final[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    1: _schema_1_to_2,
    2: _schema_2_to_3,
}
"""For each old version ``v``, the function turning its fields into those of ``v + 1``."""


def from_payload(raw: object, file: Path, expected_kind: CheckpointKind | None) -> Checkpoint:
    """Validate a dict loaded from ``file``, upgrade it to :data:`SCHEMA_VERSION`, rebuild it.

    Args:
        raw: What ``torch.load(weights_only=True)`` returned.
        file: The file it came from, for the messages.
        expected_kind: Refuse another kind; ``None`` accepts every kind.

    Raises:
        CheckpointError: ``raw`` is foreign, of an unreadable schema version, of
            another kind than ``expected_kind``, or malformed; the message names
            the file and the field.
    """
    if not isinstance(raw, dict) or not _is_str(raw.get("format"), FORMAT_MARKER):
        found = (
            f"a dict with keys {sorted(map(str, raw))[:8]}"
            if isinstance(raw, dict)
            else describe(raw)
        )
        raise CheckpointError(
            f"checkpoint {file} is not a typedrl checkpoint: expected a dict with "
            f"'format': {FORMAT_MARKER!r}, found {found}; a bare state dict is loaded "
            "with torch.load(weights_only=True) and load_state_dict instead"
        )
    found_version = raw.get("schema_version")
    if type(found_version) is not int or found_version not in _PAYLOAD_KEYS:
        newer = type(found_version) is int and found_version > SCHEMA_VERSION
        advice = "upgrade typedrl to read it" if newer else "it cannot be read by this release"
        raise CheckpointError(
            f"checkpoint {file} has schema_version {found_version!r}, but this typedrl "
            f"reads schema versions {sorted(_PAYLOAD_KEYS)} only; {advice}"
        )
    kind = raw.get("kind")
    try:
        kind = check_kind(kind, where="'kind'")
    except ConfigError as err:
        raise CheckpointError(f"checkpoint {file} is malformed: {err}") from None
    if expected_kind is not None and kind != expected_kind:
        raise CheckpointError(
            f"checkpoint {file} is of kind {kind!r}, expected kind {expected_kind!r}"
        )
    try:
        fields = _fields("the checkpoint", raw, _PAYLOAD_KEYS[found_version])
        for old_version in range(found_version, SCHEMA_VERSION):
            fields = _UPGRADES[old_version](fields)
        rng = fields["rng"]
        if not isinstance(rng, list):
            raise ConfigError(f"rng must be a list, got {describe(rng)}")
        return Checkpoint(
            schema_version=fields["schema_version"],
            kind=kind,
            env_id=fields["env_id"],
            policy_factory=_policy_factory_from_payload(fields["policy_factory"]),
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
