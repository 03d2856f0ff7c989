"""How ``typedrl train`` resolves its settings from defaults, files and flags.

One source of truth for every value, lowest first: the config dataclass's
defaults < the tuned file for (algo, env) < the ``--config`` file < the flags
and ``--set``. With ``--resume RUN_DIR`` the run's own ``config.yaml`` replaces
the first three, and the flags may change only what a resume may change. The
algorithm (``--algo``) is looked up in :mod:`typedrl.algorithms`, which a
package can extend. The run folder's ``config.yaml`` itself is
:mod:`typedrl.runs`'s.
"""

import ast
import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast, final

from typedrl import configs
from typedrl._config_fields import plain, policy_fields
from typedrl._validation import describe, positive_int
from typedrl.algorithms import DEFAULT_ENV_IDS, AlgorithmConfig, AlgorithmSpec, get_algorithm
from typedrl.errors import ConfigError
from typedrl.runs import CONFIG_FILE, OPTIONAL_RUN_KEYS, RUN_KEYS, RunSettings, read_run_config

if TYPE_CHECKING:
    from typedrl.policies import PolicyFactory

__all__ = [
    "DEFAULT_ENV_IDS",
    "FIXED_RUN_SETTINGS",
    "CommandLayer",
    "ResolvedRun",
    "parse_env_kwargs",
    "parse_override",
    "resolve",
]

DEFAULT_NUM_ENVS: Final = 8
"""Env rows per rank when neither a tuned file nor the user sets them."""

FIXED_RUN_SETTINGS: Final = frozenset({"env_kwargs", "wrappers", "clip_actions"})
"""Run settings a resume may not change (they change the env). The number of ranks may
change (``devices``, ``num_nodes``): such a resume is valid but not bit-exact."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedRun:
    """Everything ``typedrl train`` runs with, after every layer was applied."""

    source: str
    """Which layers the values came from, lowest first."""
    algo: str
    """The algorithm's registered name (:mod:`typedrl.algorithms`)."""
    env_id: str
    """The env id or ``module:callable`` spec."""
    num_envs: int
    """Env rows per rank."""
    seed: int
    """The run's seed."""
    config: AlgorithmConfig
    """The built config dataclass (its ``seed`` is :attr:`seed`)."""
    run: RunSettings
    """The run options."""
    command: tuple[str, ...]
    """The command line, ``typedrl`` first."""
    policy: "PolicyFactory | None" = None
    """The factory of the policy to train (``--policy``); ``None``: the algorithm's default."""

    @property
    def spec(self) -> AlgorithmSpec:
        """The registered algorithm."""
        return get_algorithm(self.algo)

    def to_document(self) -> dict[str, Any]:
        """The ``config.yaml`` document (reloadable with ``--config``)."""
        config = self.config.to_dict()
        config.pop("seed", None)
        document: dict[str, Any] = {
            "source": self.source,
            "algo": self.algo,
            "env_id": self.env_id,
            "num_envs": self.num_envs,
            "seed": self.seed,
            "config": config,
        }
        if self.policy is not None:
            document["policy"] = self.policy.to_dict()
        else:
            # The built-in policy's settings, in a section of their own.
            section = {
                name: config.pop(name)
                for name in policy_fields(type(self.config))
                if name in config
            }
            if section:
                document["policy"] = section
        document["run"] = self.run.to_dict()
        document["command"] = list(self.command)
        return document


