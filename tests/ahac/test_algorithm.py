"""Tests for typedrl.ahac._algorithm: the double critic, the stop rule, the horizon's update."""

import dataclasses
from collections.abc import Sequence

import pytest
import torch
from torch import nn

from tests.ahac.runs import ahac_of, contact_trainer
from tests.shac.windows import F64, FeaturePolicy, FixedWindow, window_rollout
from typedrl.ahac import AHAC, AHACConfig, DoubleCritic, loss_has_settled
from typedrl.apg import DifferentiableCollector, DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.distributed import SingleProcess
from typedrl.envs import DifferentiableVecEnvWrapper
from typedrl.errors import ConfigError, EnvContractError
from typedrl.metrics import AHAC_CONTACT_NORM, AHAC_CRITIC_PASSES, AHAC_HORIZON, LOSS_CRITIC
from typedrl.shac._window import WINDOW_SUMS, CriticData, fit_critic
from typedrl.testing import ContactQuadraticEnv, QuadraticEnv
from typedrl.training import GradientStep, RunOptions


def linear(weight: list[float], bias: float) -> nn.Linear:
    """``f -> weight . f + bias``, in float64."""
    layer = nn.Linear(len(weight), 1).to(F64)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([weight], dtype=F64))
        layer.bias.fill_(bias)
    return layer


def window_ahac(**fields: object) -> tuple[FeaturePolicy, AHAC]:
    """AHAC with linear critics ``V_1 = obs[1]`` and ``V_2 = obs[1] + 1``, H in [2, 8]."""
    policy = FeaturePolicy()
    values: dict[str, object] = {
        "critic_hidden": (),
        "critic_layer_norm": False,
        "critic_iterations": 2,
        "horizon_min": 2,
        "horizon_max": 8,
        "horizon_learning_rate": 0.01,
        "horizon_learning_rate_schedule": "constant",
        **fields,
    }
    ahac = AHAC(
        policy,
        AHACConfig(**values),  # type: ignore[arg-type]
        dist=SingleProcess(),
        planned_updates=100,
        seed=0,
        feature_width=2,
    )
    ahac.critic = DoubleCritic(linear([0.0, 1.0], 0.0), linear([0.0, 1.0], 1.0))
    return policy, ahac


# ---------------------------------------------------------------- the double critic


def test_the_double_critic_is_the_minimum_of_two() -> None:
    """forward is min(V_1, V_2) per row; both() gives the two columns."""
    critic = DoubleCritic(linear([1.0, 0.0], 0.0), linear([0.0, 1.0], 0.0))
    features = torch.tensor([[1.0, 2.0], [3.0, -1.0]], dtype=F64)
    assert critic.both(features).tolist() == [[1.0, 2.0], [3.0, -1.0]]
    assert critic(features).tolist() == [1.0, -1.0]


def test_the_two_critics_start_apart() -> None:
    """The two networks have their own weights (the reference's share their layers)."""
    fresh = AHAC(
        FeaturePolicy(),
        AHACConfig(critic_hidden=(4,)),
        dist=SingleProcess(),
        planned_updates=10,
        seed=0,
        feature_width=2,
    )
    first = dict(fresh.critic.first.named_parameters())
    second = dict(fresh.critic.second.named_parameters())
    # Biases start at 0 and LayerNorm at (1, 0) in both; the linear layers' weights differ.
    differ = {name for name in first if not torch.equal(first[name], second[name])}
    assert differ == {"0.weight", "3.weight"}


# ---------------------------------------------------------------- the critic's stop rule


@pytest.mark.parametrize(
    ("losses", "settled"),
    [
        ([5.0, 4.0, 3.9, 3.8, 3.75], False),  # five passes: nothing before the last to compare
        ([9.0, 5.0, 4.0, 3.9, 3.8, 3.75], False),  # (3.8 - 9) / 4 = -1.3
        ([5.0, 4.0, 3.9, 3.8, 3.75, 0.0], False),  # (3.75 - 5) / 4 = -0.3125; the last is ignored
        ([4.0, 3.9, 3.8, 3.75, 3.7, 100.0], True),  # (3.7 - 4) / 4 = -0.075
    ],
)
def test_the_stop_rule_reads_the_passes_before_the_last(
    losses: list[float], *, settled: bool
) -> None:
    """|mean(diff(last 5 losses before this pass))| < tolerance, as the reference's deque."""
    assert loss_has_settled(losses, passes=5, tolerance=0.2) is settled


