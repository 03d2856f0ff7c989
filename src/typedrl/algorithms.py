"""The algorithms ``typedrl train --algo`` runs: one registry of (config, trainer) pairs.

Every algorithm is an :class:`AlgorithmSpec`: its name (``--algo NAME``), its
config class, its trainer class (an :class:`~typedrl.training.AbstractTrainer`
subclass, whose :attr:`~typedrl.training.AbstractTrainer.kind` its
checkpoints carry) and a few facts the command needs (the env it trains on by
default, whether it needs a differentiable env). typedrl registers ``ppo``,
``apg``, ``shac`` and ``ahac`` (APG, SHAC and AHAC share the differentiable trainer
and its kind ``"apg"``: the saved config says which ran). A package adds its own in
either of two ways:

- call :func:`register_algorithm` when it is imported (from Python: import it
  before you train);
- declare an entry point in the group :data:`ENTRY_POINT_GROUP`, named as the
  algorithm and naming an :class:`AlgorithmSpec`, so that ``typedrl train
  --algo NAME``, ``--resume`` and ``typedrl evaluate`` find it once the
  package is installed, without any import::

      [project.entry-points."typedrl.algorithms"]
      random_search = "my_pkg.search:ALGORITHM"

``typedrl train`` builds a registered trainer as ``trainer(env=..., config=...,
fabric=..., eval_env=..., options=...)``, adding ``policy_factory=...`` when
``--policy`` is given, so a trainer of your own takes these keyword arguments.
Its config class is a dataclass (or any class) with a ``seed`` field, a
``to_dict()`` returning JSON-like values and a ``from_dict(values)`` class
method (or pass ``build_config``).

Example:
    >>> from typedrl.algorithms import algorithm_names, get_algorithm
    >>> algorithm_names()[:3]
    ('ppo', 'apg', 'shac')
    >>> spec = get_algorithm("shac")
    >>> spec.trainer.kind, spec.differentiable, spec.default_env_id
    ('apg', True, 'typedrl/CartPoleSwingUp-v0')
"""

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Final, Protocol, final, runtime_checkable

from typedrl._validation import describe, no_type_check
from typedrl.errors import ConfigError

if TYPE_CHECKING:
    from typedrl.training import AbstractTrainer

__all__ = [
    "BUILTIN_ALGORITHMS",
    "DEFAULT_ENV_IDS",
    "ENTRY_POINT_GROUP",
    "AlgorithmConfig",
    "AlgorithmSpec",
    "algorithm_names",
    "find_algorithm",
    "get_algorithm",
    "register_algorithm",
    "unregister_algorithm",
]

ENTRY_POINT_GROUP: Final = "typedrl.algorithms"
"""The entry-point group in which installed packages declare their :class:`AlgorithmSpec`."""

BUILTIN_ALGORITHMS: Final = ("ppo", "apg", "shac", "ahac")
"""The algorithms typedrl itself registers."""

DEFAULT_ENV_IDS: Final[Mapping[str, str]] = {
    "ppo": "typedrl/CartPole-v0",
    "apg": "typedrl/Reacher-v0",
    "shac": "typedrl/CartPoleSwingUp-v0",
    "ahac": "typedrl/NewtonAnt-v0",
}
"""The env each of typedrl's algorithms trains on when none is named: built-in torch envs."""

_DESCRIPTIONS: Final[Mapping[str, str]] = {
    "ppo": "proximal policy optimisation",
    "apg": "analytic policy gradients",
    "shac": "short-horizon actor-critic",
    "ahac": "adaptive-horizon actor-critic",
}