def parse_value(raw: str) -> Any:
    """A command-line value: JSON where it parses, else a Python literal, else the text itself.

    So ``false`` and ``False`` are both the bool, ``null`` and ``None`` both
    ``None``, ``[32, 32]`` a list, and ``linear`` (or ``'linear'``) the text.
    Nothing is evaluated: :func:`ast.literal_eval` reads literals only.

    Example:
        >>> parse_value("False"), parse_value("false"), parse_value("None"), parse_value("0.5")
        (False, False, None, 0.5)
        >>> parse_value("rgb_array"), parse_value("'42'")
        ('rgb_array', '42')
    """
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(raw.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return raw


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``KEY=VALUE``; the value is read by :func:`parse_value`.

    Example:
        >>> parse_override("actor_hidden=[32, 32]")
        ('actor_hidden', [32, 32])
        >>> parse_override("learning_rate_schedule=linear")
        ('learning_rate_schedule', 'linear')
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set expects KEY=VALUE, got {text!r}")
    return key, parse_value(raw)


def parse_env_kwargs(items: Sequence[str], *, flag: str = "--env-kwargs") -> dict[str, Any]:
    """Merge ``--env-kwargs`` items: each a JSON object or ``key=value`` (see :func:`parse_value`).

    ``--policy-kwargs`` items are read alike (``flag`` names the option in messages).

    Example:
        >>> parse_env_kwargs(['{"g": 9.81}', "render_mode=rgb_array", "is_slippery=False"])
        {'g': 9.81, 'render_mode': 'rgb_array', 'is_slippery': False}
    """
    merged: dict[str, Any] = {}
    for item in items:
        if item.lstrip().startswith("{"):
            try:
                value = json.loads(item)
            except json.JSONDecodeError as error:
                raise ConfigError(f"{flag} {item!r}: not a JSON object ({error})") from None
            if not isinstance(value, dict):
                raise ConfigError(f"{flag} {item!r}: expected a JSON object")
            merged.update(value)
            continue
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} expects a JSON object or KEY=VALUE, got {item!r}")
        merged[key.strip()] = parse_value(raw)
    return merged


def _set_dotted(target: dict[str, Any], key: str, value: Any) -> None:
    *groups, name = key.split(".")
    if not all(groups) or not name:
        raise ConfigError(f"--set {key}: empty part in a dotted key")
    for group in groups:
        inner = target.get(group)
        if not isinstance(inner, dict):
            inner = {}
            target[group] = inner
        target = inner
    target[name] = value


def _merge(base: dict[str, Any], layer: Mapping[str, Any], *, budgets: bool) -> None:
    """Apply ``layer`` onto ``base`` in place; nested mappings merge key by key.

    With ``budgets`` (APG, SHAC: exactly one of ``total_timesteps`` and
    ``total_updates``), a layer setting one budget and not the other clears the
    other, so that the highest layer's budget wins.
    """
    if budgets:
        for given, other in (
            ("total_timesteps", "total_updates"),
            ("total_updates", "total_timesteps"),
        ):
            if layer.get(given) is not None and other not in layer:
                base[other] = None
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value, budgets=False)
        else:
            base[key] = _copy(value)


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(item) for item in value]
    return value


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class CommandLayer:
    """What the command line sets: only the flags given (``None``: not given)."""

    algo: str | None = None
    env_id: str | None = None
    num_envs: int | None = None
    seed: int | None = None
    total_timesteps: int | None = None
    compile: bool | None = None
    overrides: tuple[str, ...] = ()
    run: Mapping[str, Any] = field(default_factory=dict)
    policy: str | None = None
    """``--policy``: the policy factory's ``package.module:function``."""
    policy_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """``--policy-kwargs``: its keyword arguments, over those of a lower layer's same factory."""


def _layer_document(layer: CommandLayer) -> dict[str, Any]:
    document: dict[str, Any] = {"config": {}, "run": dict(layer.run)}
    for key in ("algo", "env_id", "num_envs", "seed"):
        value = getattr(layer, key)
        if value is not None:
            document[key] = value
    if layer.policy is not None:
        document["policy"] = {"target": layer.policy, "kwargs": dict(layer.policy_kwargs)}
    elif layer.policy_kwargs:
        document["policy"] = {"kwargs": dict(layer.policy_kwargs)}
    if layer.total_timesteps is not None:
        document["config"]["total_timesteps"] = layer.total_timesteps
    if layer.compile is not None:
        document["config"]["compile"] = layer.compile
    for text in layer.overrides:
        key, value = parse_override(text)
        group, dot, rest = key.partition(".")
        if group == "policy" and dot:
            # --set policy.core=gru: a key of the policy: section.
            _set_dotted(document.setdefault("policy", {}), rest, value)
        else:
            _set_dotted(document["config"], key, value)
    return document