def test_the_critic_fit_stops_early_or_runs_every_pass() -> None:
    """A loose tolerance stops after 6 passes; without a tolerance all passes run."""
    early = contact_trainer(total_updates=1, ahac={"critic_stop_tolerance": 1e9})
    assert early.train().metrics[AHAC_CRITIC_PASSES] == 6.0
    full = contact_trainer(total_updates=1, ahac={"critic_stop_tolerance": None})
    assert full.train().metrics[AHAC_CRITIC_PASSES] == 8.0


# ---------------------------------------------------------------- one update, written out


def test_one_update_moves_the_horizon_by_the_windows_contacts() -> None:
    """Contacts [[600, 800], [700, 900]]: c = [700, 800], lambda = [2, 3], H = 2 + 0.05."""
    policy, ahac = window_ahac()
    never = torch.zeros(2, 2, dtype=torch.bool)
    rollout = window_rollout(
        rewards=torch.ones(2, 2, dtype=F64),
        values=torch.zeros(2, 2, dtype=F64),
        next_values=torch.zeros(2, 2, dtype=F64),
        terminated=never,
        truncated=never,
        scale=policy.scale,
    )
    contacts = torch.tensor([[600.0, 800.0], [700.0, 900.0]], dtype=F64)
    outcome, _ = ahac.update(FixedWindow(dataclasses.replace(rollout, contact_norms=contacts)))
    assert outcome.applied
    assert outcome.metrics[AHAC_HORIZON] == 2.0
    assert outcome.metrics[AHAC_CONTACT_NORM] == 750.0
    assert ahac.horizon.horizon == pytest.approx(2.05, abs=1e-12)
    assert ahac.horizon.multiplier == pytest.approx(2.0, abs=1e-12)


def test_the_window_ends_with_the_smaller_critic() -> None:
    """The bootstrap of a running row is min(V_1, V_2) = V_1 of its last state."""
    policy, ahac = window_ahac()
    never = torch.zeros(2, 1, dtype=torch.bool)
    rollout = window_rollout(
        rewards=torch.zeros(2, 1, dtype=F64),
        values=torch.zeros(2, 1, dtype=F64),
        next_values=torch.tensor([[0.0], [3.0]], dtype=F64),
        terminated=never,
        truncated=never,
        scale=policy.scale,
    )
    rollout = dataclasses.replace(rollout, contact_norms=torch.zeros(2, 1, dtype=F64))
    outcome, _ = ahac.update(FixedWindow(rollout))
    # J = gamma^2 * min(3, 4) = 0.99^2 * 3 per row, divided by 2 steps in the metric
    assert outcome.metrics["train/objective"] == pytest.approx(0.99**2 * 3.0 / 2.0, abs=1e-12)


def test_a_window_without_contacts_is_refused() -> None:
    """A collector that records no contacts: the update names the capability."""
    policy, ahac = window_ahac()
    never = torch.zeros(2, 1, dtype=torch.bool)
    rollout = window_rollout(
        rewards=torch.zeros(2, 1, dtype=F64),
        values=torch.zeros(2, 1, dtype=F64),
        next_values=torch.zeros(2, 1, dtype=F64),
        terminated=never,
        truncated=never,
        scale=policy.scale,
    )
    with pytest.raises(EnvContractError, match=r"record_contacts=True.*SupportsContactForces"):
        ahac.update(FixedWindow(rollout))


# ---------------------------------------------------------------- in the trainer


def test_an_env_without_contact_forces_is_refused_in_one_line() -> None:
    """AHAC on an env without SupportsContactForces: one ConfigError naming it."""
    config = DifferentiableTrainerConfig(total_updates=1, algorithm=AHACConfig())
    with pytest.raises(ConfigError, match=r"SupportsContactForces") as error:
        DifferentiableTrainer(
            env=QuadraticEnv(num_envs=2),
            config=config,
            options=RunOptions(progress=False, loggers=[]),
        )
    assert "\n" not in str(error.value)


def test_a_wrapped_env_without_contact_forces_is_refused_in_one_line() -> None:
    """A wrapper does not lend contact forces to an env without them: one line naming it."""
    config = DifferentiableTrainerConfig(total_updates=1, algorithm=AHACConfig())
    with pytest.raises(ConfigError, match=r"SupportsContactForces") as error:
        DifferentiableTrainer(
            env=DifferentiableVecEnvWrapper(QuadraticEnv(num_envs=2)),
            config=config,
            options=RunOptions(progress=False, loggers=[]),
        )
    assert "\n" not in str(error.value)


