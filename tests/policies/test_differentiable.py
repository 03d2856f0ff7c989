"""Tests for typedrl.policies._differentiable.DifferentiableMLPPolicy."""

import io
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict
from torch import nn

from typedrl.distributed import SingleProcess
from typedrl.errors import ConfigError, SpecError
from typedrl.normalization import RunningMeanStd
from typedrl.policies import DifferentiableMLPPolicy
from typedrl.protocols import DifferentiablePolicy

DIST = SingleProcess()
LOW = np.array([-1.0, 0.0, -3.0], dtype=np.float32)
HIGH = np.array([1.0, 2.0, 0.5], dtype=np.float32)


def _policy(obs_dim: int = 4, **kwargs: object) -> DifferentiableMLPPolicy:
    return DifferentiableMLPPolicy(
        gym.spaces.Box(-1.0, 1.0, (obs_dim,)),
        gym.spaces.Box(LOW, HIGH),
        hidden=(8, 8),
        **kwargs,  # type: ignore[arg-type]
    )


def _obs(x: torch.Tensor) -> TensorDict:
    return TensorDict({"obs": x}, batch_size=[x.shape[0]])


def _mean(policy: DifferentiableMLPPolicy, obs: TensorDict) -> torch.Tensor:
    out: torch.Tensor = policy.mean_net(policy.features(obs))
    return out


def _squashed(pre: torch.Tensor) -> torch.Tensor:
    low, high = torch.from_numpy(LOW).to(pre.dtype), torch.from_numpy(HIGH).to(pre.dtype)
    return low + (torch.tanh(pre) + 1.0) / 2.0 * (high - low)


def _last_layer(policy: DifferentiableMLPPolicy) -> nn.Linear:
    layer = policy.mean_net[-1]
    assert isinstance(layer, nn.Linear)
    return layer


def test_protocol_and_shapes() -> None:
    """The policy is a DifferentiablePolicy; action, log_prob and entropy are shaped right."""
    policy = DifferentiableMLPPolicy(
        gym.spaces.Box(-1.0, 1.0, (5,)), gym.spaces.Box(-1.0, 1.0, (2, 3)), hidden=(8,)
    )
    assert isinstance(policy, DifferentiablePolicy)
    assert policy.reparameterized
    out = policy.act(_obs(torch.randn(4, 5)))
    assert sorted(out.keys()) == ["action", "entropy", "log_prob"]
    assert out["action"].shape == (4, 2, 3)
    assert out["log_prob"].shape == out["entropy"].shape == (4,)
    assert out.batch_size == torch.Size([4])


@pytest.mark.parametrize("squash", [True, False])
def test_gradient_reaches_parameters_and_observation(squash: bool) -> None:
    """The action's graph reaches every parameter and the observation, finite and non-zero."""
    torch.manual_seed(0)
    policy = _policy(squash=squash, layer_norm=True)
    x = torch.randn(6, 4, requires_grad=True)
    action = policy.act(_obs(x))["action"]
    assert action.requires_grad
    (action * torch.randn(6, 3)).sum().backward()
    for name, parameter in policy.named_parameters():
        assert parameter.grad is not None, name
        assert torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name
    assert x.grad is not None
    assert torch.isfinite(x.grad).all()
    assert x.grad.abs().sum() > 0


def test_squashed_actions_stay_inside_bounds_for_huge_means() -> None:
    """Saturated means give actions inside the bounds, finite log-probs and finite gradients."""
    policy = _policy()
    last = _last_layer(policy)
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor([1e6, -1e6, 3e4]))
    for deterministic in (True, False):
        out = policy.act(_obs(torch.randn(16, 4)), deterministic=deterministic)
        action = out["action"]
        assert (action >= torch.from_numpy(LOW)).all()
        assert (action <= torch.from_numpy(HIGH)).all()
        assert torch.isfinite(out["log_prob"]).all()
        policy.zero_grad(set_to_none=True)
        action.sum().backward()
        assert last.bias.grad is not None
        assert torch.isfinite(last.bias.grad).all()


def test_deterministic_action_is_the_squashed_mean() -> None:
    """deterministic=True returns the squashed mean, or the mean itself without squashing."""
    obs = _obs(torch.randn(5, 4))
    squashed = _policy(squash=True)
    with torch.no_grad():
        _last_layer(squashed).bias.fill_(0.7)
    expected = _squashed(_mean(squashed, obs))
    torch.testing.assert_close(squashed.act(obs, deterministic=True)["action"], expected)
    plain = _policy(squash=False)
    torch.testing.assert_close(plain.act(obs, deterministic=True)["action"], _mean(plain, obs))


def test_seeded_sampling_is_reproducible() -> None:
    """The same global seed gives the same actions; another seed gives others."""
    policy = _policy()
    obs = _obs(torch.randn(5, 4))
    torch.manual_seed(3)
    first = policy.act(obs)["action"]
    torch.manual_seed(3)
    again = policy.act(obs)["action"]
    torch.manual_seed(4)
    other = policy.act(obs)["action"]
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


