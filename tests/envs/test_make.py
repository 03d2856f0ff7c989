"""Tests for typedrl.envs._make.make."""

import gymnasium as gym
import pytest
import torch
from gymnasium.vector import AutoresetMode

from typedrl.envs._gymnasium import GymnasiumVecEnv
from typedrl.envs._make import make
from typedrl.errors import ConfigError


@pytest.mark.parametrize("vectorization", ["sync", "async", "vector_entry_point"])
def test_make_wraps_each_vectorization(vectorization: str) -> None:
    """Every vectorization yields a working adapter; sync/async use same-step autoreset."""
    env = make("CartPole-v1", num_envs=2, seed=0, vectorization=vectorization)  # type: ignore[arg-type]
    try:
        assert isinstance(env, GymnasiumVecEnv)
        obs, _ = env.reset()
        assert obs["obs"].shape == (2, 4)
        result = env.step(torch.zeros(2, dtype=torch.int64))
        assert result.reward.tolist() == [1.0, 1.0]
        if vectorization == "vector_entry_point":
            assert env.emits_ghost_steps
        else:
            assert env.autoreset_mode is AutoresetMode.SAME_STEP
    finally:
        env.close()


def test_make_applies_wrappers_to_single_envs() -> None:
    """Wrappers wrap each single env, in order."""
    env = make(
        "Pendulum-v1",
        num_envs=2,
        wrappers=[lambda e: gym.wrappers.TransformReward(e, lambda r: 0.0)],
    )
    env.reset(seed=0)
    assert env.step(torch.zeros(2, 1)).reward.tolist() == [0.0, 0.0]
    env.close()


def test_make_passes_env_kwargs() -> None:
    """env_kwargs reach the env constructor."""
    env = make("Pendulum-v1", num_envs=1, env_kwargs={"g": 3.0})
    assert isinstance(env, GymnasiumVecEnv)
    assert env.env.unwrapped.envs[0].unwrapped.g == 3.0  # type: ignore[attr-defined]
    env.close()


def test_make_seed_reproduces() -> None:
    """The same seed gives the same first observation."""
    first = make("Pendulum-v1", num_envs=2, seed=5)
    second = make("Pendulum-v1", num_envs=2, seed=5)
    assert torch.equal(first.reset()[0]["obs"], second.reset()[0]["obs"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_envs": 0}, "num_envs must be a positive int"),
        (
            {"num_envs": 1, "vectorization": "vector_entry_point", "wrappers": [lambda e: e]},
            "wrappers apply to single envs",
        ),
    ],
)
def test_make_rejects_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    """Bad arguments raise ConfigError naming the problem."""
    with pytest.raises(ConfigError, match=message):
        make("CartPole-v1", **kwargs)  # type: ignore[arg-type]


@pytest.mark.usefixtures("without_runtime_checks")
def test_builtin_dtype_from_env_kwargs_is_checked() -> None:
    """An env_kwargs dtype (untyped, from YAML) other than float32/float64 raises ConfigError.

    Without the suite's runtime type checks, as in production: the env's own check answers.
    """
    with pytest.raises(
        ConfigError, match=r"Pendulum.dtype must be one of \['float32', 'float64'\]"
    ):
        make("typedrl/Pendulum-v0", num_envs=1, env_kwargs={"dtype": "float16"})


def test_built_in_envs_keep_their_own_action_clipping() -> None:
    """make() leaves the built-ins' clipping on unless told otherwise (torque within [-2, 2])."""
    import torch

    from typedrl.envs import make

    big = torch.full((2, 1), 100.0)
    clipped = make("typedrl/Pendulum-v0", num_envs=2, seed=0)
    unclipped = make("typedrl/Pendulum-v0", num_envs=2, seed=0, clip_actions=False)
    at_bound = make("typedrl/Pendulum-v0", num_envs=2, seed=0)
    for env in (clipped, unclipped, at_bound):
        env.reset(seed=0)
    reward = clipped.step(big).reward
    torch.testing.assert_close(reward, at_bound.step(torch.full((2, 1), 2.0)).reward)
    assert bool((unclipped.step(big).reward < reward).all())


@pytest.mark.parametrize(
    ("env_id", "hint"),
    [
        ("NoSuchEnv-v9", "Environment `NoSuchEnv` doesn't exist"),
        ("CartPole-v2", r"It provides versioned environments: \[ `v0`, `v1` \]"),
        ("CartPole-V1", r"Did you mean: `CartPole`\?; closest registered ids: \['CartPole-v1'"),
    ],
)
def test_make_names_unknown_gymnasium_ids(env_id: str, hint: str) -> None:
    """A misspelt Gymnasium id is a ConfigError passing Gymnasium's hint on, with close ids."""
    with pytest.raises(ConfigError, match=rf"unknown env id '{env_id}': .*{hint}"):
        make(env_id, num_envs=1)


@pytest.mark.parametrize(
    ("env_id", "module"),
    [
        ("ALE/Pong-v5", "ale_py"),
        ("dm_control/cartpole-swingup-v0", "shimmy"),
        ("MiniGrid-Empty-5x5-v0", "minigrid"),
        ("BabyAI-GoToRedBall-v0", "minigrid"),
        ("FetchReach-v4", "gymnasium_robotics"),
        ("HandManipulateBlock-v1", "gymnasium_robotics"),
        ("highway-fast-v0", "highway_env"),
    ],
)
def test_ids_a_package_registers_name_its_module(env_id: str, module: str) -> None:
    """An id of a known package's namespace or name is one line with the module:EnvId form."""
    with pytest.raises(ConfigError) as caught:
        make(env_id, num_envs=1)
    message = str(caught.value)
    assert message.startswith(f"unknown env id {env_id!r}: {module} registers it when imported")
    assert f"name it as {module}:{env_id} (Gymnasium's module:EnvId form" in message
    assert "\n" not in message


def test_an_unknown_namespace_gets_the_general_form() -> None:
    """A namespace nobody registered: name the module that registers it, as module:NS/Name-vN."""
    with pytest.raises(
        ConfigError,
        match=r"^unknown env id 'Acme/Robot-v2': no package registered the namespace 'Acme': "
        r"name the module that registers it, as <module>:Acme/Robot-v2",
    ):
        make("Acme/Robot-v2", num_envs=1)


def test_built_in_envs_take_their_dtype_from_env_kwargs() -> None:
    """env_kwargs={"dtype": "float64"} builds a float64 built-in; a contradiction is refused."""
    env = make("typedrl/Pendulum-v0", num_envs=2, env_kwargs={"dtype": "float64"})
    assert env.reset(seed=0)[0]["obs"].dtype == torch.float64
    env.close()
    with pytest.raises(ConfigError, match="float_dtype='float64' and env_kwargs dtype="):
        make(
            "typedrl/Pendulum-v0",
            num_envs=2,
            float_dtype="float64",
            env_kwargs={"dtype": "float32"},
        )
