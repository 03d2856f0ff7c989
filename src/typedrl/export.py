"""Export a trained policy as a plain tensor-in, action-out model (ONNX or TorchScript).

:class:`DeterministicPolicy` turns a trainer's policy (PPO's
:class:`~typedrl.policies.MLPActorCritic`, APG's and SHAC's
:class:`~typedrl.policies.DifferentiableMLPPolicy`) into a module from a flat
observation tensor ``[batch, obs_dim]`` to the action its evaluation plays:
observation normalisation is baked in (the saved running statistics, clamped as
in training), a Gaussian policy returns its mean (squashed into the action
bounds when the policy squashes), a categorical one the index of its most
likely action. :func:`export_policy` writes it to a file;
:func:`export_checkpoint` does both for a checkpoint or run folder.

``obs_dim`` is the concatenation of the observation keys the policy reads, each
flattened, in the policy's key order (a ``Box`` observation stored under
``"obs"`` is simply its flattened array).

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
from typing import Any, Final, Literal, TypeAlias, cast, final

import gymnasium as gym
import torch
from jaxtyping import Float
from torch import Tensor, nn

from typedrl import _validation
from typedrl.checkpoint import StrPath, load_checkpoint
from typedrl.errors import ConfigError, MissingDependencyError
from typedrl.normalization import RunningMeanStd
from typedrl.policies import DifferentiableMLPPolicy, MLPActorCritic
from typedrl.policies._features import flat_size
from typedrl.restore import (
    CheckpointLocation,
    RestoredPolicy,
    locate_checkpoint,
    restore_policy,
    trained_env,
)

__all__ = [
    "EXPORT_FORMATS",
    "DeterministicPolicy",
    "ExportFormat",
    "ExportResult",
    "export_checkpoint",
    "export_policy",
]

ExportFormat: TypeAlias = Literal["onnx", "torchscript"]
"""File formats :func:`export_policy` writes."""

EXPORT_FORMATS: Final[tuple[ExportFormat, ...]] = ("onnx", "torchscript")
"""Every :data:`ExportFormat`."""

_SUFFIXES: Final[dict[ExportFormat, str]] = {"onnx": ".onnx", "torchscript": ".pt"}
_ONNX_MODULES: Final = ("onnx", "onnxscript")


def _normalization_stats(
    normalizers: nn.ModuleDict | None, keys: tuple[str, ...]
) -> tuple[Tensor, Tensor, float | None]:
    """The concatenated float64 mean and ``rsqrt(var + epsilon)`` of ``keys``, and the clip."""
    if normalizers is None:
        empty = torch.zeros(0, dtype=torch.float64)
        return empty, empty.clone(), None
    means: list[Tensor] = []
    scales: list[Tensor] = []
    clips: set[float | None] = set()
    for key in keys:
        # The policies put a RunningMeanStd under every key.
        normalizer = cast("RunningMeanStd", normalizers[key])
        # (x - mean) * rsqrt(var + epsilon), as RunningMeanStd.normalize computes it.
        variance = normalizer.var.detach().to(torch.float64)
        means.append(normalizer.mean.detach().to(torch.float64).reshape(-1))
        scales.append(torch.rsqrt(variance + normalizer.epsilon).reshape(-1))
        clips.add(normalizer.clip)
    if len(clips) > 1:
        raise ConfigError(
            f"DeterministicPolicy: the observation keys are clipped differently: {clips}"
        )
    return torch.cat(means), torch.cat(scales), clips.pop()


@final
class DeterministicPolicy(nn.Module):
    """The deterministic action of a trained policy, from a flat observation tensor.

    The module holds copies of the policy's networks and normalisation
    statistics, so later changes to ``policy`` do not reach it. Its forward is
    made of tensor operations only (no TensorDict, no Python branches on
    values), so it traces and exports with a dynamic batch size.

    Args:
        policy: A PPO :class:`~typedrl.policies.MLPActorCritic` or an APG/SHAC
            :class:`~typedrl.policies.DifferentiableMLPPolicy`.
        observation_space: The env's single observation space (gives each
            key's width).

    Raises:
        ConfigError: If an observation key the policy reads is not a ``Box``.
    """

    def __init__(self, policy: RestoredPolicy, observation_space: gym.Space[Any]) -> None:
        super().__init__()
        normalizers: nn.ModuleDict | None
        if isinstance(policy, MLPActorCritic):
            keys = policy.actor_keys
            self.net = copy.deepcopy(policy.actor)
            normalizers = policy.obs_normalizers
            mask = None
            self.discrete = policy.discrete
            self.action_start = policy.action_start
            self.squash = False
        else:
            keys = policy.obs_keys
            self.net = copy.deepcopy(policy.mean_net)
            normalizers = policy.obs_normalizers
            mask = policy.observation_normalize_mask.detach().clone()
            self.discrete = False
            self.action_start = 0
            self.squash = policy.squash
        self.obs_dim = flat_size(observation_space, keys, "DeterministicPolicy")
        self.action_shape = tuple(policy.action_shape)
        self.net_dtype = next(iter(self.net.parameters())).dtype
        self.normalizes = normalizers is not None
        mean, scale, self.clip = _normalization_stats(normalizers, keys)
        self.obs_mean: Tensor
        self.obs_scale: Tensor
        self.register_buffer("obs_mean", mean)
        self.register_buffer("obs_scale", scale)
        # Features whose mask entry is False (sines, one-hot codes) bypass the normaliser.
        self.partial_mask = mask is not None and not bool(mask.all())
        self.normalize_mask: Tensor
        self.register_buffer(
            "normalize_mask",
            mask if mask is not None else torch.ones(self.obs_dim, dtype=torch.bool),
        )
        self.action_low: Tensor
        self.action_high: Tensor
        if isinstance(policy, DifferentiableMLPPolicy):
            self.register_buffer("action_low", policy.action_low.detach().clone())
            self.register_buffer("action_high", policy.action_high.detach().clone())
        else:
            self.register_buffer("action_low", torch.zeros(0))
            self.register_buffer("action_high", torch.zeros(0))
        self.eval()

    # Traced by torch.jit.trace and torch.export: no runtime checks inside.
    @_validation.no_type_check
    def forward(self, obs: Float[Tensor, "batch obs_dim"]) -> Tensor:
        """The action for each row of ``obs``.

        Args:
            obs: Flat observations, ``[batch, obs_dim]``, float32 or float64.

        Returns:
            ``[batch, *action_shape]`` actions in the network's dtype for a
            ``Box`` action space; int64 ``[batch]`` indices (offset by the
            space's ``start``) for ``Discrete``.
        """
        features = obs
        if self.normalizes:
            scaled = (obs.to(torch.float64) - self.obs_mean) * self.obs_scale
            if self.clip is not None:
                scaled = scaled.clamp(-self.clip, self.clip)
            normalized = scaled.to(obs.dtype)
            features = (
                torch.where(self.normalize_mask, normalized, obs)
                if self.partial_mask
                else normalized
            )
        out: Tensor = self.net(features.to(self.net_dtype))
        if self.discrete:
            index = out.argmax(-1)
            return index + self.action_start if self.action_start else index
        if self.squash:
            weight = (torch.tanh(out) + 1.0) * 0.5
            out = torch.lerp(self.action_low.to(out.dtype), self.action_high.to(out.dtype), weight)
        return out.reshape((-1, *self.action_shape))


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
        path: The file to write (its folder is created).
        export_format: ``"onnx"`` (input ``"obs"`` ``[batch, obs_dim]`` float32,
            output ``"action"``, dynamic batch) or ``"torchscript"`` (load it with
            :func:`torch.jit.load`).

    Returns:
        The written file.

    Raises:
        MissingDependencyError: ONNX export without ``onnx`` and ``onnxscript``.
    """
    target = Path(path)
    example = torch.zeros(2, model.obs_dim)
    if export_format == "onnx":
        missing = [name for name in _ONNX_MODULES if importlib.util.find_spec(name) is None]
        if missing:
            raise MissingDependencyError(
                f"ONNX export needs {' and '.join(missing)}: pip install 'typedrl[onnx]'"
            )
    target.parent.mkdir(parents=True, exist_ok=True)
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
            if export_format == "onnx":
                torch.onnx.export(
                    model,
                    (example,),
                    str(target),
                    dynamo=True,
                    # One self-contained file: the weights inside it, no policy.onnx.data beside.
                    external_data=False,
                    input_names=["obs"],
                    output_names=["action"],
                    dynamic_shapes={"obs": {0: torch.export.Dim("batch")}},
                    verbose=False,
                )
            else:
                traced = torch.jit.trace(model, (example,))  # type: ignore[no-untyped-call]
                torch.jit.save(traced, str(target))
    finally:
        registration.setLevel(level)
    return target


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
        ConfigError: A checkpoint that records no env and no ``env_id``.
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
    env = spec.make(num_envs=1, seed=None)
    try:
        policy = restore_policy(saved, env, path=location.path)
        model = DeterministicPolicy(policy, env.single_observation_space)
    finally:
        env.close()
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
