"""Find a run's checkpoint and rebuild the policy it saved, for evaluation and export.

:func:`locate_checkpoint` turns what a user names (a run folder or a checkpoint
file) into one checkpoint file; :func:`trained_env` says how to build the env
the checkpoint was trained on (its id, and the env settings of the run's
``config.yaml``); :func:`restore_policy` rebuilds the policy with the factory
the checkpoint records (:class:`~typedrl.policies.PolicyFactory`: the
trainer's default MLP or a policy of the user's) and loads its weights, with
the observation normalisers that are part of the saved model;
:func:`algorithm_of` names the registered algorithm that wrote it
(:mod:`typedrl.algorithms`).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as run:
    ...     (Path(run) / "checkpoints").mkdir()
    ...     (Path(run) / "checkpoints" / "last.ckpt").touch()
    ...     found = locate_checkpoint(run)
    ...     found.path.name, found.choice, found.run_dir == Path(run)
    ('last.ckpt', 'last', True)
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias, final

import gymnasium as gym
from torch import Tensor, nn

from typedrl.algorithms import find_algorithm
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.checkpoint import (
    DEFAULT_POLICY,
    POLICY_KEY,
    Checkpoint,
    CheckpointPaths,
    StrPath,
    load_into,
)
from typedrl.envs import make, observation_normalize_mask_of
from typedrl.envs._isaaclab import holds_one_simulation
from typedrl.errors import CheckpointError, ConfigError, TypedRLError
from typedrl.policies import PolicyFactory
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.protocols import Policy, VecEnv
from typedrl.runs import CONFIG_FILE, RunSettings, read_run_config

__all__ = [
    "CheckpointChoice",
    "CheckpointLocation",
    "RestoredPolicy",
    "TrainedEnv",
    "algorithm_of",
    "locate_checkpoint",
    "restore_policy",
    "trained_env",
]

CheckpointChoice: TypeAlias = Literal["best", "last", "file"]
"""How :func:`locate_checkpoint` chose: a run folder's ``best.ckpt`` or
``last.ckpt``, or the file it was given."""

RestoredPolicy: TypeAlias = Policy
"""What :func:`restore_policy` returns: the policy a checkpoint's factory builds (a module)."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointLocation:
    """A checkpoint file and the run folder it belongs to."""

    path: Path
    """The checkpoint file."""

    run_dir: Path | None
    """The run folder (``None`` for a file outside a run's ``checkpoints/`` folder)."""

    choice: CheckpointChoice
    """``"best"`` or ``"last"`` when a run folder was named, ``"file"`` for a file."""


def locate_checkpoint(path: StrPath) -> CheckpointLocation:
    """The checkpoint that ``path`` names.

    A run folder (one with a ``checkpoints/`` folder) means its
    ``checkpoints/best.ckpt``, or ``checkpoints/last.ckpt`` when the run has no
    best one (it never evaluated). Any other path must be a checkpoint file; its
    run folder is the parent of a ``checkpoints/`` folder holding it.

    Args:
        path: A run folder or a checkpoint file.

    Returns:
        The file, its run folder and which of them was chosen.

    Raises:
        CheckpointError: ``path`` does not exist, or is a folder without
            ``checkpoints/best.ckpt`` and ``checkpoints/last.ckpt``.
    """
    given = Path(path)
    if given.is_dir():
        paths = CheckpointPaths(given / "checkpoints")
        if paths.best.is_file():
            return CheckpointLocation(path=paths.best, run_dir=given, choice="best")
        if paths.last.is_file():
            return CheckpointLocation(path=paths.last, run_dir=given, choice="last")
        raise CheckpointError(
            f"{given} is a folder without {paths.best.relative_to(given)} or "
            f"{paths.last.relative_to(given)}; name a run folder written by `typedrl train` "
            "or a checkpoint file"
        )
    if not given.is_file():
        raise CheckpointError(f"{given} does not exist; expected a run folder or a checkpoint file")
    parent = given.parent
    run_dir = parent.parent if parent.name == "checkpoints" else None
    return CheckpointLocation(path=given, run_dir=run_dir, choice="file")


