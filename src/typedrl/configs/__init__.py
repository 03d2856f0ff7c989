"""Tuned hyper-parameters per (algorithm, env), shipped with the package as YAML files.

Each file lives at ``typedrl/configs/<algo>/<file>.yaml``, ``<algo>`` one of
``ppo``, ``apg``, ``shac`` and ``ahac`` and ``<file>`` the env id with ``"/"`` and ``":"``
replaced by ``"-"`` (``ppo/CartPole-v1.yaml``, ``shac/typedrl-CartPoleSwingUp-v0.yaml``),
and holds exactly these keys:

- ``source``: where the values come from and what they reach, measured;
- ``algo``: ``ppo``, ``apg``, ``shac`` or ``ahac`` (the folder it is in);
- ``env_id``: the env id (the file's name);
- ``num_envs``: env rows per rank;
- ``config``: fields of :class:`~typedrl.ppo.PPOConfig` (``ppo``) or of
  :class:`~typedrl.apg.DifferentiableTrainerConfig` (``apg``, ``shac``, ``ahac``; the
  algorithm's fields go under ``algorithm:``, SHAC's and AHAC's actor under
  ``algorithm.actor``). ``seed`` is never in a tuned file;

and optionally ``policy``: the built-in policy's settings (the config fields
marked as the policy's, such as PPO's ``core``, ``encoder`` and
``actor_hidden``, which ``config`` may hold as well), as ``config.yaml`` writes
them; and ``run``: the env options the values were measured with, among
:data:`TUNED_RUN_KEYS` (``clip_actions: true`` for the MuJoCo files, which are
measured with Box actions clipped to the space as Stable-Baselines3 clips
them); ``typedrl train`` applies them below the user's own options.

:func:`load` validates the keys and builds the config through the dataclasses,
so a shipped file that no longer matches them fails with a
:class:`~typedrl.errors.ConfigError` naming the file and the key.

Example:
    >>> from typedrl import configs
    >>> tuned = configs.load("ppo", "CartPole-v1")
    >>> tuned.num_envs, tuned.config["total_timesteps"]
    (8, 100000)
    >>> ("shac", "typedrl/CartPoleSwingUp-v0") in configs.available()
    True
"""

import dataclasses
import importlib.resources
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, final, get_args

from typedrl import _config_fields, _validation
from typedrl._config_fields import check, non_empty_text, optional, policy_fields
from typedrl._validation import describe, positive_int
from typedrl.ahac import AHACConfig
from typedrl.apg import APGConfig, DifferentiableTrainerConfig
from typedrl.errors import ConfigError
from typedrl.ppo import PPOConfig
from typedrl.ppo._config import upgrade_fields
from typedrl.runs import parse_mapping
from typedrl.shac import SHACConfig

__all__ = [
    "ALGORITHMS",
    "DEFAULT_DIFFERENTIABLE_TIMESTEPS",
    "TUNED_KEYS",
    "TUNED_RUN_KEYS",
    "Algorithm",
    "TrainerConfig",
    "TunedConfig",
    "available",
    "build_config",
    "file_name",
    "find",
    "load",
    "load_file",
]

Algorithm: TypeAlias = Literal["ppo", "apg", "shac", "ahac"]
"""The algorithms ``typedrl train --algo`` runs."""

ALGORITHMS: Final[tuple[Algorithm, ...]] = get_args(Algorithm)
"""Every :data:`Algorithm`, in the order the command lists them."""

TUNED_KEYS: Final = ("source", "algo", "env_id", "num_envs", "config")
"""The top-level keys of a tuned file, all required."""

TUNED_RUN_KEYS: Final = ("clip_actions", "env_kwargs", "wrappers")
"""The run options a tuned file's optional ``run`` section may set (they shape the env)."""

DEFAULT_DIFFERENTIABLE_TIMESTEPS: Final = 200_000
"""The budget APG and SHAC train for when neither the file nor the user sets one
(:class:`~typedrl.apg.DifferentiableTrainerConfig` itself has no default budget)."""

TrainerConfig: TypeAlias = PPOConfig | DifferentiableTrainerConfig
"""The config a trainer of any :data:`Algorithm` takes."""