def _take_seed(document: dict[str, Any], top: str, inner: str) -> None:
    """Move a ``config.seed`` (``--set seed=...``) to the top-level ``seed``.

    Raises:
        ConfigError: Both are given, with different values (``top`` and ``inner``
            name them: ``"--seed "`` and ``"--set seed="``).
    """
    config = document.get("config")
    if isinstance(config, dict) and "seed" in config:
        seed = config.pop("seed")
        if "seed" in document and plain(document["seed"]) != plain(seed):
            raise ConfigError(
                f"{top}{document['seed']!r} and {inner}{seed!r} contradict each other; "
                "give the seed once"
            )
        document["seed"] = seed


def _checked_algo(value: object, where: str) -> AlgorithmSpec:
    if type(value) is not str:
        raise ConfigError(f"{where}: algo must be a registered name, got {describe(value)}")
    try:
        return get_algorithm(value)
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from None


def _read_saved(run_dir: Path) -> dict[str, Any]:
    """A resumed run's ``config.yaml``, with every key a run writes."""
    saved = read_run_config(run_dir / CONFIG_FILE)
    missing = [key for key in RUN_KEYS if key not in saved and key not in OPTIONAL_RUN_KEYS]
    if missing:
        raise ConfigError(f"{run_dir / CONFIG_FILE}: lacks the keys {missing}")
    return saved


def _base_document(
    spec: AlgorithmSpec, env_id: str, saved: Mapping[str, Any] | None, run_dir: Path | None
) -> tuple[dict[str, Any], list[str]]:
    """The lowest layers: a resumed run's saved values, or the defaults and the tuned file."""
    document: dict[str, Any] = {"num_envs": DEFAULT_NUM_ENVS, "seed": 0, "config": {}, "run": {}}
    if saved is not None:
        saved_layer = {key: saved[key] for key in ("num_envs", "seed", "config", "run")}
        _merge(document, saved_layer, budgets=False)
        factory, settings = _split_policy(saved.get("policy"), spec, f"{run_dir}/{CONFIG_FILE}")
        document["config"].update(_copy(settings))
        if factory is not None:
            document["policy"] = _copy(factory)
        return document, [f"the resumed run's {run_dir or '.'}/{CONFIG_FILE}"]
    algo = spec.name
    layers = [f"{spec.config.__name__} defaults"]
    # Tuned files ship for typedrl's own algorithms only.
    tuned = configs.find(algo, env_id) if algo in configs.ALGORITHMS else None
    if tuned is not None:
        layers.append(f"tuned {algo}/{configs.file_name(env_id)}")
        layer = {"num_envs": tuned.num_envs, "config": dict(tuned.config), "run": dict(tuned.run)}
        _merge(document, layer, budgets=False)
    return document, layers


def resolve(
    command: CommandLayer,
    *,
    config_file: Path | None,
    argv: Sequence[str],
    resume_from: Path | None = None,
) -> ResolvedRun:
    """Resolve the run's settings from every layer (see the module docstring).

    Args:
        command: What the flags set.
        config_file: The ``--config`` file, if any.
        argv: The command line, recorded in ``config.yaml``.
        resume_from: A run folder being resumed: its ``config.yaml`` is the base,
            and only resumable values may change.

    Raises:
        ConfigError: A file is invalid, a key or value is unknown or invalid, or a
            resume changes what it may not (naming the key and both values).
    """
    flags = _layer_document(command)
    _take_seed(flags, "--seed ", "--set seed=")
    file_layer: dict[str, Any] = {}
    if config_file is not None:
        file_layer = {
            key: value
            for key, value in read_run_config(config_file).items()
            if key not in ("source", "command")
        }
        _take_seed(file_layer, f"--config {config_file}: seed: ", "config.seed: ")
        if "algo" in flags and "algo" in file_layer and flags["algo"] != file_layer["algo"]:
            # Its fields are another algorithm's: applied to this one they would mislead.
            raise ConfigError(
                f"--config {config_file} is a config for algo {file_layer['algo']!r}, "
                f"--algo says {flags['algo']!r}; drop --algo, or use a config of "
                f"{flags['algo']!r} (typedrl train --algo {flags['algo']} --print-config "
                "writes one)"
            )
    saved = _read_saved(resume_from) if resume_from is not None else None
    previous: Mapping[str, Any] = saved if saved is not None else {}
    where = "--algo" if "algo" in flags else str(config_file or resume_from or "--algo")
    spec = _checked_algo(
        flags.get("algo", file_layer.get("algo", previous.get("algo", "ppo"))), where
    )
    algo = spec.name
    if command.compile is not None and algo != "ppo":
        raise ConfigError(
            f"--{'' if command.compile else 'no-'}compile is PPO's (PPOConfig.compile); "
            f"{algo} runs its update eagerly: drop the flag"
        )
    env_id = flags.get("env_id", file_layer.get("env_id", previous.get("env_id")))
    if env_id is None:
        env_id = spec.default_env_id
    if env_id is None:
        raise ConfigError(
            f"--algo {algo} has no default env; name the env to train on (typedrl train ENV "
            f"--algo {algo})"
        )
    if saved is not None and algo != saved.get("algo"):
        # Checked first: the saved config is not another algorithm's.
        raise ConfigError(
            f"--resume {resume_from}: algo was {saved.get('algo')!r} in the run, now {algo!r}; "
            "start a new run to change it"
        )
    if type(env_id) is not str or not env_id:
        raise ConfigError(f"env_id must be a non-empty string, got {describe(env_id)}")
    document, layers = _base_document(spec, env_id, saved, resume_from)
    layers += _apply_layers(
        document,
        ((f"--config {config_file}", file_layer), ("command-line flags", flags)),
        spec,
    )
    num_envs = document["num_envs"]
    positive_int("typedrl train", "num_envs", num_envs)
    seed = document["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an int, got {describe(seed)}")
    config = spec.make_config({**document["config"], "seed": seed})
    run = RunSettings.from_dict(document["run"])
    resolved = ResolvedRun(
        source="typedrl train: " + " < ".join(layers),
        algo=algo,
        env_id=env_id,
        num_envs=num_envs,
        seed=seed,
        config=config,
        run=run,
        command=tuple(argv),
        policy=_policy_factory(document.get("policy")),
    )
    if saved is not None and resume_from is not None:
        _check_resumable(resolved, saved, resume_from)
    return resolved


