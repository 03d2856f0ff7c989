"""Tests for typedrl.policies._actor_critic.MLPActorCritic."""

import gymnasium as gym
import pytest
import torch
from tensordict import TensorDict

from typedrl.distributed import SingleProcess
from typedrl.errors import ConfigError, SpecError
from typedrl.policies import MLPActorCritic
from typedrl.protocols import ActorCritic


def _obs(batch: int, **keys: int) -> TensorDict:
    return TensorDict({k: torch.randn(batch, n) for k, n in keys.items()}, batch_size=[batch])


def test_gaussian_head_shapes_and_protocol() -> None:
    """Box actions get a Gaussian head shaped like the action space."""
    model = MLPActorCritic(gym.spaces.Box(-1, 1, (5,)), gym.spaces.Box(-1, 1, (2, 3)))
    assert isinstance(model, ActorCritic)
    obs = _obs(4, obs=5)
    out = model.act(obs)
    assert out["action"].shape == (4, 2, 3)
    assert out["log_prob"].shape == out["value"].shape == out["entropy"].shape == (4,)
    scored = model.evaluate(obs, out["action"])
    assert torch.allclose(scored["log_prob"], out["log_prob"], atol=1e-6)
    assert torch.equal(
        model.act(obs, deterministic=True)["action"], model.act(obs, deterministic=True)["action"]
    )


def test_deterministic_discrete_is_argmax() -> None:
    """Deterministic discrete actions are the most likely ones."""
    model = MLPActorCritic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(4))
    obs = _obs(6, obs=3)
    logits = model.actor(obs["obs"])
    assert torch.equal(model.act(obs, deterministic=True)["action"], logits.argmax(-1))


def test_asymmetric_keys_from_dict_space() -> None:
    """With policy/critic groups the actor reads "policy" and the critic "critic"."""
    space = gym.spaces.Dict(
        {"policy": gym.spaces.Box(-1, 1, (3,)), "critic": gym.spaces.Box(-1, 1, (7,))}
    )
    model = MLPActorCritic(space, gym.spaces.Box(-1, 1, (1,)))
    assert model.actor_keys == ("policy",)
    assert model.critic_keys == ("critic",)
    assert model.value(_obs(2, policy=3, critic=7)).shape == (2,)


def test_fixed_std_is_a_buffer() -> None:
    """learn_std=False keeps the log-std out of the parameters."""
    model = MLPActorCritic(
        gym.spaces.Box(-1, 1, (2,)), gym.spaces.Box(-1, 1, (1,)), learn_std=False, log_std_init=-1.0
    )
    names = [name for name, _ in model.named_parameters()]
    assert "log_std" not in names
    assert model.log_std.tolist() == [-1.0]


def test_model_options_shape_both_networks() -> None:
    """Separate widths, the activation and orthogonal_init=False reach actor and critic."""
    torch.manual_seed(0)
    model = MLPActorCritic(
        gym.spaces.Box(-1, 1, (3,)),
        gym.spaces.Box(-1, 1, (2,)),
        actor_hidden=(8, 8),
        critic_hidden=(16,),
        activation="elu",
        orthogonal_init=False,
        log_std_init=-2.0,
    )
    assert [layer.out_features for layer in model.actor if isinstance(layer, torch.nn.Linear)] == [
        8,
        8,
        2,
    ]
    assert [layer.out_features for layer in model.critic if isinstance(layer, torch.nn.Linear)] == [
        16,
        1,
    ]
    assert all(isinstance(layer, torch.nn.ELU) for layer in (model.actor[1], model.critic[1]))
    # Default init: non-zero biases everywhere, no 0.01 gain on the actor's output.
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        assert all(float(layer.bias.abs().sum()) > 0.0 for layer in linears)
        assert float(torch.linalg.matrix_norm(linears[2].weight, ord=2)) > 0.1
    assert model.log_std.tolist() == [-2.0, -2.0]
    orthogonal = MLPActorCritic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (2,)))
    first = orthogonal.critic[0]
    assert isinstance(first, torch.nn.Linear)
    assert float(first.bias.detach().abs().sum()) == 0.0