@pytest.mark.parametrize("squash", [True, False])
def test_log_prob_and_entropy_match_torch_distributions(squash: bool) -> None:
    """log_prob equals torch.distributions' Normal (+ Tanh and Affine transforms); entropy too."""
    torch.manual_seed(1)
    policy = _policy(squash=squash, log_std_init=-0.5).double()
    with torch.no_grad():
        policy.log_std.copy_(torch.tensor([-0.5, 0.2, -1.3], dtype=torch.float64))
    obs = _obs(torch.randn(32, 4, dtype=torch.float64))
    out = policy.act(obs)
    base = torch.distributions.Normal(_mean(policy, obs), policy.log_std.exp())
    if squash:
        low = torch.from_numpy(LOW).double()
        high = torch.from_numpy(HIGH).double()
        transforms = [
            torch.distributions.transforms.TanhTransform(),
            torch.distributions.transforms.AffineTransform(
                loc=(high + low) / 2, scale=(high - low) / 2
            ),
        ]
        reference = torch.distributions.TransformedDistribution(base, transforms)
    else:
        reference = torch.distributions.TransformedDistribution(base, [])
    expected = reference.log_prob(out["action"].detach()).sum(-1)  # type: ignore[no-untyped-call]
    torch.testing.assert_close(out["log_prob"], expected, rtol=1e-6, atol=1e-6)
    entropy = base.entropy().sum(-1)  # type: ignore[no-untyped-call]
    torch.testing.assert_close(out["entropy"], entropy)


def test_fixed_and_learned_log_std() -> None:
    """learn_log_std chooses between a parameter and a fixed (saved) buffer."""
    learned = _policy(learn_log_std=True, log_std_init=-2.0)
    fixed = _policy(learn_log_std=False, log_std_init=-2.0)
    assert "log_std" in dict(learned.named_parameters())
    assert "log_std" not in dict(fixed.named_parameters())
    assert "log_std" in fixed.state_dict()
    assert fixed.log_std.tolist() == [-2.0, -2.0, -2.0]
    assert not fixed.log_std.requires_grad
    entropy = fixed.act(_obs(torch.randn(2, 4)))["entropy"]
    expected = 3 * (0.5 + 0.5 * math.log(2 * math.pi) - 2.0)
    torch.testing.assert_close(entropy, torch.full((2,), expected))


@pytest.mark.parametrize("layer_norm", [True, False])
def test_layer_norm_after_each_hidden_linear(layer_norm: bool) -> None:
    """layer_norm puts a LayerNorm between each hidden Linear and its activation."""
    names = [type(layer).__name__ for layer in _policy(layer_norm=layer_norm).mean_net]
    if layer_norm:
        assert names == ["Linear", "LayerNorm", "ELU", "Linear", "LayerNorm", "ELU", "Linear"]
    else:
        assert names == ["Linear", "ELU", "Linear", "ELU", "Linear"]


def test_observation_normalisation_with_feature_mask() -> None:
    """Masked-out features pass through; kept rows make the statistics; they get no gradient."""
    feature_mask = torch.tensor([True, False, True, False])
    policy = _policy(normalize_observations=True, observation_normalize_mask=feature_mask)
    data = torch.randn(10, 4) * 3.0 + 5.0
    rows = torch.tensor([True, False] * 5)
    data[~rows] = float("nan")
    policy.update_normalizers(_obs(data), dist=DIST, mask=rows)
    assert policy.obs_normalizers is not None
    normalizer = policy.obs_normalizers["obs"]
    assert isinstance(normalizer, RunningMeanStd)
    assert int(normalizer.count) == 5
    kept = data[rows].double()
    torch.testing.assert_close(normalizer.mean, kept.mean(0))
    torch.testing.assert_close(normalizer.var, kept.var(0, correction=0))

    x = (torch.randn(3, 4) + 5.0).requires_grad_()
    features = policy.features(_obs(x))
    scale = torch.rsqrt(normalizer.var + normalizer.epsilon).float()
    expected = torch.where(feature_mask, (x - normalizer.mean.float()) * scale, x)
    torch.testing.assert_close(features, expected)
    assert torch.equal(features[:, ~feature_mask], x[:, ~feature_mask])
    torch.autograd.backward(features.sum())
    assert x.grad is not None
    torch.testing.assert_close(x.grad, torch.where(feature_mask, scale, 1.0).expand(3, 4))
    for buffer in normalizer.buffers():
        assert not buffer.requires_grad
        assert buffer.grad is None
    assert int(normalizer.count) == 5


def test_update_normalizers_without_normalisation_does_nothing() -> None:
    """Without normalize_observations there are no statistics and updates are no-ops."""
    policy = _policy()
    assert policy.obs_normalizers is None
    x = torch.randn(2, 4)
    policy.update_normalizers(_obs(x), dist=DIST)
    assert torch.equal(policy.features(_obs(x)), x)