def _apply_layers(
    document: dict[str, Any],
    layers: Sequence[tuple[str, Mapping[str, Any]]],
    spec: AlgorithmSpec,
) -> list[str]:
    """Apply each named layer onto ``document`` in order; the names of those that set something.

    Raises:
        ConfigError: A ``policy:`` section is invalid, or sets the built-in
            policy's settings where the run trains a policy of its own.
    """
    budgets = _exclusive_budgets(spec.config)
    applied: list[str] = []
    settings_given: list[str] = []
    for name, layer in layers:
        values = {key: value for key, value in layer.items() if key not in ("algo", "env_id")}
        if not values or values == {"config": {}, "run": {}}:
            continue
        applied.append(name)
        config_values = values.pop("config", None) or {}
        run_values = values.pop("run", None) or {}
        if "policy" in values:
            given = values.pop("policy")
            if given is None:
                # policy: null in a file means the algorithm's default policy.
                document["policy"] = None
            factory, settings = _split_policy(given, spec, name)
            if factory is not None:
                document["policy"] = _layered_policy(document.get("policy"), factory)
            config_values = {**config_values, **settings}
            settings_given.extend(settings)
        _merge(document, values, budgets=False)
        _merge(document["config"], config_values, budgets=budgets)
        _merge(document["run"], run_values, budgets=False)
    if settings_given and document.get("policy") is not None:
        raise ConfigError(
            f"policy.{settings_given[0]} is a setting of {spec.name}'s built-in policy, but "
            f"this run trains its own ({document['policy'].get('target')}); pass the "
            "factory's own settings in its kwargs (--policy-kwargs)"
        )
    return applied


def _exclusive_budgets(config: type[Any]) -> bool:
    """Whether the config has two budgets of which exactly one is set (APG's and SHAC's).

    A layer that sets one of them then clears the other (see ``_merge``).
    """
    fields = (
        {field.name for field in dataclasses.fields(config)}
        if dataclasses.is_dataclass(config)
        else set()
    )
    return {"total_timesteps", "total_updates"} <= fields