def test_gradients_reach_both_networks() -> None:
    """The PPO loss terms backpropagate into actor, critic and log-std."""
    model = MLPActorCritic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (2,)))
    obs = _obs(8, obs=3)
    out = model.evaluate(obs, torch.randn(8, 2))
    (out["log_prob"].sum() + out["value"].sum() + out["entropy"].sum()).backward()
    assert all(p.grad is not None for p in model.parameters())


def test_errors() -> None:
    """Unsupported spaces and missing keys raise typedrl errors."""
    with pytest.raises(ConfigError, match="Box and Discrete"):
        MLPActorCritic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.MultiDiscrete([2, 2]))
    mission = gym.spaces.Dict(
        {"mission": gym.spaces.Text(8), "image": gym.spaces.Box(0, 255, (7, 7, 3))}
    )
    with pytest.raises(
        ConfigError,
        match=r"'mission' must be a Box, Discrete, MultiDiscrete or MultiBinary space.*keep "
        r"the Box keys with --wrapper 'FilterObservation\(filter_keys=\[\"image\"\]\)'",
    ):
        MLPActorCritic(mission, gym.spaces.Discrete(2), actor_keys=["mission", "image"])
    model = MLPActorCritic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2))
    with pytest.raises(SpecError, match=r"lacks keys \['obs'\]"):
        model.act(_obs(2, policy=3))


def test_observation_normalisation_lives_in_the_model() -> None:
    """Normalisers are part of the model's state and change only through update_normalizers."""
    from typedrl.normalization import RunningMeanStd

    torch.manual_seed(0)
    model = MLPActorCritic(
        gym.spaces.Box(-10, 10, (3,)), gym.spaces.Box(-1, 1, (1,)), normalize_observations=True
    )
    obs = TensorDict({"obs": torch.randn(500, 3) * 4.0 + 3.0}, batch_size=[500])
    before = model.act(obs, deterministic=True)["action"]
    assert torch.equal(model.act(obs, deterministic=True)["action"], before)
    valid = torch.ones(500, dtype=torch.bool)
    valid[:10] = False
    model.update_normalizers(obs, dist=SingleProcess(), mask=valid)
    assert model.obs_normalizers is not None
    normalizer = model.obs_normalizers["obs"]
    assert isinstance(normalizer, RunningMeanStd)
    assert int(normalizer.count) == 490
    expected_mean = obs["obs"][10:].double().mean(0)
    assert torch.allclose(normalizer.mean, expected_mean)
    assert "obs_normalizers.obs.running_mean" in model.state_dict()
    assert not torch.equal(model.act(obs, deterministic=True)["action"], before)


def test_critic_reads_the_actor_keys_without_a_critic_group() -> None:
    """A Dict without "critic" (and without "obs"/"policy"): both networks read every key."""
    space = gym.spaces.Dict(
        {"pos": gym.spaces.Box(-1, 1, (2,)), "vel": gym.spaces.Box(-1, 1, (3,))}
    )
    model = MLPActorCritic(space, gym.spaces.Discrete(2))
    assert model.actor_keys == ("pos", "vel")
    assert model.critic_keys == ("pos", "vel")


def test_float64_observations_meet_float32_networks() -> None:
    """float64 observations are cast to the networks' dtype instead of failing in a matmul."""
    model = MLPActorCritic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2))
    obs = TensorDict({"obs": torch.zeros(4, 3, dtype=torch.float64)}, batch_size=[4])
    assert model.act(obs)["value"].dtype == torch.float32


def test_discrete_spaces_with_a_start_offset() -> None:
    """Discrete(n, start=s) actions are sampled in s .. s+n-1 and scored consistently."""
    model = MLPActorCritic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(3, start=5))
    obs = _obs(64, obs=3)
    out = model.act(obs)
    assert bool(((out["action"] >= 5) & (out["action"] <= 7)).all())
    scored = model.evaluate(obs, out["action"])
    assert torch.allclose(scored["log_prob"], out["log_prob"])


