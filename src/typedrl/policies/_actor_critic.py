"""MLP actor-critic for PPO: Gaussian heads for Box actions, categorical for Discrete."""

from collections.abc import Sequence
from typing import Any, cast, final

import gymnasium as gym
import torch
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl.distributed import Distributed
from typedrl.errors import SpecError
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
from typedrl.policies._flat_actor import FlatActor
from typedrl.policies._mlp import Activation, build_mlp
from typedrl.types import BatchAction, BatchScalar, EnvScalar, Obs

__all__ = ["MLPActorCritic"]


@final
class MLPActorCritic(nn.Module):
    """Separate MLP actor and critic over encoded observation features.

    The actor reads the observation keys ``actor_keys`` (flattened and
    concatenated in order), the critic ``critic_keys`` (asymmetric actor-critic:
    give the critic privileged keys such as Isaac Lab's ``"critic"`` group).
    The action head is chosen from the action space: a diagonal Gaussian for
    ``Box`` (state-independent log-std, learnable or fixed) and a categorical
    for ``Discrete``. Gaussian samples are not squashed; clip them in the env
    adapter (``clip_actions``) if the env needs bounded actions.

    With ``encoder`` other than ``"flatten"``, every image key
    (:func:`~typedrl.policies.image_layout`: a ``uint8`` ``Box`` of shape
    HxWxC or CxHxW) is read by a convolutional
    :class:`~typedrl.policies.ImageEncoder` that scales its bytes by 1/255
    (images are never normalised with running statistics); the other keys are
    encoded as before, and the MLPs read the concatenation
    (:class:`~typedrl.policies.ObservationEncoder`). The actor and the critic
    share each image's encoder, as CleanRL's and Mnih et al.'s Atari agents
    do: the convolutions are most of the compute, and the value loss shapes
    the features the policy reads from the first update on; the MLPs after
    it stay separate.

    Implements :class:`~typedrl.protocols.ActorCritic` with its optional
    capabilities :class:`~typedrl.protocols.TensorActorCritic`,
    :class:`~typedrl.protocols.SupportsNormalizerUpdate` and
    :class:`~typedrl.protocols.SupportsDeterministicActor`.

    Args:
        observation_space: The env's single observation space (a ``Box``,
            ``Discrete``, ``MultiDiscrete`` or ``MultiBinary`` stored under
            ``"obs"``, or a ``Dict`` of those). Indices reach the networks as
            one-hot codes (:class:`~typedrl.policies.DiscreteOneHot`).
        action_space: The env's single action space (``Box`` or ``Discrete``).
        encoder: How image keys are encoded (:data:`~typedrl.policies.ImageEncoderKind`).
            The default ``"flatten"`` reads them as plain features, as releases
            before image encoders did, so that the policies their runs recorded
            rebuild unchanged; PPO's default policy passes ``"auto"``
            (:attr:`PPOConfig.encoder <typedrl.ppo.PPOConfig.encoder>`).
        image_features: Output width of each image encoder; ``None``: 512 for
            the Nature CNN, 128 for the small one.
        actor_hidden: Hidden layer widths of the actor.
        critic_hidden: Hidden layer widths of the critic.
        activation: Hidden activation.
        actor_keys: Observation keys the actor reads; default ``"obs"``, else
            ``"policy"``, else every key.
        critic_keys: Observation keys the critic reads; default ``"critic"`` if
            present, else the actor's keys.
        log_std_init: Initial log standard deviation of the Gaussian head.
        learn_std: Whether the log standard deviation is a learnable parameter.
        normalize_observations: Normalise every ``Box`` observation key the
            networks read with running statistics (:class:`~typedrl.normalization.RunningMeanStd`,
            one per key) held inside the model, so that checkpoints, evaluation
            and export see exactly what training saw. The statistics change only
            through :meth:`update_normalizers`, never in a forward pass.
        observation_clip: Clamp normalised observations to ``[-clip, clip]``.
        orthogonal_init: Orthogonal weights and zero biases (gain ``sqrt(2)``
            for hidden layers, 0.01 for the actor's output, 1 for the
            critic's); ``False`` keeps PyTorch's default initialisation of
            every layer (Stable-Baselines3's ``ortho_init=False``).

    Example:
        >>> import gymnasium as gym, torch
        >>> from tensordict import TensorDict
        >>> model = MLPActorCritic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2))
        >>> out = model.act(TensorDict({"obs": torch.zeros(3, 4)}, batch_size=[3]))
        >>> sorted(out.keys()), out["action"].dtype
        (['action', 'entropy', 'log_prob', 'value'], torch.int64)
    """

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        *,
        encoder: ImageEncoderKind = "flatten",
        image_features: int | None = None,
        actor_hidden: Sequence[int] = (64, 64),
        critic_hidden: Sequence[int] = (64, 64),
        activation: Activation = "tanh",
        actor_keys: Sequence[str] | None = None,
        critic_keys: Sequence[str] | None = None,
        log_std_init: float = 0.0,
        learn_std: bool = True,
        normalize_observations: bool = False,
        observation_clip: float | None = 10.0,
        orthogonal_init: bool = True,
    ) -> None:
        super().__init__()
        where = "MLPActorCritic"
        self.actor_keys = tuple(actor_keys or default_keys(observation_space, ("obs", "policy")))
        has_critic_group = (
            isinstance(observation_space, gym.spaces.Dict) and "critic" in observation_space.spaces
        )
        self.critic_keys = tuple(
            critic_keys or (("critic",) if has_critic_group else self.actor_keys)
        )
        # Images reach the networks through one CNN per key, shared by actor and critic;
        # index observations (Discrete, MultiDiscrete) as one-hot codes.
        images = build_image_encoders(
            observation_space,
            self.actor_keys + self.critic_keys,
            encoder,
            image_features,
            where,
        )
        self.actor_encoding = ObservationEncoder(observation_space, self.actor_keys, images, where)
        self.critic_encoding = ObservationEncoder(
            observation_space, self.critic_keys, images, where
        )
        actor_in = self.actor_encoding.width
        critic_in = self.critic_encoding.width
        spaces = key_spaces(observation_space)
        head = action_head(action_space, where)
        self.action_shape: tuple[int, ...] = head.shape
        self.action_start = head.start
        self.discrete = head.discrete
        num_outputs = head.num_outputs
        self.obs_normalizers: nn.ModuleDict | None = None
        if normalize_observations:
            # Box keys only: an index or a 0/1 entry is a code, not a measurement; an
            # image is scaled by its encoder.
            self.obs_normalizers = nn.ModuleDict(
                {
                    key: RunningMeanStd(tuple(spaces[key].shape or ()), clip=observation_clip)
                    for key in dict.fromkeys(self.actor_keys + self.critic_keys)
                    if isinstance(spaces[key], gym.spaces.Box) and key not in images
                }
            )
        self.actor = build_mlp(
            actor_in,
            actor_hidden,
            num_outputs,
            activation=activation,
            output_gain=0.01,
            orthogonal_init=orthogonal_init,
        )
        self.critic = build_mlp(
            critic_in, critic_hidden, 1, activation=activation, orthogonal_init=orthogonal_init
        )
        log_std = torch.full((num_outputs,), float(log_std_init))
        self.log_std: Tensor
        if self.discrete:
            self.register_buffer("log_std", torch.zeros(0))
        elif learn_std:
            self.log_std = nn.Parameter(log_std)
        else:
            self.register_buffer("log_std", log_std)

    def _features(self, obs: Obs, keys: tuple[str, ...]) -> Tensor:
        batch = obs.batch_size[0]
        missing = [key for key in keys if key not in obs.keys()]  # noqa: SIM118 - TensorDict
        if missing:
            raise SpecError(
                f"MLPActorCritic: observation lacks keys {missing}; it has {sorted(obs.keys())}"
            )
        # Observations of any dtype (float64 envs, integer images, indices) meet the
        # networks' dtype.
        parts = [self._normalized(key, obs[key]).reshape(batch, -1).to(self._dtype) for key in keys]
        features = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        encoding = self.actor_encoding if keys == self.actor_keys else self.critic_encoding
        encoded: Tensor = encoding(features)
        return encoded

    @property
    def _dtype(self) -> torch.dtype:
        first: Tensor = next(iter(self.critic.parameters()))
        return first.dtype

    def _normalized(self, key: str, value: Tensor) -> Tensor:
        if self.obs_normalizers is None or key not in self.obs_normalizers:
            return value
        # __init__ puts a RunningMeanStd under every key.
        normalizer = cast("RunningMeanStd", self.obs_normalizers[key])
        return normalizer.normalize(value.float())

    def update_normalizers(
        self, obs: Obs, *, dist: Distributed, mask: Tensor | None = None
    ) -> None:
        """Merge a batch of observations into the running statistics (all ranks must call it).

        Args:
            obs: Observations with ``batch_size == [batch]`` (for example a
                flattened epoch).
            dist: The ranks whose statistics are pooled (identical afterwards).
            mask: ``torch.bool`` ``[batch]``; ``False`` rows (ghost transitions)
                are left out.
        """
        if self.obs_normalizers is None:
            return
        for key, normalizer in self.obs_normalizers.items():
            cast("RunningMeanStd", normalizer).update(obs[key].float(), dist=dist, mask=mask)

    def _head(self, actor_features: Tensor) -> DiagonalGaussian | Categorical:
        out: Tensor = self.actor(actor_features)
        if self.discrete:
            return Categorical(out)
        return DiagonalGaussian(out, self.log_std)

    def _distribution_and_value(self, obs: Obs) -> tuple[DiagonalGaussian | Categorical, Tensor]:
        """The policy and ``V(obs)``, reading and normalising shared keys once."""
        actor_features = self._features(obs, self.actor_keys)
        critic_features = (
            actor_features
            if self.critic_keys == self.actor_keys
            else self._features(obs, self.critic_keys)
        )
        value: Tensor = self.critic(critic_features).squeeze(-1)
        return self._head(actor_features), value

    def _to_env_shape(self, flat: Tensor) -> Tensor:
        if self.discrete:
            return flat + self.action_start if self.action_start else flat
        return flat.reshape(flat.shape[0], *self.action_shape)

    def act(self, obs: Obs, *, deterministic: bool = False) -> Obs:
        """Sample (or take the mode of) the policy; also return log-prob, value, entropy."""
        dist, value = self._distribution_and_value(obs)
        flat = dist.mode() if deterministic else dist.sample()
        return TensorDict(
            {
                "action": self._to_env_shape(flat),
                "log_prob": dist.log_prob(flat),
                "value": value,
                "entropy": dist.entropy(),
            },
            batch_size=obs.batch_size,
            device=obs.device,
        )

    def act_tensors(
        self, obs: Obs, *, deterministic: bool = False
    ) -> tuple[BatchAction, BatchScalar, BatchScalar]:
        """:meth:`act` as an ``(action, log_prob, value)`` tuple, for collection loops.

        Skips the entropy and the TensorDict, which cost more than the
        arithmetic for the few rows of a small vector env.
        """
        dist, value = self._distribution_and_value(obs)
        flat = dist.mode() if deterministic else dist.sample()
        return self._to_env_shape(flat), dist.log_prob(flat), value

    def evaluate(self, obs: Obs, action: BatchAction) -> Obs:
        """Log-probability, entropy and value of given actions, with gradients."""
        log_prob, entropy, value = self.evaluate_tensors(obs, action)
        return TensorDict(
            {"log_prob": log_prob, "entropy": entropy, "value": value},
            batch_size=obs.batch_size,
            device=obs.device,
        )

    def evaluate_tensors(
        self, obs: Obs, action: BatchAction
    ) -> tuple[BatchScalar, BatchScalar, BatchScalar]:
        """:meth:`evaluate` as a ``(log_prob, entropy, value)`` tuple, for hot loops.

        Skips building a TensorDict, which costs more than the arithmetic for
        the small minibatches PPO often uses.
        """
        dist, value = self._distribution_and_value(obs)
        if self.discrete:
            flat = action - self.action_start if self.action_start else action
        else:
            flat = action.reshape(action.shape[0], -1)
        return dist.log_prob(flat), dist.entropy(), value

    def value(self, obs: Obs) -> EnvScalar:
        """State value ``V(obs)`` from the critic, ``[batch]``."""
        values: Tensor = self.critic(self._features(obs, self.critic_keys)).squeeze(-1)
        return values

    def deterministic_actor(self, observation_space: gym.Space[Any]) -> FlatActor:
        """The actor's deterministic action from flat ``actor_keys`` features (export).

        The observation normalisers of the actor's keys and its image encoders
        (with their scaling) are baked in; the critic is left out, so its
        privileged keys are not inputs.
        """
        return FlatActor(
            observation_space=observation_space,
            keys=self.actor_keys,
            net=self.actor,
            action_shape=self.action_shape,
            normalizers=self.obs_normalizers,
            discrete=self.discrete,
            action_start=self.action_start,
            encoding=self.actor_encoding,
        )
