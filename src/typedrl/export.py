"""Export a trained policy as a plain tensor-in, action-out model (ONNX or TorchScript).

:class:`DeterministicPolicy` turns any trained policy into a module from a
flat observation tensor ``[batch, obs_dim]`` to the action its evaluation
plays. For the MLP policies (PPO's :class:`~typedrl.policies.MLPActorCritic`,
APG's and SHAC's :class:`~typedrl.policies.DifferentiableMLPPolicy`, and any
policy with :class:`~typedrl.protocols.SupportsDeterministicActor`)
observation normalisation is baked in (the saved running statistics, clamped
as in training), a Gaussian policy returns its mean (squashed into the action
bounds when the policy squashes), a categorical one the index of its most
likely action; any other policy is exported through its ``act(obs,
deterministic=True)``. :func:`export_policy` writes it to a file;
:func:`export_checkpoint` does both for a checkpoint or run folder.

``obs_dim`` is the concatenation of the observation keys the policy reads, each
flattened, in the policy's key order (a ``Box`` observation stored under
``"obs"`` is simply its flattened array; a ``Discrete`` observation is one
column holding its index, which the exported module one-hot encodes as the
policy does); for a policy exported through ``act``, every key of the
observation space, in the space's order.

ONNX files are written by PyTorch's ``torch.export``-based exporter (needs
``pip install 'typedrl[onnx]'``), with a dynamic batch axis, input ``"obs"``
and output ``"action"``. TorchScript files come from :func:`torch.jit.trace`;
PyTorch deprecates TorchScript, so prefer ONNX (or ``torch.export``) for new
deployments.

Example:
    >>> import gymnasium as gym, torch
    >>> from tensordict import TensorDict
    >>> from typedrl.policies import MLPActorCritic
    >>> space = gym.spaces.Box(-1, 1, (4,))
    >>> model = MLPActorCritic(space, gym.spaces.Discrete(3))
    >>> exported = DeterministicPolicy(model, space)
    >>> obs = torch.randn(5, 4)
    >>> expected = model.act(TensorDict({"obs": obs}, batch_size=[5]), deterministic=True)
    >>> bool((exported(obs) == expected["action"]).all())
    True
"""

import copy
import importlib
import importlib.util
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, final

import gymnasium as gym
import torch
from jaxtyping import Float
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl import _validation
from typedrl._validation import describe
from typedrl.checkpoint import StrPath, load_checkpoint
from typedrl.errors import ConfigError, MissingDependencyError
from typedrl.policies._encoders import flat_keys, key_spaces, layout_width, split_flat
from typedrl.protocols import Policy, StatefulActorCritic, SupportsDeterministicActor
from typedrl.restore import (
    CheckpointLocation,
    locate_checkpoint,
    restore_policy,
    trained_env,
)

__all__ = [
    "EXPORT_FORMATS",
    "DeterministicPolicy",
    "ExportFormat",
    "ExportResult",
    "RecurrentDeterministicPolicy",
    "export_checkpoint",
    "export_policy",
    "export_recurrent_policy",
]

ExportFormat: TypeAlias = Literal["onnx", "torchscript"]
"""File formats :func:`export_policy` writes."""

EXPORT_FORMATS: Final[tuple[ExportFormat, ...]] = ("onnx", "torchscript")
"""Every :data:`ExportFormat`."""

_SUFFIXES: Final[dict[ExportFormat, str]] = {"onnx": ".onnx", "torchscript": ".pt"}
_ONNX_MODULES: Final = ("onnx", "onnxscript")


