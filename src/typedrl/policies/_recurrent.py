"""Recurrent actor-critic for PPO: an MLP front, a GRU or LSTM core, Gaussian/categorical heads."""

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, cast, final

import gymnasium as gym
import torch
from jaxtyping import Bool, Float, Shaped
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl.distributed import Distributed
from typedrl.errors import ConfigError, SpecError
from typedrl.normalization import RunningMeanStd
from typedrl.policies._distributions import Categorical, DiagonalGaussian
from typedrl.policies._encoders import (
    ImageEncoderKind,
    ObservationEncoder,
    action_head,
    build_image_encoders,
    default_keys,
    key_spaces,
)
from typedrl.policies._mlp import Activation, build_mlp
from typedrl.protocols import StateSpec
from typedrl.types import BatchAction, EnvScalar, Obs

__all__ = ["RecurrentActorCritic", "RecurrentCore"]

RecurrentCore = Literal["gru", "lstm"]
"""The recurrent cell of :class:`RecurrentActorCritic`."""


@final
class RecurrentActorCritic(nn.Module):
    """An actor-critic with a GRU or LSTM core, for partially observed envs.

    The observation keys ``obs_keys`` (image keys through a CNN each, as in
    :class:`~typedrl.policies.MLPActorCritic`; the others flattened and
    concatenated, index observations one-hot, ``Box`` keys optionally
    normalised) go through an MLP front (``encoder_hidden``; none when empty), then a one-step
    recurrent core (``core="gru"`` or ``"lstm"``, ``num_layers`` layers of
    ``hidden_size``) whose output feeds the actor head (a diagonal Gaussian
    for ``Box`` actions, a categorical for ``Discrete``; an MLP of
    ``actor_hidden``) and the critic head (an MLP of ``critic_hidden``).

    Implements :class:`~typedrl.protocols.StatefulActorCritic`: the rollout
    state is ``{"h": [num_layers, hidden_size]}`` per row for a GRU and
    ``{"h", "c"}`` for an LSTM, zeros at the start of an episode. It also
    implements :class:`~typedrl.protocols.SupportsNormalizerUpdate`.

    Args:
        observation_space: The env's single observation space.
        action_space: The env's single action space (``Box`` or ``Discrete``).
        core: ``"gru"`` or ``"lstm"``.
        encoder: How image keys are encoded (:data:`~typedrl.policies.ImageEncoderKind`):
            ``"auto"`` gives images of sides 36 or more the Nature CNN and smaller
            ones a CNN of 2x2 convolutions; ``"flatten"`` reads their bytes as
            plain features. Other keys are not affected.
        image_features: Width of each image encoder's output (``None``: 512 for
            the Nature CNN, 128 for the small one).
        hidden_size: Width of the recurrent state.
        num_layers: Stacked recurrent layers.
        encoder_hidden: Hidden widths of the MLP before the core; ``()`` feeds the
            observation features to the core directly.
        actor_hidden: Hidden widths of the actor head after the core.
        critic_hidden: Hidden widths of the critic head after the core.
        activation: Activation of the MLPs.
        obs_keys: Observation keys read; default ``"obs"``, else ``"policy"``, else every key.
        log_std_init: Initial log standard deviation of the Gaussian head.
        normalize_observations: Normalise ``Box`` keys with running statistics
            held inside the model (updated only by :meth:`update_normalizers`).
        observation_clip: Clamp normalised observations to ``[-clip, clip]``.
        orthogonal_init: Orthogonal initialisation of the MLPs (as
            :class:`~typedrl.policies.MLPActorCritic`); the core keeps PyTorch's.

    Example:
        >>> import gymnasium as gym, torch
        >>> from tensordict import TensorDict
        >>> model = RecurrentActorCritic(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2),
        ...                              hidden_size=8)
        >>> obs = TensorDict({"obs": torch.zeros(3, 2)}, batch_size=[3])
        >>> out = model.act_step(obs, model.initial_state(3, device=torch.device("cpu")))
        >>> sorted(out.keys()), out["state", "h"].shape
        (['action', 'entropy', 'log_prob', 'state', 'value'], torch.Size([3, 1, 8]))
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        core: RecurrentCore = "gru",
        encoder: ImageEncoderKind = "auto",
        image_features: int | None = None,
        hidden_size: int = 64,
        num_layers: int = 1,
        encoder_hidden: Sequence[int] = (),
        actor_hidden: Sequence[int] = (64,),
        critic_hidden: Sequence[int] = (64,),
        activation: Activation = "tanh",
        obs_keys: Sequence[str] | None = None,
        log_std_init: float = 0.0,
        normalize_observations: bool = False,
        observation_clip: float | None = 10.0,
        orthogonal_init: bool = True,
    ) -> None:
        super().__init__()
        where = "RecurrentActorCritic"
        if core not in ("gru", "lstm"):
            raise ConfigError(f"{where}: core must be 'gru' or 'lstm', got {core!r}")
        if hidden_size <= 0 or num_layers <= 0:
            raise ConfigError(
                f"{where}: hidden_size and num_layers must be positive, got {hidden_size} and "
                f"{num_layers}"
            )
        self.obs_keys = tuple(obs_keys or default_keys(observation_space, ("obs", "policy")))
        images = build_image_encoders(
            observation_space, self.obs_keys, encoder, image_features, where
        )
        self.encoding = ObservationEncoder(observation_space, self.obs_keys, images, where)
        spaces = key_spaces(observation_space)
        head = action_head(action_space, where)
        self.action_shape: tuple[int, ...] = head.shape
        self.action_start = head.start
        self.discrete = head.discrete
        num_outputs = head.num_outputs
        self.obs_normalizers: nn.ModuleDict | None = None
        if normalize_observations:
            self.obs_normalizers = nn.ModuleDict(
                {
                    key: RunningMeanStd(tuple(spaces[key].shape or ()), clip=observation_clip)
                    for key in self.obs_keys
                    if isinstance(spaces[key], gym.spaces.Box) and key not in images
                }
            )
        core_in = self.encoding.width
        self.encoder: nn.Module = nn.Identity()
        if encoder_hidden:
            # An MLP whose last layer is activated too: build_mlp's output layer, then tanh.
            *front, last = encoder_hidden
            self.encoder = nn.Sequential(
                build_mlp(
                    core_in, front, last, activation=activation, orthogonal_init=orthogonal_init
                ),
                nn.Tanh(),
            )
            core_in = last
        self.core_kind: RecurrentCore = core
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.core: nn.GRU | nn.LSTM = (nn.GRU if core == "gru" else nn.LSTM)(
            core_in, hidden_size, num_layers=num_layers
        )
        self.actor = build_mlp(
            hidden_size,
            actor_hidden,
            num_outputs,
            activation=activation,
            output_gain=0.01,
            orthogonal_init=orthogonal_init,
        )
        self.critic = build_mlp(
            hidden_size, critic_hidden, 1, activation=activation, orthogonal_init=orthogonal_init
        )
        self.log_std: Tensor
        if self.discrete:
            self.register_buffer("log_std", torch.zeros(0))
        else:
            self.log_std = nn.Parameter(torch.full((num_outputs,), float(log_std_init)))
        keys = ("h",) if core == "gru" else ("h", "c")
        self._state_specs = {
            key: StateSpec((num_layers, hidden_size), torch.float32) for key in keys
        }

    # ------------------------------------------------------------------ the state

    @property
    def state_specs(self) -> Mapping[str, StateSpec]:
        """``{"h"}`` (GRU) or ``{"h", "c"}`` (LSTM), each ``[num_layers, hidden_size]``."""
        return MappingProxyType(self._state_specs)

    def initial_state(self, num_rows: int, *, device: torch.device) -> TensorDict:
        """Zeros for every state key, ``batch_size == [num_rows]``."""
        return TensorDict(
            {
                key: torch.zeros((num_rows, *spec.shape), dtype=spec.dtype, device=device)
                for key, spec in self._state_specs.items()
            },
            batch_size=[num_rows],
            device=device,
        )

    # ------------------------------------------------------------------ features

    def _features(self, obs: Obs) -> Tensor:
        """``[batch, core_in]`` inputs of the core from a ``[batch]`` observation."""
        batch = obs.batch_size[0]
        missing = [key for key in self.obs_keys if key not in obs.keys()]  # noqa: SIM118
        if missing:
            raise SpecError(
                f"RecurrentActorCritic: observation lacks keys {missing}; it has "
                f"{sorted(obs.keys())}"
            )
        dtype = next(iter(self.critic.parameters())).dtype
        parts = [
            self._normalized(key, obs[key]).reshape(batch, -1).to(dtype) for key in self.obs_keys
        ]
        flat = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        encoded: Tensor = self.encoder(self.encoding(flat))
        return encoded

    def _normalized(self, key: str, value: Tensor) -> Tensor:
        if self.obs_normalizers is None or key not in self.obs_normalizers:
            return value
        normalizer = cast("RunningMeanStd", self.obs_normalizers[key])
        # (x - mean) * rsqrt(var + epsilon), clamped, as RunningMeanStd.normalize computes it;
        # written out from the statistics so that it traces for export.
        mean = normalizer.mean.to(torch.float64)
        scale = torch.rsqrt(normalizer.var.to(torch.float64) + normalizer.epsilon)
        out = (value.to(torch.float64) - mean) * scale
        if normalizer.clip is not None:
            out = out.clamp(-normalizer.clip, normalizer.clip)
        return out.float()

    def update_normalizers(
        self, obs: Obs, *, dist: Distributed, mask: Tensor | None = None
    ) -> None:
        """Merge a batch of observations into the running statistics (all ranks must call it)."""
        if self.obs_normalizers is None:
            return
        for key, normalizer in self.obs_normalizers.items():
            cast("RunningMeanStd", normalizer).update(obs[key].float(), dist=dist, mask=mask)

    # ------------------------------------------------------------------ the core

    def _core_state(self, state: TensorDict) -> Tensor | tuple[Tensor, Tensor]:
        """The state as ``nn.GRU``/``nn.LSTM`` read it: ``[num_layers, batch, hidden]``."""
        h: Tensor = state["h"].transpose(0, 1).contiguous()
        if self.core_kind == "gru":
            return h
        c: Tensor = state["c"].transpose(0, 1).contiguous()
        return h, c

    def _state_of(
        self, core_state: Tensor | tuple[Tensor, Tensor], batch_size: torch.Size
    ) -> TensorDict:
        """The core's state as a TensorDict, ``[batch, num_layers, hidden]`` per key."""
        if isinstance(core_state, tuple):
            leaves = {"h": core_state[0].transpose(0, 1), "c": core_state[1].transpose(0, 1)}
        else:
            leaves = {"h": core_state.transpose(0, 1)}
        return TensorDict(leaves, batch_size=batch_size, device=leaves["h"].device)

    def _run(
        self,
        x: Float[Tensor, "time batch features"],
        core_state: Tensor | tuple[Tensor, Tensor],
        done: Bool[Tensor, "time batch"] | None,
    ) -> tuple[Float[Tensor, "time batch hidden"], Tensor | tuple[Tensor, Tensor]]:
        """Run the core over ``x`` from ``core_state``, zeroing the state of rows after a done.

        The sequence is cut after every step at which some row is done (one
        host read of the done flags), and each piece runs as one call of the
        core; between pieces the done rows' state is reset to zeros.
        """
        if done is None:
            whole: tuple[Tensor, Tensor | tuple[Tensor, Tensor]] = self.core(x, core_state)
            return whole
        any_done = done.any(dim=1).tolist()
        cuts = [t + 1 for t, flag in enumerate(any_done) if flag]
        if not cuts or cuts[-1] != len(any_done):
            cuts.append(len(any_done))
        outputs: list[Tensor] = []
        start = 0
        for stop in cuts:
            out, core_state = self.core(x[start:stop], core_state)
            outputs.append(out)
            # h <- (1 - done_t) h: the next step starts its episode from the initial state.
            keep = (~done[stop - 1]).to(out.dtype).view(1, -1, 1)
            if isinstance(core_state, tuple):
                core_state = (core_state[0] * keep, core_state[1] * keep)
            else:
                core_state = core_state * keep
            start = stop
        return torch.cat(outputs, dim=0), core_state

    def _head(self, core_out: Tensor) -> DiagonalGaussian | Categorical:
        out: Tensor = self.actor(core_out)
        if self.discrete:
            return Categorical(out)
        return DiagonalGaussian(out, self.log_std)

    def _to_env_shape(self, flat: Tensor) -> Tensor:
        if self.discrete:
            return flat + self.action_start if self.action_start else flat
        return flat.reshape(flat.shape[0], *self.action_shape)

    def _from_env_shape(self, action: Tensor) -> Tensor:
        if self.discrete:
            return action - self.action_start if self.action_start else action
        return action.reshape(action.shape[0], -1)

    # ------------------------------------------------------------------ the protocol

    def act_step(self, obs: Obs, state: TensorDict, *, deterministic: bool = False) -> Obs:
        """One step from ``state``: action, log-prob, value, entropy and the next ``"state"``."""
        out, core_state = self.core(self._features(obs).unsqueeze(0), self._core_state(state))
        hidden = out.squeeze(0)
        dist = self._head(hidden)
        flat = dist.mode() if deterministic else dist.sample()
        return TensorDict(
            {
                "action": self._to_env_shape(flat),
                "log_prob": dist.log_prob(flat),
                "value": self.critic(hidden).squeeze(-1),
                "entropy": dist.entropy(),
                "state": self._state_of(core_state, obs.batch_size),
            },
            batch_size=obs.batch_size,
            device=obs.device,
        )

    def value_step(self, obs: Obs, state: TensorDict) -> EnvScalar:
        """``V(obs)`` from ``state``, ``[batch]``."""
        out, _ = self.core(self._features(obs).unsqueeze(0), self._core_state(state))
        values: Tensor = self.critic(out.squeeze(0)).squeeze(-1)
        return values

    def evaluate_sequence(
        self,
        obs: Obs,
        action: Shaped[Tensor, "time batch *action_shape"],
        state: TensorDict,
        done: Bool[Tensor, "time batch"],
    ) -> tuple[
        Float[Tensor, "time batch"], Float[Tensor, "time batch"], Float[Tensor, "time batch"]
    ]:
        """Log-probability, entropy and value of a rollout, re-run from ``state`` (with gradients).

        ``obs`` and ``action`` are time-major, ``[num_steps, batch]``; rows
        whose ``done`` is set restart from zeros after that step.
        """
        steps, batch = obs.batch_size
        features = self._features(obs.reshape(-1)).reshape(steps, batch, -1)
        out, _ = self._run(features, self._core_state(state), done)
        hidden = out.reshape(steps * batch, -1)
        dist = self._head(hidden)
        flat_action = self._from_env_shape(action.reshape(steps * batch, *action.shape[2:]))
        log_prob = dist.log_prob(flat_action).reshape(steps, batch)
        entropy = dist.entropy().reshape(steps, batch)
        value = self.critic(hidden).reshape(steps, batch)
        return log_prob, entropy, value

    def act(self, obs: Obs, *, deterministic: bool = False) -> Obs:
        """:meth:`act_step` from the initial state (each observation as an episode's first)."""
        state = self.initial_state(obs.batch_size[0], device=self._param_device)
        return self.act_step(obs, state, deterministic=deterministic)

    def evaluate(self, obs: Obs, action: BatchAction) -> Obs:
        """Log-probability, entropy and value of ``action`` from the initial state."""
        batch = obs.batch_size[0]
        state = self.initial_state(batch, device=self._param_device)
        log_prob, entropy, value = self.evaluate_sequence(
            obs.unsqueeze(0),
            action.unsqueeze(0),
            state,
            torch.zeros(1, batch, dtype=torch.bool, device=self._param_device),
        )
        return TensorDict(
            {"log_prob": log_prob[0], "entropy": entropy[0], "value": value[0]},
            batch_size=obs.batch_size,
            device=obs.device,
        )

    def value(self, obs: Obs) -> EnvScalar:
        """``V(obs)`` from the initial state."""
        return self.value_step(
            obs, self.initial_state(obs.batch_size[0], device=self._param_device)
        )

    @property
    def _param_device(self) -> torch.device:
        return next(iter(self.critic.parameters())).device
