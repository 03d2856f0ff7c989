"""Proximal policy optimisation on Lightning Fabric."""

import math
import time
from pathlib import Path
from typing import Any, final

import gymnasium as gym
import torch
from lightning.fabric import Fabric
from lightning.fabric.loggers.logger import Logger
from lightning.fabric.plugins.precision import DoublePrecision, Precision
from tensordict import TensorDict
from torch import Tensor

from typedrl.advantages import compute_gae
from typedrl.agents._base import BaseAgent
from typedrl.agents._batch_plan import agree_on_batch_plan
from typedrl.agents._compiled_update import CompiledUpdate
from typedrl.agents._config import PPOConfig
from typedrl.agents._episodes import epoch_episodes
from typedrl.agents._fabric import setup_module_and_optimizer
from typedrl.agents._loss import LOSS_STATISTICS, EpochData, ppo_loss
from typedrl.buffers import ExperienceBuffer, minibatch_indices
from typedrl.checkpoint import Checkpoint, load_into
from typedrl.distributed import raise_together
from typedrl.errors import CheckpointError, ConfigError, NonFiniteError
from typedrl.logging import MetricAggregator
from typedrl.normalization import RewardNormalizer
from typedrl.policies import MLPActorCritic
from typedrl.protocols import Policy, SupportsStateDict, VecEnv

__all__ = ["PPOAgent"]

_OBS = "obs"
_STEP_KEYS = ("action", "log_prob", "value")


_MINIBATCH_METRICS = (*LOSS_STATISTICS, "train/grad_norm", "train/skipped_updates")
_METRICS = [
    *_MINIBATCH_METRICS,
    "train/explained_variance",
    "episode/return",
    "episode/length",
]


def _require_single_process_compile(config: PPOConfig, fabric: Fabric, world_size: int) -> None:
    """Refuse ``compile_update`` with DDP or a precision plugin it would bypass."""
    if not config.compile_update:
        return
    if world_size > 1:
        raise ConfigError(
            "PPOConfig.compile_update is single-process only (DDP must see the model's "
            f"forward to synchronise gradients); got {world_size} ranks"
        )
    precision = fabric.strategy.precision
    if type(precision) not in (Precision, DoublePrecision):
        raise ConfigError(
            "PPOConfig.compile_update computes gradients and the Adam update itself and "
            "supports Fabric's 32-true and 64-true precision only; got "
            f"{type(precision).__name__}"
        )


def _masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    # sum(x[mask]) / max(1, count(mask)); torch.where, not a product, so that a
    # non-finite value in a masked (ghost) sample cannot leak into the result.
    total = torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device)).sum()
    return total / mask.sum().to(x.dtype).clamp(min=1.0)