@pytest.mark.parametrize(
    ("observation_space", "action_space", "obs"),
    [
        (gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(4, start=2), {"obs": 3}),
        (gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (2,)), {"obs": 3}),
        (
            gym.spaces.Dict(
                {"policy": gym.spaces.Box(-1, 1, (3,)), "critic": gym.spaces.Box(-1, 1, (5,))}
            ),
            gym.spaces.Box(-1, 1, (2,)),
            {"policy": 3, "critic": 5},
        ),
    ],
)
def test_tensor_fast_paths_equal_the_tensordict_methods(
    observation_space: gym.Space[object], action_space: gym.Space[object], obs: dict[str, int]
) -> None:
    """act_tensors and evaluate_tensors return exactly what act and evaluate do."""
    model = MLPActorCritic(observation_space, action_space)
    batch = _obs(5, **obs)
    for deterministic in (False, True):
        torch.manual_seed(3)
        out = model.act(batch, deterministic=deterministic)
        torch.manual_seed(3)
        action, log_prob, value = model.act_tensors(batch, deterministic=deterministic)
        assert torch.equal(action, out["action"])
        assert torch.equal(log_prob, out["log_prob"])
        assert torch.equal(value, out["value"])
        # The value is the critic's, on the critic's keys.
        assert torch.equal(value, model.value(batch))
    action = model.act(batch)["action"]
    scored = model.evaluate(batch, action)
    log_prob, entropy, value = model.evaluate_tensors(batch, action)
    assert torch.equal(log_prob, scored["log_prob"])
    assert torch.equal(entropy, scored["entropy"])
    assert torch.equal(value, model.value(batch))


def test_index_observations_reach_the_networks_as_one_hot_codes() -> None:
    """Discrete, MultiDiscrete and MultiBinary keys: codes, never normalised; Box keys are."""
    space = gym.spaces.Dict(
        {
            "direction": gym.spaces.Discrete(4, start=1),
            "doors": gym.spaces.MultiDiscrete([2, 3]),
            "flags": gym.spaces.MultiBinary(2),
            "image": gym.spaces.Box(0.0, 1.0, (2, 2)),
        }
    )
    model = MLPActorCritic(space, gym.spaces.Discrete(3), normalize_observations=True)
    first = model.actor[0]
    assert isinstance(first, torch.nn.Linear)
    assert first.in_features == 4 + (2 + 3) + 2 + 4
    assert model.obs_normalizers is not None
    assert sorted(model.obs_normalizers.keys()) == ["image"]
    obs = TensorDict(
        {
            "direction": torch.tensor([1, 4]),
            "doors": torch.tensor([[0, 2], [1, 0]]),
            "flags": torch.tensor([[1, 0], [0, 1]], dtype=torch.int8),
            "image": torch.rand(2, 2, 2),
        },
        batch_size=[2],
    )
    features = model._features(obs, model.actor_keys)
    expected_codes = torch.tensor(
        [[1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1]],
        dtype=torch.float32,
    )
    assert torch.equal(features[:, :11], expected_codes)
    out = model.act(obs)
    assert out["action"].shape == (2,)
    exported = model.deterministic_actor(space)
    flat = torch.cat(
        [
            obs["direction"].reshape(2, 1).float(),
            obs["doors"].float(),
            obs["flags"].float(),
            obs["image"].reshape(2, 4),
        ],
        dim=-1,
    )
    assert exported.obs_dim == 9
    assert torch.equal(exported(flat), model.act(obs, deterministic=True)["action"])


def test_normalised_box_keys_beside_codes_export_as_trained() -> None:
    """With statistics, the exported actor normalises the Box columns and leaves the index."""
    space = gym.spaces.Dict({"x": gym.spaces.Box(-5.0, 5.0, (3,)), "mode": gym.spaces.Discrete(12)})
    model = MLPActorCritic(space, gym.spaces.Box(-1, 1, (2,)), normalize_observations=True)
    obs = TensorDict(
        {"x": 3.0 * torch.randn(64, 3) + 1.0, "mode": torch.randint(0, 12, (64,))},
        batch_size=[64],
    )
    model.update_normalizers(obs, dist=SingleProcess())
    exported = model.deterministic_actor(space)
    # A Dict space orders its keys: the layout is "mode", then "x".
    assert model.actor_keys == ("mode", "x")
    flat = torch.cat([obs["mode"].reshape(64, 1).float(), obs["x"]], dim=-1)
    expected = model.act(obs, deterministic=True)["action"]
    assert torch.allclose(exported(flat), expected, atol=1e-6)