@final
class _ActThroughTensorDict(nn.Module):
    """Any policy's ``act(obs, deterministic=True)["action"]``, from flat observations.

    The flat ``[batch, obs_dim]`` tensor is cut into the observation space's
    keys (each flattened, an index as one column, in the space's order; a
    single space is the key ``"obs"``), each key in the dtype the env adapters
    give it (indices int64, ``MultiBinary`` int8), put in a TensorDict and
    handed to the policy.
    """

    def __init__(self, policy: Policy, observation_space: gym.Space[Any]) -> None:
        super().__init__()
        self.obs_dim = layout_width(
            observation_space, tuple(key_spaces(observation_space)), "DeterministicPolicy"
        )
        self.keys = flat_keys(observation_space)
        self.policy = copy.deepcopy(policy)
        self.policy.train(mode=False)

    # Traced by torch.jit.trace and torch.export: no runtime checks inside.
    @_validation.no_type_check
    def forward(self, obs: Tensor) -> Tensor:
        leaves = split_flat(obs, self.keys)
        action: Tensor = self.policy.act(
            TensorDict(leaves, batch_size=[obs.shape[0]]), deterministic=True
        )["action"]
        return action


@final
class DeterministicPolicy(nn.Module):
    """The deterministic action of a trained policy, from a flat observation tensor.

    A policy that has its own export form
    (:class:`~typedrl.protocols.SupportsDeterministicActor`, as the MLP
    policies have: only the actor's keys, normalisation baked in, a Gaussian's
    mean or a categorical's most likely action) is exported through it; any
    other :class:`~typedrl.protocols.Policy` through ``act(obs,
    deterministic=True)``, with the flat input cut into every key of the
    observation space. The module holds a copy, so later changes to ``policy``
    do not reach it, and its forward traces and exports with a dynamic batch
    size.

    Args:
        policy: Any policy (PPO's :class:`~typedrl.policies.MLPActorCritic`,
            APG's and SHAC's :class:`~typedrl.policies.DifferentiableMLPPolicy`
            or one of your own).
        observation_space: The env's single observation space (gives each
            key's width).

    Raises:
        ConfigError: If an observation key the module reads is not a ``Box``,
            or the policy is recurrent (its state would be lost between calls).
    """

    def __init__(self, policy: Policy, observation_space: gym.Space[Any]) -> None:
        super().__init__()
        if isinstance(policy, StatefulActorCritic):
            raise ConfigError(
                f"{type(policy).__name__} is recurrent: a flat export without its rollout state "
                "would act as at every episode's start; export it with "
                "RecurrentDeterministicPolicy and export_recurrent_policy (its state as inputs "
                "and outputs)"
            )
        self.actor: nn.Module = (
            policy.deterministic_actor(observation_space)
            if isinstance(policy, SupportsDeterministicActor)
            else _ActThroughTensorDict(policy, observation_space)
        )
        obs_dim = getattr(self.actor, "obs_dim", None)
        if isinstance(obs_dim, bool) or not isinstance(obs_dim, int):
            raise ConfigError(
                f"{type(policy).__name__}.deterministic_actor must return a module with an int "
                f"obs_dim, got {describe(obs_dim)}"
            )
        self.obs_dim = obs_dim
        """Width of the input ``[batch, obs_dim]``."""
        with torch.no_grad():
            example: Tensor = self.actor(torch.zeros(1, obs_dim))
        self.action_shape: tuple[int, ...] = tuple(example.shape[1:])
        """Shape of one action (``()`` for a discrete action)."""
        self.discrete = not (example.is_floating_point() or example.is_complex())
        """Whether the output is an action index."""
        self.eval()

    # Traced by torch.jit.trace and torch.export: no runtime checks inside.
    @_validation.no_type_check
    def forward(self, obs: Float[Tensor, "batch obs_dim"]) -> Tensor:
        """The action for each row of ``obs``.

        Args:
            obs: Flat observations, ``[batch, obs_dim]``, float32 or float64.

        Returns:
            ``[batch, *action_shape]`` actions (int64 ``[batch]`` indices for a
            ``Discrete`` action space).
        """
        action: Tensor = self.actor(obs)
        return action


