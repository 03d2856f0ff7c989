"""One AHAC window, numerically: typedrl's AHAC against the authors' ``ahac.py``.

AHAC's reference code is ``algorithms/ahac.py`` in the authors' fork of DiffRL
(Georgiev et al., ICML 2024). It is not a package: pass a checkout of that
repository with ``--reference`` (the folder holding ``src/shac``). Its own envs
run on dflex, which needs CUDA; here both sides run one window of typedrl's
:class:`~typedrl.testing.ContactQuadraticEnv` (``x' = x + a``, reward
``-x'^2``, contact force ``contact_scale * |x'|``), seeded alike, with the same
weights: a deterministic linear actor ``a = tanh(w x + b)`` and the reference's
``DoubleCriticMLP`` (two [16, 16] ELU networks with LayerNorm), whose layers
typedrl's :class:`~typedrl.ahac.DoubleCritic` takes over as both of its critics.
No observation or return normalisation on either side.

The reference reaches the env through a small adapter (its env API: ``step``
returning ``(obs, reward, done, info)`` with ``termination``, ``truncation``,
``obs_before_reset``, ``contact_forces`` and ``accelerations``, the latter all
ones so that its contact norm is the env's). Its imports of ``tensorboardX``,
``omegaconf``, ``hydra`` and ``rl_games`` are replaced by empty stand-ins:
``ahac.py`` only constructs a writer and calls ``instantiate``, which the
stand-in answers with the adapter, the actor and the critic.

Compared, over the window of ``H = 8`` steps from the first update:

- the actor loss (the reference's ``compute_actor_loss``; typedrl's loss per step);
- the actor's gradient before clipping (typedrl's divided by the window's steps,
  as its update kernel divides it);
- the critic's TD(lambda) targets (the reference's ``compute_target_values``);
- the horizon and multiplier after the update (the reference's ``train`` for
  one epoch, on a second instance with the same weights and env seed).

Run::

    python benchmarks/ahac_vs_reference.py --reference PATH/TO/DiffRL-fork
"""

import argparse
import copy
import importlib
import json
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict
from torch import Tensor, nn

import typedrl.ahac._algorithm as algorithm_module
from typedrl.ahac import AHAC, AHACConfig, DoubleCritic
from typedrl.apg import DifferentiableCollector
from typedrl.distributed import SingleProcess
from typedrl.shac._window import critic_step
from typedrl.testing import ContactQuadraticEnv

NUM_ENVS = 6
EPISODE = 5
CONTACT_SCALE = 5000.0
SEED = 3
HIDDEN = [16, 16]


class _Actor(nn.Module):
    """The pre-squash action ``w x + b`` (the reference squashes with tanh itself)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(1, 1)
        with torch.no_grad():
            self.linear.weight.fill_(-0.6)
            self.linear.bias.fill_(0.15)

    def forward(self, obs: Tensor, deterministic: bool = False) -> Tensor:
        del deterministic
        out: Tensor = self.linear(obs)
        return out

    def get_logstd(self) -> Tensor:
        """The reference logs its actor's standard deviation: none here."""
        return torch.zeros(1)


class _Policy(nn.Module):
    """typedrl's side of the same actor: ``tanh(w x + b)``, features ``x``."""

    def __init__(self, actor: _Actor) -> None:
        super().__init__()
        self.actor = copy.deepcopy(actor)

    @property
    def reparameterized(self) -> bool:
        return True

    def features(self, obs: TensorDict) -> Tensor:
        features: Tensor = obs["obs"]
        return features

    def act(self, obs: TensorDict, *, deterministic: bool = False) -> TensorDict:
        del deterministic
        action = torch.tanh(self.actor(obs["obs"]))
        return TensorDict({"action": action}, batch_size=obs.batch_size)


