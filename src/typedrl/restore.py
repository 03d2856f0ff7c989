"""Find a run's checkpoint and rebuild the policy it saved, for evaluation and export.

:func:`locate_checkpoint` turns what a user names (a run folder or a checkpoint
file) into one checkpoint file; :func:`trained_env` says how to build the env
the checkpoint was trained on (its id, and the env settings of the run's
``config.yaml``); :func:`restore_policy` rebuilds the trainer's policy from the
config stored in a checkpoint and loads its weights, with the observation
normalisers that are part of the saved model.

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
from torch import Tensor

from typedrl.agents import PPOAgent, PPOConfig
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig, SHACConfig
from typedrl.checkpoint import POLICY_KEY, Checkpoint, CheckpointPaths, StrPath, load_into
from typedrl.envs import make, observation_normalize_mask_of
from typedrl.envs._isaaclab import holds_one_simulation
from typedrl.errors import CheckpointError, ConfigError, TypedRLError
from typedrl.policies import DifferentiableMLPPolicy, MLPActorCritic
from typedrl.protocols import VecEnv
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

RestoredPolicy: TypeAlias = MLPActorCritic | DifferentiableMLPPolicy
"""The policies a checkpoint can rebuild: PPO's actor-critic, APG's and SHAC's MLP policy."""


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
    """The algorithm that trained ``checkpoint``: ``"ppo"``, ``"apg"`` or ``"shac"``.

    APG and SHAC share a checkpoint kind (the differentiable trainer's); the
    stored config says which algorithm ran.

    Raises:
        ConfigError: The stored config of a differentiable checkpoint is invalid.
    """
    if checkpoint.kind == PPOAgent.kind:
        return "ppo"
    try:
        config = DifferentiableTrainerConfig.from_dict(checkpoint.config)
    except ConfigError as error:
        raise ConfigError(
            f"{path}: cannot read the saved {checkpoint.kind} config: {error}"
        ) from error
    return "shac" if isinstance(config.algorithm, SHACConfig) else "apg"


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

    The model comes from the trainer's own builder (:meth:`PPOAgent.build_policy
    <typedrl.agents.PPOAgent.build_policy>` for a ``"ppo"`` checkpoint,
    :meth:`DifferentiableTrainer.build_policy
    <typedrl.apg.DifferentiableTrainer.build_policy>` for an ``"apg"`` one, which
    APG and SHAC runs write) with the config stored in the checkpoint and the
    spaces of ``env``; the observation normalisers are part of its state. The
    policy is on the CPU, in eval mode.

    Args:
        checkpoint: A loaded checkpoint (:func:`~typedrl.checkpoint.load_checkpoint`).
        env: An env of the kind the policy was trained on (its spaces, and the
            observation normalise mask of a differentiable env, are read).
        path: The checkpoint's file, named in errors.

    Returns:
        The trained policy.

    Raises:
        ConfigError: The stored config is invalid for this release, or the env's
            spaces do not fit the saved weights.
        CheckpointError: The saved weights do not fit the rebuilt model.
    """
    model: RestoredPolicy
    try:
        if checkpoint.kind == PPOAgent.kind:
            model = PPOAgent.build_policy(
                PPOConfig.from_dict(checkpoint.config),
                env.single_observation_space,
                env.single_action_space,
            )
        else:
            model = DifferentiableTrainer.build_policy(
                DifferentiableTrainerConfig.from_dict(checkpoint.config),
                env.single_observation_space,
                env.single_action_space,
                observation_normalize_mask=observation_normalize_mask_of(env),
            )
    except ConfigError as error:
        raise ConfigError(
            f"{path}: cannot rebuild the saved {checkpoint.kind} policy: {error}"
        ) from error
    _check_weight_shapes(checkpoint, model, env, path=Path(path))
    load_into(model, checkpoint.modules[POLICY_KEY], name=POLICY_KEY, path=Path(path))
    model.eval()
    return model


def _check_weight_shapes(
    checkpoint: Checkpoint, model: RestoredPolicy, env: VecEnv, *, path: Path
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