def test_ahac_trains_on_a_wrapped_env_with_contact_forces() -> None:
    """The wrapper passes the contacts through: AHAC reads them as from the env itself."""
    env = ContactQuadraticEnv(num_envs=4, horizon=5, contact_scale=1000.0)
    config = DifferentiableTrainerConfig(
        total_updates=2,
        hidden=(8,),
        algorithm=AHACConfig(critic_hidden=(8,), horizon_min=2, horizon_max=6),
    )
    trainer = DifferentiableTrainer(
        env=DifferentiableVecEnvWrapper(env),
        config=config,
        options=RunOptions(progress=False, loggers=[]),
    )
    result = trainer.train()
    assert result.metrics[AHAC_CONTACT_NORM] > 0.0


def test_the_collector_refuses_to_record_contacts_it_cannot_read() -> None:
    """record_contacts on an env without contact forces is refused at construction."""
    with pytest.raises(ConfigError, match=r"record_contacts needs an env with"):
        DifferentiableCollector(QuadraticEnv(num_envs=2), record_contacts=True)


def test_the_collector_records_each_steps_contacts() -> None:
    """contact_norms is [num_steps, num_envs], the env's norm after each step."""
    env = ContactQuadraticEnv(num_envs=3, horizon=4, contact_scale=10.0)
    collector = DifferentiableCollector(env, record_contacts=True)
    collector.reset(seed=0)
    policy = FeaturePolicy(weight=0.0, bias=0.5)
    policy.to(torch.float32)
    rollout = collector.collect(policy, num_steps=3)
    assert rollout.contact_norms is not None
    expected = 10.0 * rollout.terminal_observations["obs"].detach().squeeze(-1).abs()
    torch.testing.assert_close(rollout.contact_norms, expected)


@pytest.mark.parametrize(("scale", "grows"), [(1e4, True), (1.0, False)])
def test_the_windows_follow_the_horizon(scale: float, *, grows: bool) -> None:
    """Stiff contacts lengthen the windows up to H_max; soft ones keep H_min; steps add up."""
    trainer = contact_trainer(contact_scale=scale, total_updates=4)
    ahac = ahac_of(trainer)
    lengths: list[int] = []
    original = ahac.update

    def update(*args: object, **kwargs: object) -> object:
        lengths.append(ahac.horizon.steps)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    ahac.update = update  # type: ignore[method-assign,assignment]
    result = trainer.train()
    assert result.env_steps == 4 * sum(lengths)
    assert lengths[0] == 2
    if grows:
        assert lengths[-1] > 2
    else:
        assert lengths == [2, 2, 2, 2]
    assert result.metrics[LOSS_CRITIC] >= 0.0
    assert trainer.algorithm_name == "ahac"


def test_a_pass_that_skips_every_step_is_not_a_settled_loss() -> None:
    """With no valid sample, no pass takes a step: the stop rule never runs, every pass does."""
    critic = nn.Linear(3, 1)
    kernel = GradientStep(
        list(critic.parameters()),
        torch.optim.Adam(critic.parameters()),
        dist=SingleProcess(),
        max_grad_norm=None,
    )
    calls: list[int] = []

    def stop(losses: Sequence[float]) -> bool:
        calls.append(len(losses))
        return True

    features, targets = torch.randn(8, 3), torch.randn(8)

    def fit(valid: bool) -> int:
        data = CriticData(
            features=features,
            targets=targets,
            mask=torch.full((8,), valid),
            window_sums=torch.zeros(len(WINDOW_SUMS)),
        )
        return fit_critic(
            data,
            squared_error=lambda x, y: (critic(x).squeeze(-1) - y).square(),
            kernel=kernel,
            sampler=torch.Generator().manual_seed(0),
            iterations=4,
            minibatches=2,
            stop=stop,
        ).passes

    before = [p.detach().clone() for p in critic.parameters()]
    assert (fit(valid=False), calls) == (4, [])
    assert all(torch.equal(a, b) for a, b in zip(before, critic.parameters(), strict=True))
    # With valid samples the rule runs after the first pass and ends the fit.
    assert (fit(valid=True), calls) == (1, [1])