class _ReferenceEnv:
    """ContactQuadraticEnv behind the env API the reference's ``ahac.py`` calls."""

    def __init__(self) -> None:
        self.env = ContactQuadraticEnv(
            num_envs=NUM_ENVS, horizon=EPISODE, contact_scale=CONTACT_SCALE
        )
        self.num_envs = NUM_ENVS
        self.num_obs = 1
        self.num_actions = 1
        self.episode_length = EPISODE
        self.obs: Tensor = torch.zeros(NUM_ENVS, 1)

    def reset(self) -> Tensor:
        obs, _ = self.env.reset(seed=SEED)
        self.obs = obs["obs"]
        return self.obs

    def clear_grad(self) -> None:
        self.obs = self.env.detach_state()["obs"]

    def initialize_trajectory(self) -> Tensor:
        self.clear_grad()
        return self.obs

    def step(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor, dict[str, Tensor]]:
        result = self.env.step(actions.reshape(NUM_ENVS, 1))
        assert result.final_obs is not None
        self.obs = result.obs["obs"]
        norm = self.env.contact_force_norm()
        info = {
            "termination": result.terminated,
            "truncation": result.truncated,
            "obs_before_reset": result.final_obs["obs"],
            "contact_forces": norm.reshape(NUM_ENVS, 1, 1).clone(),
            "accelerations": torch.ones(NUM_ENVS, 1, 1),
        }
        return self.obs, result.reward, result.terminated | result.truncated, info