def algorithm_of(checkpoint: Checkpoint, *, path: StrPath) -> str:
    """The registered algorithm that trained ``checkpoint``: ``"ppo"``, ``"apg"``, ``"shac"``, ...

    Looked up by the checkpoint's kind in :mod:`typedrl.algorithms`; APG and
    SHAC share a kind (the differentiable trainer's), and the stored config
    says which ran (:func:`~typedrl.algorithms.find_algorithm`).

    Raises:
        ConfigError: No registered algorithm writes the checkpoint's kind, or
            its stored config builds for none of those that do.
    """
    try:
        return find_algorithm(kind=checkpoint.kind, config=checkpoint.config).name
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from error


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class TrainedEnv:
    """How to build the env a checkpoint's policy was trained on."""

    env_id: str
    """A Gymnasium id, a built-in id or a ``module:callable`` factory."""

    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of the env's constructor, as the run passed them."""

    wrappers: tuple[str, ...] = ()
    """Gymnasium wrappers of each single env, by name, as the run applied them."""

    clip_actions: bool | None = None
    """The run's action clipping (``None``: the env's own rule)."""

    config_file: Path | None = None
    """The run's ``config.yaml`` the settings came from (``None``: the id alone)."""

    def make(self, *, num_envs: int, seed: int | None) -> VecEnv:
        """Build it (sync vectorization)."""
        return make(
            self.env_id,
            num_envs=num_envs,
            seed=seed,
            wrappers=self.wrappers,
            clip_actions=self.clip_actions,
            env_kwargs=self.env_kwargs,
        )


def trained_env(
    checkpoint: Checkpoint, location: CheckpointLocation, *, env_id: str | None = None
) -> TrainedEnv:
    """The env ``checkpoint`` was trained on, or ``env_id`` when one is named.

    The checkpoint records its env's id. When it belongs to a run folder whose
    ``config.yaml`` names the same env, the env settings of that run
    (``env_kwargs``, ``wrappers``, ``clip_actions``) are used too, so that the
    policy meets the env it was trained on; a different ``env_id`` is built
    from its id alone.

    Raises:
        ConfigError: The checkpoint records no env and no ``env_id`` was
            given, or the run's ``config.yaml`` cannot be read.
    """
    name = env_id if env_id is not None else checkpoint.env_id
    if name is None:
        raise ConfigError(
            f"{location.path} does not record the env it was trained on (it was saved "
            "without RunOptions.env_id); name the env it should be used with"
        )
    config_file = None if location.run_dir is None else location.run_dir / CONFIG_FILE
    if config_file is None or not config_file.is_file():
        return TrainedEnv(env_id=name)
    document = read_run_config(config_file)
    if document.get("env_id") != name:
        return TrainedEnv(env_id=name)
    try:
        run = RunSettings.from_dict(document.get("run") or {})
    except ConfigError as error:
        raise ConfigError(f"{config_file}: {error}") from None
    return TrainedEnv(
        env_id=name,
        env_kwargs=dict(run.env_kwargs),
        wrappers=run.wrappers,
        clip_actions=run.clip_actions,
        config_file=config_file,
    )


def restore_policy(checkpoint: Checkpoint, env: VecEnv, *, path: StrPath) -> RestoredPolicy:
    """Rebuild the policy a trainer saved in ``checkpoint`` and load its weights.

    The model comes from the factory the checkpoint records
    (:attr:`~typedrl.checkpoint.Checkpoint.policy_factory`), called with the
    spaces of ``env``: the trainer's default MLP
    (:meth:`PPOAgent.default_policy_factory
    <typedrl.ppo.PPOAgent.default_policy_factory>`,
    :meth:`DifferentiableTrainer.default_policy_factory
    <typedrl.apg.DifferentiableTrainer.default_policy_factory>`) or a policy of
    the user's. A file written before factories were recorded
    (:data:`~typedrl.checkpoint.DEFAULT_POLICY`, PPO, APG or SHAC) gets its
    trainer's default factory for the stored config (and the observation
    normalise mask of ``env``). The observation normalisers are part of the
    state. The policy is on the CPU, in eval mode.

    Args:
        checkpoint: A loaded checkpoint (:func:`~typedrl.checkpoint.load_checkpoint`).
        env: An env of the kind the policy was trained on (its spaces, and the
            observation normalise mask of a differentiable env, are read).
        path: The checkpoint's file, named in errors.

    Returns:
        The trained policy.

    Raises:
        ConfigError: The run recorded no factory, the factory cannot be
            imported or called, the stored config is invalid for this release,
            or the env's spaces do not fit the saved weights.
        CheckpointError: The saved weights do not fit the rebuilt model.
    """
    factory = _factory_of(checkpoint, env, path=Path(path))
    try:
        model = factory.build(env.single_observation_space, env.single_action_space)
    except ConfigError as error:
        raise ConfigError(
            f"{path}: cannot rebuild the saved {checkpoint.kind} policy: {error}"
        ) from error
    if not isinstance(model, Policy):
        raise ConfigError(
            f"{path}: the policy factory {factory.target} returned {type(model).__name__}, "
            "which has no act(obs, *, deterministic); it must return the policy it trained"
        )
    _check_weight_shapes(checkpoint, model, env, path=Path(path))
    load_into(model, checkpoint.modules[POLICY_KEY], name=POLICY_KEY, path=Path(path))
    model.eval()
    return model