@runtime_checkable
class AlgorithmConfig(Protocol):
    """What ``typedrl train`` needs of a built config: its values, to write and compare."""

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-like values (``config.yaml``'s ``config:``, checkpoints)."""
        ...


_NAME: Final = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


@final
@no_type_check
@dataclass(frozen=True, slots=True, kw_only=True)
class AlgorithmSpec:
    """One algorithm of the registry: its name, config class and trainer class.

    Raises:
        ConfigError: ``name`` is not a lower-case identifier (letters, digits,
            ``_`` and ``-``, starting with a letter), ``config`` is not a class,
            or ``trainer`` is not an :class:`~typedrl.training.AbstractTrainer`
            subclass with a valid ``kind``.
    """

    name: str
    """``--algo NAME`` (lower case: ``random_search``)."""
    config: type[Any]
    """The config class (``seed`` field, ``to_dict()``, ``from_dict(values)``)."""
    trainer: "type[AbstractTrainer]"
    """The trainer class; its ``kind`` is the kind of the checkpoints it writes."""
    default_env_id: str | None = None
    """The env ``typedrl train --algo NAME`` trains on when none is named (``None``: name one)."""
    differentiable: bool = False
    """Whether the trainer needs a differentiable env (``typedrl train`` refuses a
    Gymnasium id before anything starts)."""
    build_config: Callable[[Mapping[str, Any]], Any] | None = None
    """Builds the config from plain values (a file's, the flags'); default
    ``config.from_dict``. Algorithms that share a trainer and a kind tell their
    checkpoints apart by it: a saved config belongs to the first one whose
    ``build_config`` accepts it."""
    description: str = ""
    """One line for listings."""

    def __post_init__(self) -> None:
        from typedrl.checkpoint import check_kind  # noqa: PLC0415 - keep `typedrl --help` fast
        from typedrl.training import AbstractTrainer  # noqa: PLC0415

        if type(self.name) is not str or _NAME.match(self.name) is None:
            got = repr(self.name) if type(self.name) is str else describe(self.name)
            raise ConfigError(
                "AlgorithmSpec.name must be a lower-case identifier (a letter, then letters, "
                f"digits, _ or -; 64 characters at most), got {got}"
            )
        if not isinstance(self.config, type):
            raise ConfigError(
                f"algorithm {self.name!r}: config must be a class, got {describe(self.config)}"
            )
        if not (isinstance(self.trainer, type) and issubclass(self.trainer, AbstractTrainer)):
            raise ConfigError(
                f"algorithm {self.name!r}: trainer must be a subclass of "
                f"typedrl.training.AbstractTrainer, got {describe(self.trainer)}"
            )
        check_kind(getattr(self.trainer, "kind", None), where=f"{self.trainer.__name__}.kind")
        if self.build_config is None and not callable(getattr(self.config, "from_dict", None)):
            raise ConfigError(
                f"algorithm {self.name!r}: {self.config.__name__} has no from_dict(values); "
                "give one, or pass build_config"
            )

    @property
    def kind(self) -> str:
        """The checkpoint kind of the trainer."""
        return self.trainer.kind

    def make_config(self, values: Mapping[str, Any]) -> AlgorithmConfig:
        """The config built from plain values (``build_config``, else ``config.from_dict``).

        Raises:
            ConfigError: The values do not build (``TypeError`` and
                ``ValueError`` of the config class become a ConfigError), or the
                result has no ``to_dict()``.
        """
        build = self.build_config or self.config.from_dict
        try:
            config: object = build(dict(values))
        except ConfigError:
            raise
        except (TypeError, ValueError) as error:
            raise ConfigError(
                f"the {self.name} config ({self.config.__name__}) does not build: {error}"
            ) from None
        if not isinstance(config, AlgorithmConfig):
            raise ConfigError(
                f"algorithm {self.name!r}: its config must have to_dict(), got {describe(config)}"
            )
        return config


_registry: dict[str, AlgorithmSpec] = {}
_sources: dict[str, str] = {}
"""Where each registered algorithm came from: ``"typedrl"``, ``"register_algorithm"`` or
the entry point (``"name = module:attribute"``)."""
_state = {"builtins": False, "entry_points": False}


def register_algorithm(
    name: str,
    *,
    config: type[Any],
    trainer: "type[AbstractTrainer]",
    default_env_id: str | None = None,
    differentiable: bool = False,
    build_config: Callable[[Mapping[str, Any]], Any] | None = None,
    description: str = "",
    replace: bool = False,
) -> AlgorithmSpec:
    """Register an algorithm under ``name`` (see :class:`AlgorithmSpec` for the fields).

    Args:
        name: ``--algo NAME``.
        config: The config class.
        trainer: The trainer class.
        default_env_id: The env trained on when none is named.
        differentiable: Whether the trainer needs a differentiable env.
        build_config: Builds the config from plain values (default ``config.from_dict``).
        description: One line for listings.
        replace: Replace an algorithm registered under ``name`` (else refused).

    Returns:
        The registered spec.

    Raises:
        ConfigError: An invalid field, or ``name`` is taken and ``replace`` is false.
    """
    spec = AlgorithmSpec(
        name=name,
        config=config,
        trainer=trainer,
        default_env_id=default_env_id,
        differentiable=differentiable,
        build_config=build_config,
        description=description,
    )
    _add(spec, source="register_algorithm", replace=replace)
    return spec


def unregister_algorithm(name: str) -> None:
    """Remove a registered algorithm (typedrl's own stay).

    Raises:
        ConfigError: ``name`` is one of :data:`BUILTIN_ALGORITHMS` or not registered.
    """
    if name in BUILTIN_ALGORITHMS:
        raise ConfigError(f"{name!r} is one of typedrl's algorithms and stays registered")
    if name not in _registry:
        raise ConfigError(f"no algorithm {name!r} is registered")
    del _registry[name]
    del _sources[name]


def _add(spec: AlgorithmSpec, *, source: str, replace: bool) -> None:
    _builtins()
    if spec.name in BUILTIN_ALGORITHMS and source != "typedrl":
        raise ConfigError(
            f"algorithm {spec.name!r} is typedrl's own; register yours under another name"
        )
    known = _registry.get(spec.name)
    if known is not None and known != spec and not replace:
        raise ConfigError(
            f"algorithm {spec.name!r} is already registered (by {_sources[spec.name]}); "
            "pass replace=True to replace it"
        )
    _registry[spec.name] = spec
    _sources[spec.name] = source


def _builtins() -> None:
    """Register typedrl's own algorithms (once; they import torch and Lightning)."""
    if _state["builtins"]:
        return
    _state["builtins"] = True
    from typedrl import configs  # noqa: PLC0415 - keep `typedrl --help` fast
    from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig  # noqa: PLC0415
    from typedrl.ppo import PPOAgent, PPOConfig  # noqa: PLC0415
    from typedrl.training import AbstractTrainer  # noqa: PLC0415

    classes: dict[str, tuple[type[Any], type[AbstractTrainer]]] = {
        "ppo": (PPOConfig, PPOAgent),
        "apg": (DifferentiableTrainerConfig, DifferentiableTrainer),
        "shac": (DifferentiableTrainerConfig, DifferentiableTrainer),
        "ahac": (DifferentiableTrainerConfig, DifferentiableTrainer),
    }
    for name in BUILTIN_ALGORITHMS:
        config, trainer = classes[name]
        spec = AlgorithmSpec(
            name=name,
            config=config,
            trainer=trainer,
            default_env_id=DEFAULT_ENV_IDS[name],
            differentiable=name != "ppo",
            build_config=functools.partial(configs.build_config, name),
            description=_DESCRIPTIONS[name],
        )
        _registry[name] = spec
        _sources[name] = "typedrl"


def _entry_points() -> None:
    """Register the algorithms installed packages declare (once).

    Raises:
        ConfigError: An entry point does not load, names no :class:`AlgorithmSpec`,
            or its name differs from the spec's.
    """
    if _state["entry_points"]:
        return
    _state["entry_points"] = True
    _builtins()
    for point in entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {point.name} = {point.value} (group {ENTRY_POINT_GROUP})"
        try:
            spec: object = point.load()
        except Exception as error:
            _state["entry_points"] = False
            raise ConfigError(f"{where} does not load: {type(error).__name__}: {error}") from None
        if not isinstance(spec, AlgorithmSpec) or spec.name != point.name:
            _state["entry_points"] = False
            raise ConfigError(
                f"{where} must name an AlgorithmSpec whose name is {point.name!r}, got "
                f"{describe(spec)}"
            )
        if _registry.get(spec.name) != spec:
            _add(spec, source=where, replace=False)


def algorithm_names() -> tuple[str, ...]:
    """Every registered algorithm's name: typedrl's first, then in registration order.

    Raises:
        ConfigError: An installed entry point is broken.
    """
    _entry_points()
    return tuple(_registry)


def get_algorithm(name: str) -> AlgorithmSpec:
    """The algorithm registered as ``name``.

    Raises:
        ConfigError: No algorithm has that name (the registered ones are listed).
    """
    _builtins()
    spec = _registry.get(name)
    if spec is None:
        _entry_points()
        spec = _registry.get(name)
    if spec is None:
        shown = repr(name) if type(name) is str else describe(name)
        raise ConfigError(
            f"algo must be one of {list(_registry)}, got {shown}; a package adds one with "
            f"typedrl.algorithms.register_algorithm or an entry point of the group "
            f"{ENTRY_POINT_GROUP!r}"
        )
    return spec


def find_algorithm(*, kind: str, config: Mapping[str, Any]) -> AlgorithmSpec:
    """The registered algorithm that wrote a checkpoint of ``kind`` with ``config``.

    When several algorithms share the kind (APG and SHAC), the first
    registered whose :meth:`~AlgorithmSpec.make_config` accepts ``config``.

    Raises:
        ConfigError: No registered algorithm writes ``kind``, or none of those
            that do accepts ``config`` (the reasons are given).
    """
    _builtins()
    candidates = [spec for spec in _registry.values() if spec.kind == kind]
    if not candidates:
        # Installed packages are asked only for a kind nobody registered yet.
        _entry_points()
        candidates = [spec for spec in _registry.values() if spec.kind == kind]
    if not candidates:
        kinds = sorted({spec.kind for spec in _registry.values()})
        raise ConfigError(
            f"no registered algorithm writes checkpoints of kind {kind!r} (the registered "
            f"kinds: {kinds}); install or import the package that registers its trainer"
        )
    if len(candidates) == 1:
        return candidates[0]
    reasons: list[str] = []
    for spec in candidates:
        try:
            spec.make_config(config)
        except ConfigError as error:
            reasons.append(f"{spec.name}: {error}")
            continue
        return spec
    raise ConfigError(
        f"the saved {kind} config builds for none of {[spec.name for spec in candidates]} "
        f"({'; '.join(reasons)})"
    )
