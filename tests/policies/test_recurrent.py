"""Tests for typedrl.policies._recurrent.RecurrentActorCritic."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from typedrl.distributed import SingleProcess
from typedrl.errors import ConfigError
from typedrl.policies import MLPActorCritic, PolicyFactory, RecurrentActorCritic, RecurrentCore
from typedrl.protocols import StatefulActorCritic, StateSpec

CPU = torch.device("cpu")


def _rollout(
    model: RecurrentActorCritic, obs: TensorDict, done: torch.Tensor
) -> tuple[TensorDict, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Step the model through ``obs`` ([T, B]) as a collector does; the start state and outputs."""
    steps, batch = obs.batch_size
    start = model.initial_state(batch, device=CPU)
    state = start
    actions, log_probs, values = [], [], []
    for t in range(steps):
        out = model.act_step(obs[t], state)
        actions.append(out["action"])
        log_probs.append(out["log_prob"])
        values.append(out["value"])
        keep = ~done[t]
        state = out["state"].apply(lambda x, k=keep: x * k.view(-1, 1, 1))
    return start, torch.stack(actions), torch.stack(log_probs), torch.stack(values)


@pytest.mark.parametrize("core", ["gru", "lstm"])
@pytest.mark.parametrize("action_space", [gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,))])
def test_sequence_matches_step_by_step(
    core: RecurrentCore, action_space: gym.Space[object]
) -> None:
    """Re-running a rollout with done masks gives the collected log-probs and values."""
    torch.manual_seed(0)
    model = RecurrentActorCritic(
        gym.spaces.Box(-1, 1, (4,)), action_space, core=core, hidden_size=8, encoder_hidden=(16,)
    )
    obs = TensorDict({"obs": torch.randn(7, 5, 4)}, batch_size=[7, 5])
    done = torch.zeros(7, 5, dtype=torch.bool)
    done[2, 1] = done[4, 3] = done[4, 0] = done[6, 2] = True
    with torch.no_grad():
        start, action, log_prob, value = _rollout(model, obs, done)
    new_log_prob, entropy, new_value = model.evaluate_sequence(obs, action, start, done)
    assert new_log_prob.shape == entropy.shape == (7, 5)
    torch.testing.assert_close(new_log_prob, log_prob)
    torch.testing.assert_close(new_value, value)
    total: torch.Tensor = new_value.sum()
    total.backward()  # type: ignore[no-untyped-call]
    assert all(p.grad is not None for p in model.core.parameters())


def test_done_resets_the_state() -> None:
    """After a done, a row acts as from the initial state; without one it remembers."""
    torch.manual_seed(1)
    model = RecurrentActorCritic(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2))
    obs = TensorDict({"obs": torch.randn(3, 2, 2)}, batch_size=[3, 2])
    action = torch.zeros(3, 2, dtype=torch.int64)
    done = torch.tensor([[False, False], [True, False], [False, False]])
    start = model.initial_state(2, device=CPU)
    _, _, value = model.evaluate_sequence(obs, action, start, done)
    fresh = model.value(obs[2])
    assert torch.allclose(value[2, 0], fresh[0])
    assert not torch.allclose(value[2, 1], fresh[1])


def test_state_specs_and_initial_state() -> None:
    """The GRU declares "h", the LSTM "h" and "c", each [num_layers, hidden_size] float32."""
    box = gym.spaces.Box(-1, 1, (3,))
    gru = RecurrentActorCritic(box, gym.spaces.Discrete(2), hidden_size=5, num_layers=2)
    lstm = RecurrentActorCritic(box, gym.spaces.Discrete(2), core="lstm", hidden_size=5)
    assert isinstance(gru, StatefulActorCritic)
    assert dict(gru.state_specs) == {"h": StateSpec((2, 5), torch.float32)}
    assert set(lstm.state_specs) == {"h", "c"}
    state = lstm.initial_state(4, device=CPU)
    assert state.batch_size == (4,)
    assert state["c"].shape == (4, 1, 5)
    assert not state["c"].any()
    out = gru.act(TensorDict({"obs": torch.zeros(4, 3)}, batch_size=[4]), deterministic=True)
    assert out["state", "h"].shape == (4, 2, 5)