@final
class RecurrentDeterministicPolicy(nn.Module):
    """A recurrent policy's deterministic step: ``(obs, *state) -> (action, *next_state)``.

    ``obs`` is the flat observation ``[batch, obs_dim]`` (every key of the
    observation space, each flattened, in the space's order, an index as one
    column); each state entry is ``[batch, *shape]`` in the order of
    :attr:`state_keys` (the policy's ``state_specs``). Start an episode from
    zeros (:meth:`initial_state`) and feed each step's next state back in;
    reset a row's state when its episode ends. Normalisation lives inside the
    policy, so it is baked in. The module holds a copy of the policy.

    Example:
        >>> import gymnasium as gym, torch
        >>> from typedrl.policies import RecurrentActorCritic
        >>> space = gym.spaces.Box(-1, 1, (2,))
        >>> policy = RecurrentActorCritic(space, gym.spaces.Discrete(2), core="lstm")
        >>> step = RecurrentDeterministicPolicy(policy, space)
        >>> action, h, c = step(torch.zeros(3, 2), *step.initial_state(3))
        >>> step.state_keys, action.shape, h.shape
        (('h', 'c'), torch.Size([3]), torch.Size([3, 1, 64]))
    """

    def __init__(self, policy: StatefulActorCritic, observation_space: gym.Space[Any]) -> None:
        super().__init__()
        self.obs_dim = layout_width(
            observation_space, tuple(key_spaces(observation_space)), "RecurrentDeterministicPolicy"
        )
        """Width of the flat observation input."""
        self._keys = flat_keys(observation_space)
        self.state_keys: tuple[str, ...] = tuple(policy.state_specs)
        """The state's entries, in the order of the inputs and outputs after the observation."""
        self.state_shapes: tuple[tuple[int, ...], ...] = tuple(
            policy.state_specs[key].shape for key in self.state_keys
        )
        """Each state entry's per-row shape."""
        self.policy = copy.deepcopy(policy)
        # Evaluation mode throughout, as the exporters expect.
        self.train(mode=False)

    def initial_state(self, batch: int) -> tuple[Tensor, ...]:
        """Zeros for every state entry, ``[batch, *shape]`` each (an episode's start)."""
        initial = self.policy.initial_state(batch, device=torch.device("cpu"))
        return tuple(initial[key] for key in self.state_keys)

    # Traced by torch.jit.trace and torch.export: no runtime checks inside.
    @_validation.no_type_check
    def forward(self, obs: Tensor, *state: Tensor) -> tuple[Tensor, ...]:
        """The deterministic action and the next state for each row."""
        batch = obs.shape[0]
        leaves = split_flat(obs, self._keys)
        current = TensorDict(dict(zip(self.state_keys, state, strict=True)), batch_size=[batch])
        outputs = self.policy.act_step(
            TensorDict(leaves, batch_size=[batch]), current, deterministic=True
        )
        return (outputs["action"], *(outputs["state", key] for key in self.state_keys))


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ExportResult:
    """What :func:`export_checkpoint` wrote."""

    path: Path
    """The exported file."""

    format: ExportFormat
    """Its format."""

    checkpoint: CheckpointLocation
    """The checkpoint it came from."""

    env_id: str
    """The env whose spaces shaped the model."""

    obs_dim: int
    """Width of the input ``[batch, obs_dim]``."""

    action_shape: tuple[int, ...]
    """Shape of one action (``()`` for a discrete action)."""

    discrete: bool
    """Whether the output is an action index."""


def export_policy(
    model: DeterministicPolicy, path: StrPath, *, export_format: ExportFormat = "onnx"
) -> Path:
    """Write ``model`` to ``path`` as ONNX or TorchScript.

    Args:
        model: The module to export.
        path: The file to write, in a folder that exists.
        export_format: ``"onnx"`` (input ``"obs"`` ``[batch, obs_dim]`` float32,
            output ``"action"``, dynamic batch) or ``"torchscript"`` (load it with
            :func:`torch.jit.load`).

    Returns:
        The written file.

    Raises:
        MissingDependencyError: ONNX export without ``onnx`` and ``onnxscript``.
        ConfigError: The folder of ``path`` does not exist, or the exporter cannot
            trace the model (a policy of your own whose ``act`` branches on tensor
            values, say).
    """
    return _write(
        model,
        (torch.zeros(2, model.obs_dim),),
        Path(path),
        export_format,
        input_names=["obs"],
        output_names=["action"],
        dynamic_shapes={"obs": {0: torch.export.Dim("batch")}},
        # A policy of the user's may hold what the exporters cannot trace: one line, not pages.
        refusal=(
            "its act(obs, deterministic=True) must be traceable tensor code (no Python "
            "branches on tensor values; torch.distributions with validate_args=False), or "
            "try the other format"
        ),
        what="policy",
    )