def _tuned_fields(owner: str, name: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{owner}.{name} must be a mapping, got {describe(value)}")
    if "seed" in value:
        raise ConfigError(
            f"{owner}.{name}.seed: a tuned file never sets the seed (it is the run's choice)"
        )
    return value


def _run_options(owner: str, name: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{owner}.{name} must be a mapping, got {describe(value)}")
    unknown = sorted(str(key) for key in value if key not in TUNED_RUN_KEYS)
    if unknown:
        raise ConfigError(
            f"{owner}.{name}: a tuned file sets only the env options {list(TUNED_RUN_KEYS)}; "
            f"got {unknown}"
        )
    return value


def _file_path(owner: str, name: str, value: object) -> Path:
    if isinstance(value, str | os.PathLike):
        return Path(value)
    raise ConfigError(f"{owner}.{name} must be a str or os.PathLike, got {describe(value)}")


@final
@_validation.no_type_check  # built from a YAML file's values: checked here, in words
@dataclass(frozen=True, slots=True, kw_only=True)
class TunedConfig:
    """One tuned file: the env rows and the config fields known to work for (algo, env).

    ``config`` holds only the fields the file sets, as plain YAML values; build
    the full dataclass with :func:`build_config`.

    Raises:
        ConfigError: A field is invalid; the message names the file, when there
            is one, and the field.
    """

    source: str = field(metadata=check(non_empty_text))
    """Where the values come from and what they reach, measured."""
    algo: Algorithm
    """The algorithm the values are for."""
    env_id: str = field(metadata=check(non_empty_text))
    """The env the values are for."""
    num_envs: int = field(metadata=check(positive_int))
    """Env rows per rank."""
    config: Mapping[str, Any] = field(metadata=check(_tuned_fields))
    """The config fields the file sets (nested mappings for ``algorithm``); never ``seed``."""
    run: Mapping[str, Any] = field(default_factory=dict, metadata=check(_run_options))
    """Env options the values were measured with (keys among :data:`TUNED_RUN_KEYS`)."""
    path: Path | None = field(default=None, metadata=check(optional(_file_path)))
    """The file the values were read from, if any."""

    def __post_init__(self) -> None:
        named = isinstance(self.path, str | os.PathLike)
        _config_fields.validate(self, owner=f"{self.path}: TunedConfig" if named else None)


def file_name(env_id: str) -> str:
    """The tuned file's name for ``env_id``: ``"/"`` and ``":"`` as ``"-"``, plus ``.yaml``.

    Example:
        >>> file_name("typedrl/CartPole-v0")
        'typedrl-CartPole-v0.yaml'
        >>> file_name("minigrid:MiniGrid-DoorKey-5x5-v0")
        'minigrid-MiniGrid-DoorKey-5x5-v0.yaml'
    """
    return env_id.replace("/", "-").replace(":", "-") + ".yaml"


def _folder(algo: str) -> Any:
    return importlib.resources.files(__name__).joinpath(algo)


def available(algo: str | None = None) -> list[tuple[Algorithm, str]]:
    """Every shipped (algorithm, env id), sorted; only ``algo``'s when given.

    Reads each file's ``env_id`` (a file name cannot tell ``"/"`` from ``"-"``).

    Raises:
        ConfigError: A shipped file is invalid (named in the message).
    """
    algos: tuple[Algorithm, ...] = ALGORITHMS if algo is None else (_checked_algo(algo),)
    found: list[tuple[Algorithm, str]] = []
    for name in algos:
        folder = _folder(name)
        if not folder.is_dir():
            continue
        found.extend(
            (name, _parse(entry.read_text(), Path(str(entry))).env_id)
            for entry in sorted(folder.iterdir(), key=lambda item: item.name)
            if entry.name.endswith(".yaml")
        )
    return sorted(found)


def find(algo: str, env_id: str) -> TunedConfig | None:
    """The shipped tuned file for (``algo``, ``env_id``), or ``None`` when there is none.

    Raises:
        ConfigError: ``algo`` is unknown, or the file is invalid.
    """
    checked = _checked_algo(algo)
    entry = _folder(checked).joinpath(file_name(env_id))
    if not entry.is_file():
        return None
    tuned = _parse(entry.read_text(), Path(str(entry)))
    if (tuned.algo, tuned.env_id) != (algo, env_id):
        raise ConfigError(
            f"{tuned.path}: holds algo {tuned.algo!r} and env_id {tuned.env_id!r}, but its "
            f"folder and name say {algo!r} and {env_id!r}"
        )
    build_config(checked, dict(tuned.config), where=str(tuned.path))
    return tuned


def load(algo: str, env_id: str) -> TunedConfig:
    """The shipped tuned file for (``algo``, ``env_id``), validated.

    Raises:
        ConfigError: There is no such file (the message lists the envs that have
            one), or it is invalid.
    """
    tuned = find(algo, env_id)
    if tuned is None:
        envs = [env for name, env in available(algo)]
        raise ConfigError(f"no tuned {algo} config for {env_id!r}; tuned {algo} envs: {envs}")
    return tuned


def load_file(path: str | Path) -> TunedConfig:
    """Read and validate a tuned file anywhere on disk (the format of the shipped ones).

    Raises:
        ConfigError: The file is missing, not YAML, lacks a key or has another,
            or its config does not build (the message names the file and key).
    """
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as error:
        raise ConfigError(f"{file}: cannot read the tuned config ({error.strerror})") from None
    tuned = _parse(text, file)
    build_config(tuned.algo, dict(tuned.config), where=str(file))
    return tuned


def _checked_algo(algo: object) -> Algorithm:
    for name in ALGORITHMS:
        if algo == name:
            return name
    raise ConfigError(f"algo must be one of {list(ALGORITHMS)}, got {describe(algo)}")


def _parse(text: str, path: Path) -> TunedConfig:
    data = parse_mapping(text, path, f"keys {list(TUNED_KEYS)}")
    missing = [key for key in TUNED_KEYS if key not in data]
    unknown = sorted(str(key) for key in data if key not in (*TUNED_KEYS, "policy", "run"))
    if missing or unknown:
        raise ConfigError(
            f"{path}: a tuned file has the keys {list(TUNED_KEYS)} and optionally policy and "
            f"run; missing {missing}, unknown {unknown}"
        )
    config = data["config"] if data["config"] is not None else {}
    if data.get("policy") is not None:
        config = _with_policy(data["algo"], config, data["policy"], path)
    return TunedConfig(
        source=data["source"],
        algo=data["algo"],
        env_id=data["env_id"],
        num_envs=data["num_envs"],
        config=config,
        run=data.get("run") or {},
        path=path,
    )


def _with_policy(algo: object, config: object, section: object, path: Path) -> object:
    """A tuned file's ``config`` with its ``policy:`` section's settings added.

    Raises:
        ConfigError: ``section`` is not a mapping of the built-in policy's settings,
            or sets one that ``config`` sets too.
    """
    settings = policy_fields(PPOConfig if algo == "ppo" else DifferentiableTrainerConfig)
    if not isinstance(section, Mapping) or not isinstance(config, Mapping):
        raise ConfigError(
            f"{path}: policy and config must be mappings, got {describe(section)} and "
            f"{describe(config)}"
        )
    unknown = sorted(str(key) for key in section if key not in settings)
    twice = sorted(str(key) for key in section if key in config)
    if unknown or twice:
        raise ConfigError(
            f"{path}: policy sets the built-in policy's settings {list(settings)}, each once; "
            f"unknown {unknown}, also in config {twice}"
        )
    return {**config, **section}


def build_config(algo: str, values: Mapping[str, Any], *, where: str = "") -> TrainerConfig:
    """Build ``algo``'s config dataclass from plain values (a tuned file's, a run's, flags').

    Fields the values leave out keep the dataclass defaults; APG and SHAC train
    :data:`DEFAULT_DIFFERENTIABLE_TIMESTEPS` env steps when neither
    ``total_timesteps`` nor ``total_updates`` is set, and a SHAC (AHAC) config
    always gets :class:`~typedrl.shac.SHACConfig` (:class:`~typedrl.ahac.AHACConfig`)
    as its algorithm.

    Args:
        algo: The algorithm whose config to build.
        values: Field values; ``algorithm`` (APG, SHAC) is a nested mapping.
        where: Where the values come from, prefixed to every error message.

    Raises:
        ConfigError: An unknown field (the message lists the valid ones), a
            value of the wrong kind, or one the dataclass refuses; an APG config
            with SHAC fields.

    Example:
        >>> build_config("shac", {"segment_length": 16}).algorithm.actor.betas
        (0.7, 0.95)
    """
    prefix = f"{where}: " if where else ""
    algo = _checked_algo(algo)
    data = _plain_dict(values, prefix, "config")
    try:
        if algo == "ppo":
            # An older run's config.yaml may spell a field as that release did.
            data = upgrade_fields(data)
            _check_fields(PPOConfig, data, prefix, "")
            return PPOConfig.from_dict(data)
        if data.get("total_timesteps") is None and data.get("total_updates") is None:
            data["total_timesteps"] = DEFAULT_DIFFERENTIABLE_TIMESTEPS
        algorithm = data.setdefault("algorithm", {})
        if not isinstance(algorithm, dict):
            raise ConfigError(f"{prefix}algorithm must be a mapping, got {describe(algorithm)}")
        if algo == "ahac":
            # Built here: a mapping that names few fields could pass for SHAC's.
            data["algorithm"] = _ahac_config(algorithm, prefix)
        else:
            _check_algorithm(algo, algorithm, prefix)
        _check_fields(DifferentiableTrainerConfig, data, prefix, "")
        return DifferentiableTrainerConfig.from_dict(data)
    except ConfigError as error:
        if prefix and not str(error).startswith(prefix):
            raise ConfigError(f"{prefix}{error}") from None
        raise
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{prefix}the {algo} config does not build: {error}") from None


def _ahac_config(algorithm: dict[str, Any], prefix: str) -> AHACConfig:
    _check_fields(AHACConfig, algorithm, prefix, "algorithm.")
    if isinstance(algorithm.get("actor"), dict):
        _check_fields(APGConfig, algorithm["actor"], prefix, "algorithm.actor.")
    return AHACConfig.from_dict(algorithm)


def _check_algorithm(algo: str, algorithm: dict[str, Any], prefix: str) -> None:
    """Check an APG or SHAC ``algorithm`` mapping's fields (SHAC's gets its actor key)."""
    if algo == "shac":
        # An actor key is what marks an algorithm mapping as SHAC's.
        algorithm.setdefault("actor", {})
        _check_fields(SHACConfig, algorithm, prefix, "algorithm.")
        if isinstance(algorithm["actor"], dict):
            _check_fields(APGConfig, algorithm["actor"], prefix, "algorithm.actor.")
        return
    apg_fields = set(APGConfig.__dataclass_fields__)
    for name, cls in (("SHAC", SHACConfig), ("AHAC", AHACConfig)):
        foreign = sorted(set(algorithm) & (set(cls.__dataclass_fields__) - apg_fields))
        if foreign:
            raise ConfigError(
                f"{prefix}algorithm has {name} fields {foreign}, but the algo is apg "
                f"(train {name} with --algo {name.lower()})"
            )
    _check_fields(APGConfig, algorithm, prefix, "algorithm.")


def _plain_dict(values: Mapping[str, Any], prefix: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in values.items():
        if type(key) is not str:
            raise ConfigError(f"{prefix}{name} keys must be strings, got {describe(key)}")
        data[key] = (
            _plain_dict(value, prefix, f"{name}.{key}") if isinstance(value, Mapping) else value
        )
    return data


def _check_fields(cls: type[Any], data: dict[str, Any], prefix: str, path: str) -> None:
    """Refuse unknown fields (listing the valid ones) and scalars where a list belongs."""
    fields = {item.name: item for item in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{prefix}{cls.__name__} has no fields {[path + name for name in unknown]}; "
            f"valid fields: {sorted(fields)}"
        )
    for name, value in data.items():
        default = fields[name].default
        if isinstance(default, tuple) and not isinstance(value, list | tuple):
            example = list(default) or [64, 64]
            raise ConfigError(
                f"{prefix}{path}{name} must be a list such as {example}, got {describe(value)}"
            )