def test_stateless_methods_read_the_initial_state() -> None:
    """act, evaluate and value are the step methods from the initial state."""
    torch.manual_seed(2)
    model = RecurrentActorCritic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (2,)))
    obs = TensorDict({"obs": torch.randn(4, 3)}, batch_size=[4])
    state = model.initial_state(4, device=CPU)
    out = model.act(obs, deterministic=True)
    assert torch.equal(out["action"], model.act_step(obs, state, deterministic=True)["action"])
    scored = model.evaluate(obs, out["action"])
    torch.testing.assert_close(scored["log_prob"], out["log_prob"])
    torch.testing.assert_close(model.value(obs), model.value_step(obs, state))


def test_normalizers_update_and_factory() -> None:
    """Observation statistics live inside the model; a factory rebuilds it by name."""
    factory = PolicyFactory(
        "typedrl.policies:RecurrentActorCritic",
        kwargs={"core": "lstm", "hidden_size": 6, "normalize_observations": True},
    )
    model = factory.build(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2))
    assert isinstance(model, RecurrentActorCritic)
    obs = TensorDict({"obs": torch.full((8, 2), 3.0)}, batch_size=[8])
    before = model.value(obs)
    model.update_normalizers(obs, dist=SingleProcess())
    assert not torch.allclose(before, model.value(obs))


def test_bad_arguments_are_config_errors() -> None:
    """A non-positive size or an unsupported action space is refused."""
    box = gym.spaces.Box(-1, 1, (2,))
    with pytest.raises(ConfigError, match="hidden_size and num_layers must be positive"):
        RecurrentActorCritic(box, gym.spaces.Discrete(2), hidden_size=0)
    with pytest.raises(ConfigError, match="supports Box and Discrete"):
        RecurrentActorCritic(box, gym.spaces.MultiDiscrete([2, 2]))


def test_not_a_stateful_actor_critic() -> None:
    """The MLP actor-critic has no rollout state."""
    assert not isinstance(
        MLPActorCritic(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2)), StatefulActorCritic
    )


IMAGE_SPACE = gym.spaces.Dict(
    {
        "image": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8),
        "direction": gym.spaces.Discrete(4),
        "x": gym.spaces.Box(-1, 1, (2,)),
    }
)


def test_images_go_through_a_cnn_before_the_core() -> None:
    """An image key gets its CNN (not normalised); a rollout re-run gives the collected values."""
    torch.manual_seed(2)
    model = RecurrentActorCritic(
        IMAGE_SPACE,
        gym.spaces.Discrete(3),
        hidden_size=8,
        image_features=16,
        normalize_observations=True,
    )
    assert [encoder.kind for encoder in model.encoding.images] == ["small"]
    # The image's CNN (16), the direction one-hot (4) and the Box key (2).
    assert model.core.input_size == 16 + 4 + 2
    assert model.obs_normalizers is not None
    assert sorted(model.obs_normalizers.keys()) == ["x"]
    obs = TensorDict(
        {
            "image": torch.randint(0, 256, (6, 4, 7, 7, 3), dtype=torch.uint8),
            "direction": torch.randint(0, 4, (6, 4)),
            "x": torch.randn(6, 4, 2),
        },
        batch_size=[6, 4],
    )
    done = torch.zeros(6, 4, dtype=torch.bool)
    done[1, 2] = done[3, 0] = True
    with torch.no_grad():
        start, action, log_prob, value = _rollout(model, obs, done)
    new_log_prob, _, new_value = model.evaluate_sequence(obs, action, start, done)
    torch.testing.assert_close(new_log_prob, log_prob)
    torch.testing.assert_close(new_value, value)
    total: torch.Tensor = new_log_prob.sum()
    total.backward()  # type: ignore[no-untyped-call]
    assert all(p.grad is not None for p in model.encoding.images.parameters())


def test_flatten_reads_image_bytes_as_features() -> None:
    """``encoder="flatten"`` builds no CNN: the 147 image bytes reach the core as they are."""
    model = RecurrentActorCritic(
        IMAGE_SPACE, gym.spaces.Discrete(3), hidden_size=8, encoder="flatten"
    )
    assert len(model.encoding.images) == 0
    assert model.core.input_size == 7 * 7 * 3 + 4 + 2
    with pytest.raises(ConfigError, match="encoder 'nature' needs an image observation key"):
        RecurrentActorCritic(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2), encoder="nature")