def export_recurrent_policy(
    model: RecurrentDeterministicPolicy,
    path: StrPath,
    *,
    export_format: ExportFormat = "onnx",
) -> Path:
    """Write ``model`` to ``path`` as ONNX or TorchScript, the state as inputs and outputs.

    ONNX inputs are ``"obs"`` and each state key; outputs ``"action"`` and
    ``"next_<key>"`` for each state key; the batch axis is dynamic.

    Raises:
        MissingDependencyError: ONNX export without ``onnx`` and ``onnxscript``.
        ConfigError: The folder of ``path`` does not exist, or the exporter cannot
            trace the policy (one line).
    """
    batch = torch.export.Dim("batch")
    return _write(
        model,
        (torch.zeros(2, model.obs_dim), *model.initial_state(2)),
        Path(path),
        export_format,
        input_names=["obs", *model.state_keys],
        output_names=["action", *(f"next_{key}" for key in model.state_keys)],
        # forward(obs, *state): the state entries are one (varargs) input.
        dynamic_shapes=({0: batch}, tuple({0: batch} for _ in model.state_keys)),
        refusal="its act_step must be traceable tensor code",
        what="recurrent policy",
        # torch.export warns about its own internals on nn.GRU / nn.LSTM (the cells'
        # flat weight list, non-leaf .grad reads); the tests check the file.
        quiet_user_warnings=True,
    )


def _write(
    model: nn.Module,
    example: tuple[Tensor, ...],
    target: Path,
    export_format: ExportFormat,
    *,
    input_names: list[str],
    output_names: list[str],
    dynamic_shapes: dict[str, Any] | tuple[Any, ...],
    refusal: str,
    what: str,
    quiet_user_warnings: bool = False,
) -> Path:
    """Trace ``model`` on ``example`` and write it to ``target``; an exporter's error is one line.

    Raises:
        MissingDependencyError: ONNX export without ``onnx`` and ``onnxscript``.
        ConfigError: ``target``'s folder does not exist, or the exporter cannot trace
            the model (``refusal`` says what the model must be).

    ``quiet_user_warnings`` hides the exporters' ``UserWarning``s, which only the
    recurrent export asks for; a flat policy's warnings reach the user.
    """
    if export_format == "onnx":
        missing = [name for name in _ONNX_MODULES if importlib.util.find_spec(name) is None]
        if missing:
            raise MissingDependencyError(
                f"ONNX export needs {' and '.join(missing)}: pip install 'typedrl[onnx]'"
            )
    _check_folder(target)
    # The ONNX exporter logs a warning for each torchvision operator it cannot register.
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            # PyTorch deprecates TorchScript and its exporters warn about their own
            # internals; the file they write is what matters, and the tests check it.
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            if quiet_user_warnings:
                warnings.simplefilter("ignore", UserWarning)
            # A policy exported through act builds a TensorDict, whose shape checks read
            # the traced batch size; they decide nothing the trace records.
            warnings.filterwarnings(
                "ignore", message="Converting a tensor to a Python", module=r"tensordict\."
            )
            if export_format == "onnx":
                torch.onnx.export(
                    model,
                    example,
                    str(target),
                    dynamo=True,
                    # One self-contained file: the weights inside it, no policy.onnx.data beside.
                    external_data=False,
                    input_names=input_names,
                    output_names=output_names,
                    dynamic_shapes=dynamic_shapes,
                    verbose=False,
                )
            else:
                traced = torch.jit.trace(model, example)  # type: ignore[no-untyped-call]
                torch.jit.save(traced, str(target))
    except (RuntimeError, TypeError, ValueError) as error:
        lines = str(error).strip().splitlines()
        raise ConfigError(
            f"the {what} does not export as {export_format} ({type(error).__name__}: "
            f"{lines[0] if lines else ''}); {refusal}"
        ) from error
    finally:
        registration.setLevel(level)
    return target