def _split_policy(
    value: Mapping[str, Any] | None, spec: AlgorithmSpec, where: str
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """A ``policy:`` section as its factory part and the built-in policy's settings.

    The factory part (``target``, ``kwargs``; ``None`` when neither is there)
    names a policy of the user's; the settings are fields of the algorithm's
    config marked as the built-in policy's (:func:`~typedrl._config_fields.policy`).
    A file's section is a mapping or ``None`` once :func:`~typedrl.runs.read_run_config`
    has read it; the flags' and a resolved run's are built as dicts.

    Raises:
        ConfigError: ``value`` has another key.
    """
    if value is None:
        return None, {}
    settings = policy_fields(spec.config)
    unknown = [key for key in value if key not in settings and key not in ("target", "kwargs")]
    if unknown:
        raise ConfigError(
            f"{where}: policy has unknown keys {unknown}; {spec.name}'s built-in policy takes "
            f"{list(settings)}, a policy of your own target and kwargs"
        )
    factory = {key: value[key] for key in ("target", "kwargs") if key in value}
    return factory or None, {key: value[key] for key in value if key in settings}


def _layered_policy(below: object, layer: Mapping[str, Any]) -> dict[str, Any]:
    """A layer's ``policy:`` over the one below: a ``target`` replaces it, ``kwargs`` alone merge.

    Raises:
        ConfigError: The layer sets ``kwargs`` without a ``target`` and none is below,
            or sets ``kwargs`` to something other than a mapping.
    """
    if "target" in layer:
        return {key: _copy(value) for key, value in layer.items()}
    if not isinstance(below, Mapping) or "target" not in below:
        raise ConfigError(
            "--policy-kwargs (or a policy: section without target) needs a policy factory: "
            "add --policy package.module:function"
        )
    added = layer.get("kwargs")
    if added is not None and not isinstance(added, Mapping):
        raise ConfigError(
            f"policy.kwargs must be a mapping of the policy factory's keyword arguments, got "
            f"{describe(added)}"
        )
    merged = {key: _copy(value) for key, value in below.items()}
    kwargs = merged.get("kwargs")
    merged["kwargs"] = {
        **(kwargs if isinstance(kwargs, dict) else {}),
        **_copy(dict(added or {})),
    }
    return merged


def _policy_factory(value: object) -> "PolicyFactory | None":
    """The ``policy:`` section as a factory (``None``: the algorithm's default policy)."""
    if value is None:
        return None
    from typedrl.policies import PolicyFactory  # noqa: PLC0415 - imports torch

    # from_dict refuses a value that is not a mapping, naming the policy section.
    return PolicyFactory.from_dict(cast("Mapping[str, Any]", value))


def _check_resumable(resolved: ResolvedRun, saved: Mapping[str, Any], run_dir: Path) -> None:
    """Refuse a resume that changes what a resume may not change, naming the key."""
    allowed = resolved.spec.trainer.resumable_changes
    now = resolved.to_document()
    changes: list[tuple[str, Any, Any]] = [
        (key, saved[key], now[key])
        for key in ("algo", "env_id", "num_envs", "seed")
        if plain(saved[key]) != plain(now[key])
    ]
    where = str(run_dir / CONFIG_FILE)
    saved_factory, saved_settings = _split_policy(saved.get("policy"), resolved.spec, where)
    now_factory, now_settings = _split_policy(now.get("policy"), resolved.spec, where)
    if plain(saved_factory) != plain(now_factory):
        changes.append(("policy", saved_factory, now_factory))
    # The built-in policy's settings, in the config: or the policy: section, compare alike.
    saved_config = {
        **(saved["config"] if isinstance(saved["config"], dict) else {}),
        **saved_settings,
    }
    now_config = {**now["config"], **now_settings}
    for key in sorted(set(saved_config) | set(now_config)):
        if key in allowed:
            continue
        before, after = saved_config.get(key), now_config.get(key)
        if plain(before) != plain(after):
            changes.append((f"config.{key}", before, after))
    saved_run = RunSettings.from_dict(saved["run"] or {}).to_dict()
    changes.extend(
        (f"run.{key}", saved_run[key], now["run"][key])
        for key in sorted(FIXED_RUN_SETTINGS)
        if plain(saved_run[key]) != plain(now["run"][key])
    )
    if changes:
        key, before, after = changes[0]
        more = f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
        raise ConfigError(
            f"--resume {run_dir}: {key} was {before!r} in the run, now {after!r}{more}; a "
            f"resume may change only {sorted(allowed)} and the run options (eval, "
            "checkpoint and device settings, devices and num_nodes among them); start a new "
            "run to change it"
        )