@final
class PPOAgent(BaseAgent):
    """PPO with an MLP actor-critic, on one device or several (Fabric DDP).

    Each epoch collects ``num_steps`` steps from every env row of every rank
    (no gradients; finite checks on observations, policy outputs and rewards,
    reported with the step and key), computes GAE in unnormalised value space
    (termination zeroes the bootstrap; truncation bootstraps from
    ``V(final_obs)``; ghost transitions are masked out everywhere), then runs
    exactly ``ceil(num_envs * num_steps * num_mini_epochs / batch_size)``
    minibatch updates (fewer only when ``target_kl`` stops an epoch early, on
    every rank alike). That count is checked to be identical on every rank at
    start-up, because a mismatch would deadlock DDP's gradient all-reduce.

    Envs that cannot provide terminal observations (``provides_final_obs ==
    False``) are bootstrapped at truncation with ``V(obs_t)``, the value of the
    last observation before the time-out, as rsl_rl does; the agent logs
    ``train/approximate_bootstrap = 1`` so the approximation is never silent.

    Args:
        env: This rank's training env.
        config: The hyper-parameters.
        fabric: A launched Fabric; by default single-process on CPU (or one GPU).
        eval_env: This rank's evaluation env.
        run_dir: Folder for logs and checkpoints (``None``: neither).
        eval_every_steps: Evaluation period in env steps over all ranks.
        eval_episodes: Episodes per evaluation and rank.
        checkpoint_every_epochs: Period of ``epoch_<n>.ckpt`` files.
        loggers: Fabric loggers (default: CSV, plus TensorBoard when installed).
        progress: Show a progress bar on rank 0.

    Example:
        >>> from typedrl.envs import make
        >>> env = make("CartPole-v1", num_envs=4, seed=0)
        >>> config = PPOConfig(total_timesteps=512, num_steps=64, batch_size=64, num_mini_epochs=2)
        >>> agent = PPOAgent(env=env, config=config, progress=False)
        >>> result = agent.fit()
        >>> result["env_steps"], result["epoch"]
        (512, 2)
    """

    resumable_changes = frozenset({"total_timesteps", "compile_update", "extra"})
    """Config fields a resumed run may change: the budget, compilation, user bookkeeping."""

    def __init__(
        self,
        *,
        env: VecEnv,
        config: PPOConfig,
        fabric: Fabric | None = None,
        eval_env: VecEnv | None = None,
        run_dir: str | Path | None = None,
        eval_every_steps: int | None = None,
        eval_episodes: int = 10,
        checkpoint_every_epochs: int | None = None,
        loggers: list[Logger] | None = None,
        progress: bool = True,
    ) -> None:
        if not isinstance(config, PPOConfig):
            raise ConfigError(f"config must be a PPOConfig, got {type(config).__name__}")
        super().__init__(
            env=env,
            fabric=fabric,
            eval_env=eval_env,
            run_dir=run_dir,
            eval_every_steps=eval_every_steps,
            eval_episodes=eval_episodes,
            checkpoint_every_epochs=checkpoint_every_epochs,
            loggers=loggers,
            progress=progress,
        )
        self.config = config
        self.device = self.fabric.device
        device_error = (
            ConfigError(
                f"the env runs on {env.device} but Fabric on {self.device}; "
                "create the env on fabric.device"
            )
            if env.device != self.device
            else None
        )
        # A rank with the wrong device stops every rank, before any other collective.
        raise_together(device_error, "the env device check", self.dist)
        _require_single_process_compile(config, self.fabric, self.dist.world_size)
        # Checked before any other collective: a mismatch would deadlock the update.
        self.num_minibatches = agree_on_batch_plan(
            num_envs=env.num_envs,
            num_steps=config.num_steps,
            num_mini_epochs=config.num_mini_epochs,
            batch_size=config.batch_size,
            dist=self.dist,
        )
        env_rows = torch.tensor([env.num_envs], dtype=torch.int64, device=self.dist.device)
        self.global_num_envs = int(self.dist.all_reduce_sum(env_rows).item())
        self.learning_rate = config.learning_rate
        self.metrics = MetricAggregator(
            [*_METRICS, "train/approximate_bootstrap"], device=self.device
        )
        self._generator = torch.Generator(device="cpu")
        self._generator.manual_seed(config.seed * 7919 + self.dist.rank)
        self._obs: TensorDict | None = None
        self._episode_return = torch.zeros(env.num_envs, dtype=torch.float64, device=self.device)
        self._episode_length = torch.zeros(env.num_envs, dtype=torch.int64, device=self.device)

    # --------------------------------------------------------------- properties

    @property
    def policy(self) -> Policy:
        """The actor-critic, unwrapped from Fabric (its observation normalisers inside it)."""
        return self.model_unwrapped

    @property
    def total_timesteps(self) -> int:
        """``config.total_timesteps``."""
        return self.config.total_timesteps

    # --------------------------------------------------------------- setup

    @staticmethod
    def build_policy(
        config: PPOConfig, observation_space: gym.Space[Any], action_space: gym.Space[Any]
    ) -> MLPActorCritic:
        """The actor-critic that PPO trains with ``config`` (on the CPU, freshly initialised).

        Use it to rebuild a trained policy from a checkpoint's config before
        loading its weights.
        """
        return MLPActorCritic(
            observation_space,
            action_space,
            actor_hidden=config.actor_hidden,
            critic_hidden=config.critic_hidden,
            activation=config.activation,
            log_std_init=config.log_std_init,
            normalize_observations=config.normalize_observations,
            observation_clip=config.observation_clip,
        )

    def _build(self) -> None:
        config, env = self.config, self.env
        torch.manual_seed(config.seed + self.dist.rank)
        model = self.build_policy(config, env.single_observation_space, env.single_action_space).to(
            self.device
        )
        self.reward_normalizer = (
            RewardNormalizer(gamma=config.gamma, clip=config.reward_clip, device=self.device)
            if config.normalize_rewards
            else None
        )
        self.model_unwrapped = model
        # Fused Adam: one kernel per step over all parameters (the default on CPU is a
        # loop over tensors, which dominates the update of small networks).
        optimizer = torch.optim.Adam(
            model.parameters(), lr=config.learning_rate, eps=config.adam_eps, fused=True
        )
        self.model, self.optimizer = setup_module_and_optimizer(
            self.fabric, model, optimizer, forward_methods=("evaluate_tensors",)
        )
        self._parameters = [p for p in model.parameters() if p.requires_grad]
        # DDP must see `evaluate` through its forward to synchronise gradients; a single
        # process has nothing to synchronise and calls the model directly.
        self._evaluate = (
            self.model.evaluate_tensors if self.dist.world_size > 1 else model.evaluate_tensors
        )
        # compile_update runs each minibatch update as one compiled function (loss,
        # gradients, clipping, Adam); checked to be single-process in __init__.
        self._compiled_update = (
            CompiledUpdate(model, optimizer, config) if config.compile_update else None
        )
        self.buffer = ExperienceBuffer(
            num_envs=env.num_envs, num_steps=config.num_steps, device=self.device
        )
        self._registered = False
        self._has_final_value = [False] * config.num_steps

    def _register(self, obs: TensorDict) -> None:
        """Register observation keys and, from one eval-mode no-grad forward, the output keys."""
        buffer = self.buffer
        buffer.register_from(obs, prefix=_OBS)
        model = self.model_unwrapped
        was_training = model.training
        model.eval()
        with torch.no_grad():
            outputs = model.act(obs)
        model.train(was_training)
        buffer.register_from(outputs.select(*_STEP_KEYS))
        for key in ("reward", "final_value"):
            buffer.register_key(key, (), torch.float32)
        for key in ("terminated", "truncated"):
            buffer.register_key(key, (), torch.bool)

    def _start(self) -> None:
        obs, _ = self.env.reset(seed=self.config.seed * 1_000_003 + self.dist.rank * 65_537)
        self._obs = obs
        if not self._registered:
            self._register(obs)
            self._registered = True

    # --------------------------------------------------------------- training

    def _train_epoch(self) -> dict[str, float]:
        started = time.perf_counter()
        self._set_learning_rate()
        self._collect()
        collect_seconds = time.perf_counter() - started
        self._update()
        metrics = self.metrics.reduce(self.dist)
        metrics["train/learning_rate"] = self.learning_rate
        steps = self.config.num_steps * self.global_num_envs
        self.env_steps += steps
        elapsed = time.perf_counter() - started
        metrics["time/sps"] = steps / elapsed
        metrics["time/collect_fraction"] = collect_seconds / elapsed
        if "episode/return" in metrics:
            metrics["episode/return_mean"] = metrics.pop("episode/return")
        if "episode/length" in metrics:
            metrics["episode/length_mean"] = metrics.pop("episode/length")
        return metrics

    def _set_learning_rate(self) -> None:
        config = self.config
        if config.learning_rate_schedule == "linear":
            remaining = max(0.0, 1.0 - self.env_steps / config.total_timesteps)
            self.learning_rate = config.learning_rate * remaining
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate

    @torch.no_grad()
    def _collect(self) -> None:
        config, env, buffer, model = self.config, self.env, self.buffer, self.model_unwrapped
        obs = self._obs
        if obs is None:
            raise ConfigError("PPOAgent: call setup() or fit() before collecting")
        buffer.reset_epoch()
        model.eval()
        approximate = not env.provides_final_obs
        # On the CPU, reading a flag costs no device synchronisation.
        host_reads = self.device.type == "cpu"
        for t in range(config.num_steps):
            action, log_prob, value = model.act_tensors(obs)
            result = env.step(action)
            # V(final_obs) bootstraps truncated rows exactly; when the env returns its
            # next observation as final_obs (no row ended), V(obs_{t+1}) is reused later.
            if approximate:
                # Documented approximation: bootstrap a time-out with V(obs_t).
                final_values: Tensor | None = value
            elif (
                result.final_obs is not None
                and result.final_obs is not result.obs
                # Only truncated rows read V(final_obs): on the CPU, skip steps without one.
                and not (host_reads and not bool(result.truncated.any()))
            ):
                final_values = model.value(result.final_obs)
            else:
                final_values = None
            self._has_final_value[t] = final_values is not None
            reward = result.reward.to(torch.float32)
            buffer.write(t, obs, prefix=_OBS)
            buffer.write(
                t,
                {
                    "action": action,
                    "log_prob": log_prob,
                    "value": value,
                    "reward": reward,
                    "terminated": result.terminated,
                    "truncated": result.truncated,
                    "valid": result.valid,
                    "final_value": (final_values if final_values is not None else value).float(),
                },
            )
            obs = result.obs
        self._obs = obs
        self._last_values = model.value(obs).float()
        stacked = self.buffer.stacked()
        self._check_finite(stacked)
        self._track_episodes(stacked)
        if approximate:
            self.metrics.add("train/approximate_bootstrap", 1.0)

    def _check_finite(self, data: TensorDict) -> None:
        """Raise NonFiniteError, naming the first step, if the epoch holds NaN or infinity.

        Checked once per epoch on the whole buffer (one host synchronisation),
        before advantages are computed, so nothing is updated from bad data.
        """
        steps = self.config.num_steps
        valid: Tensor = data["valid"]

        def step_ok(value: Tensor) -> Tensor:
            # Ghost samples never train anything, so whatever they hold is not checked.
            mask = valid.reshape(*valid.shape, *([1] * (value.ndim - valid.ndim)))
            finite = torch.isfinite(value) | ~mask
            return finite.reshape(steps, -1).all(dim=1)

        obs_ok = torch.ones(steps, dtype=torch.bool, device=self.device)
        for leaf in data[_OBS].values(include_nested=True, leaves_only=True):
            if isinstance(leaf, Tensor) and leaf.is_floating_point():
                obs_ok &= step_ok(leaf)
        checks = {
            "reward": step_ok(data["reward"]),
            "observation": obs_ok,
            "policy output": step_ok(data["log_prob"]) & step_ok(data["value"]),
            # Only truncated rows use V(final_obs); other rows' entries are unused.
            "bootstrap value": step_ok(torch.where(data["truncated"], data["final_value"], 0.0)),
        }
        ok = torch.stack(list(checks.values()))
        # Every rank takes part, so that a bad rollout on one rank stops all of them.
        if bool(ok.all()) and bool(torch.isfinite(self._last_values).all()):
            raise_together(None, "the finite check of the rollout", self.dist)
            return
        first = {
            kind: int(torch.argmin(flags.to(torch.int8)))
            for kind, flags in checks.items()
            if not bool(flags.all())
        }
        if not first:
            first["policy output"] = steps
        kind, step = min(first.items(), key=lambda item: item[1])
        error = NonFiniteError(
            f"PPOAgent: expected finite rewards, observations and policy outputs, got a "
            f"non-finite {kind} at step {step} of epoch {self.epoch} (first step per kind: "
            f"{first}); nothing was updated. Check the env and the learning rate"
        )
        raise_together(error, "the finite check of the rollout", self.dist)

    def _track_episodes(self, data: TensorDict) -> None:
        """Record the returns and lengths of the episodes that ended in this epoch."""
        episodes = epoch_episodes(
            data["reward"],
            data["terminated"] | data["truncated"],
            data["valid"],
            self._episode_return,
            self._episode_length,
        )
        ended = episodes.ended.reshape(-1)
        self.metrics.add_many("episode/return", episodes.returns.reshape(-1), ended)
        self.metrics.add_many("episode/length", episodes.lengths.reshape(-1), ended)
        self._episode_return = episodes.return_so_far
        self._episode_length = episodes.length_so_far

    def _advantages(self, data: TensorDict) -> tuple[Tensor, Tensor]:
        """GAE over the epoch, ``[num_steps, num_envs]``, in unnormalised value space."""
        config = self.config
        values = data["value"]
        # V(obs_{t+1}): the next step's value, and after the last step V(obs_T).
        values_next = torch.cat((values[1:], self._last_values.unsqueeze(0)), dim=0)
        has_final = torch.tensor(self._has_final_value, device=self.device).unsqueeze(1)
        # Truncated rows bootstrap from V(final_obs) (exact) or V(obs_t) (approximate).
        next_values = torch.where(data["truncated"] & has_final, data["final_value"], values_next)
        rewards = data["reward"]
        if self.reward_normalizer is not None:
            self.reward_normalizer.update(
                rewards, data["terminated"], data["truncated"], dist=self.dist, mask=data["valid"]
            )
            rewards = self.reward_normalizer.normalize(rewards)
        return compute_gae(
            rewards=rewards,
            values=values,
            next_values=next_values,
            terminated=data["terminated"],
            truncated=data["truncated"],
            valid=data["valid"],
            gamma=config.gamma,
            gae_lambda=config.gae_lambda,
        )

    def _update(self) -> None:
        config = self.config
        stacked = self.buffer.stacked()
        advantages, returns = self._advantages(stacked)
        flat = stacked.reshape(-1)
        valid: Tensor = flat["valid"]
        epoch = EpochData(
            obs=flat[_OBS],
            action=flat["action"],
            log_prob=flat["log_prob"],
            value=flat["value"],
            # One host read per epoch: without ghost samples the loss skips its masks.
            valid=None if bool(valid.all()) else valid,
            advantage=advantages.reshape(-1),
            returns=returns.reshape(-1),
        )
        # Explained variance of the value predictions over this rank's valid samples.
        residual_var = _masked_var(epoch.returns - epoch.value, valid)
        return_var = _masked_var(epoch.returns, valid)
        self.metrics.add(
            "train/explained_variance", 1.0 - residual_var / return_var.clamp(min=1e-8)
        )
        self.model.train()
        batches = minibatch_indices(
            num_samples=flat.batch_size[0],
            batch_size=config.batch_size,
            num_mini_epochs=config.num_mini_epochs,
            generator=self._generator,
        )
        # One row of statistics per minibatch, recorded in one go after the loop.
        stats = torch.zeros(
            len(batches), len(_MINIBATCH_METRICS), dtype=torch.float32, device=self.device
        )
        done = 0
        for indices in batches:
            stop = self._minibatch_step(epoch.select(indices), stats[done])
            done += 1
            if stop:
                break
        self.metrics.add_rows(_MINIBATCH_METRICS, stats[:done])
        # The statistics change only after the update, so that every log-probability of
        # this epoch (collection and update alike) saw the same normalisation.
        self.model_unwrapped.update_normalizers(epoch.obs, dist=self.dist, mask=valid)

    def _minibatch_step(self, batch: EpochData, stats_row: Tensor) -> bool:
        """One PPO update on a minibatch; returns whether to stop the epoch (target KL).

        Writes the minibatch's statistics (``_MINIBATCH_METRICS``) into ``stats_row``.
        """
        raise_on_nonfinite = self.config.nonfinite_gradients == "raise"
        if self._compiled_update is not None:
            # It skips a non-finite update by itself: the norm is read only to raise.
            grad_norm, stats = self._compiled_update(batch)
            finite = not raise_on_nonfinite or math.isfinite(float(grad_norm))
        else:
            loss, stats = self._loss_terms(batch)
            # zero_grad(set_to_none=True) without the optimizer's per-call bookkeeping.
            for parameter in self._parameters:
                parameter.grad = None
            self.fabric.backward(loss)
            grad_norm = self._clip_gradients()
            # The finiteness decision syncs once per minibatch; every rank sees the same
            # all-reduced gradient, so every rank decides alike.
            finite = math.isfinite(float(grad_norm))
            if finite:
                with torch.no_grad():
                    self.optimizer.step()
        if not finite and raise_on_nonfinite:
            raise NonFiniteError(
                f"PPOAgent: non-finite gradient norm ({float(grad_norm)}) in epoch "
                f"{self.epoch}; this minibatch updated nothing"
            )
        with torch.no_grad():
            stats_row[:-2].copy_(stats)
            stats_row[-2].copy_(grad_norm)
            stats_row[-1].copy_(~torch.isfinite(grad_norm))
        return self._adapt(stats[4])

    def _loss_terms(self, batch: EpochData) -> tuple[Tensor, Tensor]:
        """The PPO loss of a minibatch and its statistics (:func:`ppo_loss`)."""
        return ppo_loss(self.config, batch, self._evaluate)

    def _clip_gradients(self) -> Tensor:
        """The global gradient norm; gradients scaled to ``max_grad_norm`` when it is set.

        As :func:`torch.nn.utils.clip_grad_norm_`, without its per-call grouping
        of tensors by device and dtype (the parameters share both).
        """
        grads = [p.grad for p in self._parameters if p.grad is not None]
        if not grads:
            return torch.zeros((), device=self.device)
        # ||g|| = sqrt(sum_i ||g_i||^2) over every parameter's gradient g_i
        total: Tensor = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        max_norm = self.config.max_grad_norm
        if max_norm is not None:
            # g <- g * min(1, max_norm / (||g|| + 1e-6))
            torch._foreach_mul_(grads, (max_norm / (total + 1e-6)).clamp(max=1.0))
        return total

    def _adapt(self, approx_kl: Tensor) -> bool:
        """Adaptive learning rate and target-KL stop, on the KL averaged over ranks."""
        config = self.config
        if config.learning_rate_schedule != "adaptive" and config.target_kl is None:
            return False
        kl = (
            float(self.dist.all_reduce_sum(approx_kl.reshape(1).double())[0]) / self.dist.world_size
        )
        if config.learning_rate_schedule == "adaptive":
            # rsl_rl's rule: shrink the step when KL overshoots, grow it when it undershoots
            if kl > 2.0 * config.desired_kl:
                self.learning_rate = max(config.min_learning_rate, self.learning_rate / 1.5)
            elif 0.0 < kl < config.desired_kl / 2.0:
                self.learning_rate = min(config.max_learning_rate, self.learning_rate * 1.5)
            for group in self.optimizer.param_groups:
                group["lr"] = self.learning_rate
        return config.target_kl is not None and kl > config.target_kl

    # --------------------------------------------------------------- checkpoints

    def _state(self) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
        modules: dict[str, dict[str, Any]] = {
            "policy": self.model_unwrapped.state_dict(),
            "agent": {"learning_rate": torch.tensor(self.learning_rate, dtype=torch.float64)},
        }
        return modules, {"policy": self.optimizer.state_dict()}

    def _rank_state(self) -> dict[str, dict[str, Any]]:
        """This rank's minibatch sampler, reward normaliser, env and collector state."""
        states: dict[str, dict[str, Any]] = {"sampler": {"generator": self._generator.get_state()}}
        if self.reward_normalizer is not None:
            states["reward_normalizer"] = self.reward_normalizer.state_dict()
        if isinstance(self.env, SupportsStateDict):
            states["env"] = self.env.state_dict()
            states["collector"] = {
                "episode_return": self._episode_return,
                "episode_length": self._episode_length,
                # A TensorDict is not plain data: store its leaves as a nested dict.
                **({"obs": self._obs.to_dict()} if self._obs is not None else {}),
            }
        return states

    def _load_state(
        self, checkpoint: Checkpoint, path: Path, rank_state: dict[str, dict[str, Any]]
    ) -> None:
        modules = checkpoint.modules
        load_into(self.model_unwrapped, modules["policy"], name="policy", path=path)
        if "policy" not in checkpoint.optimizers:
            raise CheckpointError(
                f"{path}: no optimizer state under 'policy'; not a PPO checkpoint"
            )
        load_into(self.optimizer, checkpoint.optimizers["policy"], name="optimizer", path=path)
        if "learning_rate" in modules.get("agent", {}):
            self.learning_rate = float(modules["agent"]["learning_rate"])
        if "sampler" in rank_state:
            self._generator.set_state(rank_state["sampler"]["generator"])
        if self.reward_normalizer is not None and "reward_normalizer" in rank_state:
            load_into(
                self.reward_normalizer,
                rank_state["reward_normalizer"],
                name="reward_normalizer",
                path=path,
            )
        if "env" in rank_state and isinstance(self.env, SupportsStateDict):
            load_into(self.env, rank_state["env"], name="env", path=path)
            collector = rank_state.get("collector")
            if collector is None:
                raise CheckpointError(f"{path}: env state without the collector state beside it")
            self._episode_return = collector["episode_return"].to(self.device)
            self._episode_length = collector["episode_length"].to(self.device)
            obs = collector.get("obs")
            self._obs = (
                TensorDict(obs, batch_size=[self.env.num_envs], device=self.device)
                if obs is not None
                else None
            )
        else:
            # The env's state is not checkpointable: continue from a fresh, seeded reset.
            self._obs, _ = self.env.reset(
                seed=self.config.seed * 1_000_003 + self.epoch * 7 + self.dist.rank
            )
        if not self._registered and self._obs is not None:
            self._register(self._obs)
            self._registered = True

    def _config_dict(self) -> dict[str, Any]:
        return self.config.to_dict()


def _masked_var(x: Tensor, mask: Tensor) -> Tensor:
    mean = _masked_mean(x, mask)
    return _masked_mean((x - mean).square(), mask)