def _check_folder(target: Path) -> None:
    """Refuse to write into a folder that does not exist (a typo is not a folder to create).

    Raises:
        ConfigError: ``target``'s folder is missing or is not a folder.
    """
    folder = target.parent
    if not folder.is_dir():
        raise ConfigError(
            f"cannot write {target}: the folder {folder} does not exist; create it first "
            f"(mkdir -p {folder}) or name a file in an existing folder"
        )


def export_checkpoint(
    checkpoint: StrPath,
    *,
    output: StrPath | None = None,
    export_format: ExportFormat = "onnx",
    env_id: str | None = None,
) -> ExportResult:
    """Export the deterministic policy of a checkpoint or run folder.

    The policy is rebuilt with :func:`~typedrl.restore.restore_policy` on the
    spaces of the env the checkpoint was trained on (see
    :func:`~typedrl.restore.trained_env`; or of ``env_id``), wrapped in
    :class:`DeterministicPolicy` and written with :func:`export_policy`.

    Args:
        checkpoint: A checkpoint file, or a run folder (its ``best.ckpt``, else
            ``last.ckpt``; see :func:`~typedrl.restore.locate_checkpoint`).
        output: The file to write; default the checkpoint's path with the
            format's suffix (``.onnx`` or ``.pt``) beside it, or
            ``<run_dir>/policy.onnx`` for a run folder.
        export_format: ``"onnx"`` or ``"torchscript"``.
        env_id: The env whose spaces to use; default the checkpoint's.

    Returns:
        Where the file went and what it takes and returns.

    Raises:
        CheckpointError: No checkpoint at ``checkpoint``, or an unreadable one.
        ConfigError: A checkpoint that records no env and no ``env_id``, or an
            ``output`` in a folder that does not exist.
        MissingDependencyError: ONNX export without ``onnx`` and ``onnxscript``.
    """
    location = locate_checkpoint(checkpoint)
    saved = load_checkpoint(location.path)
    if env_id is None and saved.env_id is None:
        raise ConfigError(
            f"{location.path} does not record the env it was trained on; name it "
            "(typedrl export CHECKPOINT --env ENV_ID)"
        )
    spec = trained_env(saved, location, env_id=env_id)
    suffix = _SUFFIXES[export_format]
    target = (
        Path(output)
        if output is not None
        else (
            location.run_dir / f"policy{suffix}"
            if location.choice != "file" and location.run_dir is not None
            else location.path.with_suffix(suffix)
        )
    )
    _check_folder(target)
    env = spec.make(num_envs=1, seed=None)
    try:
        policy = restore_policy(saved, env, path=location.path)
        space = env.single_observation_space
    finally:
        env.close()
    if isinstance(policy, StatefulActorCritic):
        # The rollout state as inputs and outputs, after the observation.
        recurrent = RecurrentDeterministicPolicy(policy, space)
        export_recurrent_policy(recurrent, target, export_format=export_format)
        action, *_ = recurrent(torch.zeros(1, recurrent.obs_dim), *recurrent.initial_state(1))
        return ExportResult(
            path=target,
            format=export_format,
            checkpoint=location,
            env_id=spec.env_id,
            obs_dim=recurrent.obs_dim,
            action_shape=tuple(action.shape[1:]),
            discrete=not action.is_floating_point(),
        )
    model = DeterministicPolicy(policy, space)
    export_policy(model, target, export_format=export_format)
    return ExportResult(
        path=target,
        format=export_format,
        checkpoint=location,
        env_id=spec.env_id,
        obs_dim=model.obs_dim,
        action_shape=model.action_shape,
        discrete=model.discrete,
    )