class _Writer:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs

    def add_scalar(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs

    def flush(self) -> None: ...

    def close(self) -> None: ...


def _install_stand_ins(reference: Path) -> None:
    """Empty modules for the reference's logging and config imports; its src on the path."""
    sys.path.insert(0, str(reference / "src"))
    tensorboard = types.ModuleType("tensorboardX")
    tensorboard.SummaryWriter = _Writer  # type: ignore[attr-defined]
    omegaconf = types.ModuleType("omegaconf")
    omegaconf.DictConfig = dict  # type: ignore[attr-defined]
    hydra = types.ModuleType("hydra")
    hydra_utils = types.ModuleType("hydra.utils")
    # Replaced in ahac.py's namespace by each construction (see _reference).
    hydra_utils.instantiate = None  # type: ignore[attr-defined]
    rl_games = types.ModuleType("rl_games")
    builder = types.ModuleType("rl_games.algos_torch.network_builder")
    builder.DoubleQCritic = object  # type: ignore[attr-defined]
    sys.modules.update(
        {
            "tensorboardX": tensorboard,
            "omegaconf": omegaconf,
            "hydra": hydra,
            "hydra.utils": hydra_utils,
            "rl_games": rl_games,
            "rl_games.algos_torch": types.ModuleType("rl_games.algos_torch"),
            "rl_games.algos_torch.network_builder": builder,
        }
    )


def _reference(module: Any, actor: _Actor, critic: Any, log_dir: str) -> Any:
    """The reference's AHAC with ahac.yaml's settings, on the adapter, actor and critic."""
    objects: dict[str, Any] = {
        "env": _ReferenceEnv,
        "actor": actor,
        "critic": critic,
    }

    def instantiate(config: dict[str, Any], **kwargs: Any) -> Any:
        del kwargs
        made = objects[config["_target_"]]
        return made() if made is _ReferenceEnv else copy.deepcopy(made)

    module.instantiate = instantiate
    return module.AHAC(
        env_config={"_target_": "env"},
        actor_config={"_target_": "actor"},
        critic_config={"_target_": "critic"},
        steps_min=8,
        steps_max=64,
        max_epochs=1,
        train=True,
        logdir=log_dir,
        grad_norm=1.0,
        contact_threshold=500.0,
        actor_lr=2e-3,
        critic_lr=2e-3,
        lambd_lr=5e-4,
        lr_schedule="linear",
        gamma=0.99,
        lam=0.95,
        critic_iterations=None,
        critic_batches=4,
        critic_method="td-lambda",
        eval_runs=0,
        device="cpu",
    )


def _typedrl_update(actor: _Actor, reference_critic: Any) -> dict[str, Any]:
    """One typedrl AHAC update on the same env, weights and settings."""
    policy = _Policy(actor)
    ahac = AHAC(
        policy,
        AHACConfig(
            horizon_min=8,
            horizon_max=64,
            critic_hidden=tuple(HIDDEN),
            critic_max_grad_norm=None,
        ),
        dist=SingleProcess(),
        planned_updates=1,
        seed=0,
        feature_width=1,
    )
    # Both critics are the reference's one network (its two share their layers).
    ahac.critic = DoubleCritic(
        copy.deepcopy(reference_critic.critic_1), copy.deepcopy(reference_critic.critic_1)
    )
    ahac.critic_optimizer, ahac.critic_scheduler, ahac.critic_kernel = critic_step(
        ahac.critic, ahac.config, dist=ahac.dist, planned_updates=1
    )
    env = ContactQuadraticEnv(num_envs=NUM_ENVS, horizon=EPISODE, contact_scale=CONTACT_SCALE)
    collector = DifferentiableCollector(env, record_contacts=True)
    collector.reset(seed=SEED)
    recorded: dict[str, Any] = {}
    original_targets = getattr(algorithm_module, "critic_targets")  # noqa: B009 - patched below

    def critic_targets(*args: Any, **kwargs: Any) -> Any:
        data = original_targets(*args, **kwargs)
        recorded["targets"] = data.targets.reshape(8, NUM_ENVS).clone()
        return data

    setattr(algorithm_module, "critic_targets", critic_targets)  # noqa: B010 - restored below

    class Watch:
        def collect(self, policy: Any, *, num_steps: int, iteration: int) -> Any:
            window = collector.collect(policy, num_steps=num_steps, iteration=iteration)
            recorded["contacts"] = window.contact_norms
            return window

        def detach_state(self) -> Any:
            recorded["grads"] = [
                torch.zeros_like(p) if p.grad is None else p.grad.clone()
                for p in policy.actor.parameters()
            ]
            return collector.detach_state()

    try:
        outcome, _ = ahac.update(Watch())
    finally:
        setattr(algorithm_module, "critic_targets", original_targets)  # noqa: B010
    steps = 8
    return {
        "loss": outcome.metrics["loss/policy"],
        "grads": [grad / steps for grad in recorded["grads"]],
        "targets": recorded["targets"],
        "contacts": recorded["contacts"],
        "horizon": ahac.horizon.horizon,
        "multiplier": ahac.horizon.multiplier,
    }


def _reference_window(module: Any, actor: _Actor, critic: Any) -> dict[str, Any]:
    """The reference's loss, gradient, targets (one instance) and horizon step (another)."""
    with tempfile.TemporaryDirectory() as log_dir:
        first = _reference(module, actor, critic, log_dir)
        first.initialize_env()
        for name in ("episode_loss", "episode_discounted_loss"):
            setattr(first, name, torch.zeros(NUM_ENVS))
        first.episode_length = torch.zeros(NUM_ENVS, dtype=torch.int)
        first.episode_gamma = torch.ones(NUM_ENVS)
        first.actor_optimizer.zero_grad()
        loss = first.compute_actor_loss()
        loss.backward()
        grads = [p.grad.clone() for p in first.actor.parameters()]
        first.compute_target_values()
        second = _reference(module, actor, critic, log_dir)
        second.train()
        return {
            "loss": float(loss.detach()),
            "grads": grads,
            "targets": first.target_values.clone(),
            "contacts": first.cfs.clone(),
            "horizon": float(second.H),
            "multiplier": float(second.lambd[0]),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    _install_stand_ins(args.reference)
    module = importlib.import_module("shac.algorithms.ahac")
    double_critic = importlib.import_module("shac.models.critic").DoubleCriticMLP

    actor = _Actor()
    critic = double_critic(obs_dim=1, units=HIDDEN, activation="elu", device="cpu")
    pairs = zip(critic.critic_1.parameters(), critic.critic_2.parameters(), strict=True)
    shared = all(a is b for a, b in pairs)
    reference = _reference_window(module, actor, critic)
    ours = _typedrl_update(actor, critic)
    report = {
        "reference_critics_share_their_layers": shared,
        "loss": {"reference": reference["loss"], "typedrl": ours["loss"]},
        "loss_abs_diff": abs(reference["loss"] - ours["loss"]),
        "grad_max_abs_diff": max(
            float((a - b).abs().max())
            for a, b in zip(reference["grads"], ours["grads"], strict=True)
        ),
        "grad_norm": float(torch.cat([g.reshape(-1) for g in reference["grads"]]).norm()),
        "contacts_max_abs_diff": float((reference["contacts"] - ours["contacts"]).abs().max()),
        "targets_max_abs_diff": float((reference["targets"] - ours["targets"]).abs().max()),
        "targets_max_abs": float(reference["targets"].abs().max()),
        "horizon": {"reference": reference["horizon"], "typedrl": ours["horizon"]},
        "multiplier": {"reference": reference["multiplier"], "typedrl": ours["multiplier"]},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