def _factory_of(checkpoint: Checkpoint, env: VecEnv, *, path: Path) -> PolicyFactory:
    """The factory that rebuilds ``checkpoint``'s policy (see :func:`restore_policy`)."""
    recorded = checkpoint.policy_factory
    if isinstance(recorded, PolicyFactory):
        return recorded
    if recorded is None:
        raise ConfigError(
            f"{path}: the run recorded no policy factory (its policy was given to the trainer "
            "without one), so it cannot be rebuilt here; train with policy_factory="
            "PolicyFactory('package.module:function', kwargs={...}) (typedrl train --policy "
            "package.module:function), or build the policy yourself and load "
            f"checkpoint.modules[{POLICY_KEY!r}] into it"
        )
    # DEFAULT_POLICY: only PPO ("ppo") and APG/SHAC ("apg") wrote files before factories.
    try:
        if checkpoint.kind == PPOAgent.kind:
            # Files of schema 1 and 2 predate image encoders: their images were flattened.
            config = PPOConfig.from_dict({"encoder": "flatten", **checkpoint.config})
            return PPOAgent.default_policy_factory(config, env.single_observation_space)
        if checkpoint.kind == DifferentiableTrainer.kind:
            return DifferentiableTrainer.default_policy_factory(
                DifferentiableTrainerConfig.from_dict(checkpoint.config),
                observation_normalize_mask=observation_normalize_mask_of(env),
            )
    except ConfigError as error:
        raise ConfigError(
            f"{path}: cannot rebuild the saved {checkpoint.kind} policy: {error}"
        ) from error
    raise ConfigError(
        f"{path}: a checkpoint of kind {checkpoint.kind!r} must record its policy factory "
        f"(policy_factory {DEFAULT_POLICY!r} is for PPO and APG files of schema 1 and 2)"
    )


def _check_weight_shapes(
    checkpoint: Checkpoint, model: nn.Module, env: VecEnv, *, path: Path
) -> None:
    """Refuse, in one line naming both envs' spaces, saved weights the rebuilt model cannot hold.

    A checkpoint used on another env than its own rebuilds a model of other
    shapes; the line says which env it was trained on instead of listing every
    tensor whose size differs.
    """
    rebuilt = model.state_dict()
    saved = checkpoint.modules[POLICY_KEY]
    mismatch = next(
        (
            (key, list(value.shape), list(rebuilt[key].shape))
            for key, value in saved.items()
            if isinstance(value, Tensor) and key in rebuilt and value.shape != rebuilt[key].shape
        ),
        None,
    )
    if mismatch is None:
        return
    key, saved_shape, rebuilt_shape = mismatch
    trained = "an env it does not record" if checkpoint.env_id is None else checkpoint.env_id
    fix = (
        f"use it with {checkpoint.env_id}, the env it records (leave the env argument out)"
        if checkpoint.env_id is not None
        else "name the env it was trained on"
    )
    raise ConfigError(
        f"checkpoint {path} was trained on {trained}{_spaces_of(checkpoint.env_id)}; the env "
        f"it was given has {_spaces(env)} ({key!r} saved {saved_shape}, needed "
        f"{rebuilt_shape}); {fix}"
    )


def _space(space: gym.Space[Any]) -> str:
    """A space in a few words: a ``Box``'s shape and dtype (its bounds can be long)."""
    if isinstance(space, gym.spaces.Box):
        return f"Box{space.shape} {space.dtype}"
    if isinstance(space, gym.spaces.Dict):
        return "Dict(" + ", ".join(f"{k}: {_space(v)}" for k, v in space.spaces.items()) + ")"
    return repr(space)


def _spaces(env: VecEnv) -> str:
    return (
        f"observation space {_space(env.single_observation_space)} and action space "
        f"{_space(env.single_action_space)}"
    )


def _spaces_of(env_id: str | None) -> str:
    """`` with observation space A and action space B`` of ``env_id``, or ``""`` if unknown."""
    if env_id is None or holds_one_simulation(env_id):
        # An Isaac Lab task cannot be built beside the env already open.
        return ""
    try:
        env = make(env_id, num_envs=1)
    except (TypedRLError, gym.error.Error, ImportError, OSError):
        return ""
    try:
        return f" with {_spaces(env)}"
    finally:
        env.close()