def test_dict_observation_space_with_several_keys() -> None:
    """Every key of a Dict space is read (or the chosen ones), flattened in order."""
    space = gym.spaces.Dict(
        {"joints": gym.spaces.Box(-1.0, 1.0, (3,)), "image": gym.spaces.Box(0.0, 1.0, (2, 2))}
    )
    action_space = gym.spaces.Box(-1.0, 1.0, (2,))
    policy = DifferentiableMLPPolicy(space, action_space, normalize_observations=True)
    assert policy.obs_keys == tuple(space.spaces)
    assert policy.obs_normalizers is not None
    assert sorted(policy.obs_normalizers.keys()) == ["image", "joints"]
    obs = TensorDict({"joints": torch.randn(4, 3), "image": torch.rand(4, 2, 2)}, batch_size=[4])
    policy.update_normalizers(obs, dist=DIST)
    features = policy.features(obs)
    assert features.shape == (4, 7)
    assert policy.act(obs)["action"].shape == (4, 2)
    only_image = DifferentiableMLPPolicy(space, action_space, obs_keys=["image"])
    torch.testing.assert_close(only_image.features(obs), obs["image"].reshape(4, 4))
    with pytest.raises(SpecError, match="lacks key 'joints'"):
        policy.act(TensorDict({"image": torch.rand(4, 2, 2)}, batch_size=[4]))
    with pytest.raises(SpecError, match="expected 3 features"):
        policy.act(TensorDict({"joints": torch.randn(4, 5), "image": obs["image"]}, [4]))


@pytest.mark.parametrize(
    ("action_space", "kwargs", "message"),
    [
        (gym.spaces.Discrete(3), {}, "Box action spaces only"),
        (gym.spaces.Box(-np.inf, np.inf, (2,)), {}, "finite action bounds"),
        (
            gym.spaces.Box(np.array([0, -1], np.float32), np.array([np.inf, 1], np.float32)),
            {},
            "finite action",
        ),
        (gym.spaces.Box(1.0, 1.0, (2,)), {}, "high > low"),
        (gym.spaces.Box(-1.0, 1.0, (2,)), {"log_std_init": math.nan}, "log_std_init"),
        (gym.spaces.Box(-1.0, 1.0, (2,)), {"obs_keys": "obs"}, "sequence of str"),
        (gym.spaces.Box(-1.0, 1.0, (2,)), {"obs_keys": ["obs", "obs"]}, "distinct"),
        (gym.spaces.Box(-1.0, 1.0, (2,)), {"hidden": [0]}, "positive ints"),
        (gym.spaces.Box(-1.0, 1.0, (2,)), {"observation_clip": 0.0}, "observation_clip"),
        (gym.spaces.Box(-1.0, 1.0, (2,)), {"obs_keys": ["rgb"]}, "'rgb' must be a Box"),
        (
            gym.spaces.Box(-1.0, 1.0, (2,)),
            {"observation_normalize_mask": torch.ones(3, dtype=torch.bool)},
            r"shape \[4\]",
        ),
    ],
)
def test_rejects_bad_configuration(
    action_space: gym.Space[object], kwargs: dict[str, object], message: str
) -> None:
    """Non-Box actions, unusable bounds with squash and bad options raise ConfigError."""
    with pytest.raises(ConfigError, match=message):
        DifferentiableMLPPolicy(
            gym.spaces.Box(-1.0, 1.0, (4,)),
            action_space,
            **kwargs,  # type: ignore[arg-type]
        )


def test_unbounded_actions_are_allowed_without_squash() -> None:
    """squash=False accepts infinite bounds and returns unbounded actions."""
    policy = DifferentiableMLPPolicy(
        gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Box(-np.inf, np.inf, (2,)), squash=False
    )
    out = policy.act(_obs(torch.randn(3, 4)))
    assert torch.isfinite(out["action"]).all()
    assert torch.isfinite(out["log_prob"]).all()


def test_act_keeps_the_train_eval_mode() -> None:
    """act leaves the module's training flag as the caller set it."""
    policy = _policy(normalize_observations=True).eval()
    policy.act(_obs(torch.randn(2, 4)))
    assert not policy.training
    policy.train()
    policy.act(_obs(torch.randn(2, 4)))
    assert policy.training


def test_state_dict_round_trip() -> None:
    """Weights, log-std and normaliser statistics survive a weights-only save and load."""
    torch.manual_seed(2)
    source = _policy(normalize_observations=True, layer_norm=True)
    source.update_normalizers(_obs(torch.randn(20, 4) * 2.0 + 1.0), dist=DIST)
    with torch.no_grad():
        source.log_std.fill_(0.3)
    buffer = io.BytesIO()
    torch.save(source.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    assert "obs_normalizers.obs.running_mean" in state
    assert "action_low" not in state
    target = _policy(normalize_observations=True, layer_norm=True)
    target.load_state_dict(state)
    obs = _obs(torch.randn(5, 4))
    assert torch.equal(
        target.act(obs, deterministic=True)["action"],
        source.act(obs, deterministic=True)["action"],
    )
    torch.manual_seed(9)
    sampled = source.act(obs)
    torch.manual_seed(9)
    assert torch.equal(target.act(obs)["log_prob"], sampled["log_prob"])
