"""Tests for typedrl.envs._factory and _workers: envs and wrappers by name, signal-safe workers."""

import signal
import subprocess
import time

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AsyncVectorEnv

from typedrl.envs import GymnasiumVecEnv, Pendulum, make
from typedrl.envs._factory import resolve_env_factory, resolve_wrapper
from typedrl.errors import ConfigError


def test_wrappers_by_name() -> None:
    """A Gymnasium wrapper's name or module:Class; anything else is one ConfigError."""
    by_name: object = resolve_wrapper("TimeLimit(max_episode_steps=10)").wrapper
    by_path: object = resolve_wrapper("gymnasium.wrappers:ClipReward").wrapper
    dotted: object = resolve_wrapper("gymnasium.wrappers.TimeAwareObservation").wrapper
    assert by_name is gym.wrappers.TimeLimit
    assert by_path is gym.wrappers.ClipReward
    assert dotted is gym.wrappers.TimeAwareObservation
    with pytest.raises(ConfigError, match=r"gymnasium\.wrappers has no 'Nope'"):
        resolve_wrapper("Nope")
    with pytest.raises(ConfigError, match="is not callable"):
        resolve_wrapper("tests.cli.factories:NOT_CALLABLE")
    with pytest.raises(ConfigError, match="cannot import module 'no_such_module_here'"):
        resolve_wrapper("no_such_module_here:Wrapper")


def test_wrappers_with_arguments() -> None:
    """A spec's keyword arguments reach the wrapper; the signature is checked before any env."""
    frames = resolve_wrapper("FrameStackObservation(stack_size=3, padding_type='zero')")
    assert frames.kwargs == {"stack_size": 3, "padding_type": "zero"}
    env = make(
        "CartPole-v1", num_envs=2, seed=0, wrappers=[frames.spec, "ClipReward(max_reward=0.5)"]
    )
    obs, _ = env.reset()
    assert obs["obs"].shape == (2, 3, 4)
    _, reward, _, _, _ = env.step(torch.zeros(2, dtype=torch.int64))
    assert torch.all(reward == 0.5)
    env.close()
    with pytest.raises(ConfigError, match=r"missing a required argument: 'stack_size'"):
        resolve_wrapper("FrameStackObservation")
    with pytest.raises(
        ConfigError, match=r"unexpected keyword argument 'size'.*takes \['stack_size'"
    ):
        resolve_wrapper("FrameStackObservation(size=3)")


def test_gymnasiums_module_and_env_id_form_is_left_to_gymnasium() -> None:
    """module:EnvId where the import registers EnvId is not a factory."""
    assert resolve_env_factory("gymnasium.envs:CartPole-v1") is None
    env = make("gymnasium.envs:CartPole-v1", num_envs=2, seed=0)
    assert env.reset()[0]["obs"].shape == (2, 4)
    env.close()


def test_make_builds_every_kind_of_factory() -> None:
    """Single-env factories (sync, async, wrapped), typedrl and Gymnasium vector factories."""
    single = make(
        "tests.cli.factories:cartpole",
        num_envs=3,
        seed=0,
        env_kwargs={"max_episode_steps": 5},
        wrappers=["tests.cli.factories:HalveReward"],
    )
    single.reset()
    for _ in range(4):
        single.step(torch.zeros(3, dtype=torch.int64))
    _, reward, _, truncated, _ = single.step(torch.zeros(3, dtype=torch.int64))
    assert torch.all(reward == 0.5)
    assert torch.all(truncated)  # the env kwargs reached the factory
    single.close()
    builtin = make("tests.cli.factories:builtin_cartpole", num_envs=4, seed=1)
    assert type(builtin).__name__ == "CartPole"
    assert builtin.num_envs == 4
    builtin.close()
    adapted = make("tests.cli.factories:gymnasium_vector", num_envs=2)
    assert isinstance(adapted, GymnasiumVecEnv)
    adapted.close()


@pytest.mark.parametrize(
    "spec",
    [
        "typedrl.envs:Pendulum",
        "tests.envs._unpacking_factories:pendulum",
        "tests.envs._unpacking_factories:pendulum_te",
    ],
)
def test_env_options_reach_a_factory_that_unpacks_them(spec: str) -> None:
    """A factory taking ``**options: Unpack[EnvOptions]`` gets the run's seed and device."""
    env = make(spec, num_envs=2, seed=7, device="cpu")
    twin = Pendulum(num_envs=2, seed=7)
    obs, _ = env.reset()
    twin_obs, _ = twin.reset()
    assert torch.equal(obs["obs"], twin_obs["obs"])  # the unseeded reset used seed 7
    other, _ = Pendulum(num_envs=2, seed=8).reset()
    assert not torch.equal(obs["obs"], other["obs"])


def test_float_dtype_reaches_a_vector_factory_or_is_refused() -> None:
    """float64 is passed to a factory that takes float_dtype, and refused for a float32 VecEnv."""
    env = make("tests.cli.factories:builtin_pendulum", num_envs=2, float_dtype="float64")
    assert env.single_observation_space.dtype == np.float64
    env.close()
    with pytest.raises(ConfigError, match=r"\['float32'\] observations, expected float_dtype="):
        make("tests.cli.factories:builtin_cartpole", num_envs=2, float_dtype="float64")


def _async(env: object) -> AsyncVectorEnv:
    assert isinstance(env, GymnasiumVecEnv)
    raw = env.env
    assert isinstance(raw, AsyncVectorEnv)
    return raw


def test_async_workers_ignore_group_signals_but_not_their_parent() -> None:
    """SIGINT and a foreign SIGTERM leave the workers running; the main process can end them."""
    env = make("CartPole-v1", num_envs=2, seed=0, vectorization="async")
    env.reset()
    raw = _async(env)
    for pid in [process.pid for process in raw.processes]:
        subprocess.run(["kill", "-INT", str(pid)], check=True)
        subprocess.run(["kill", "-TERM", str(pid)], check=True)
    time.sleep(0.5)
    # The workers are still there: the step goes through.
    _, reward, _, _, _ = env.step(torch.zeros(2, dtype=torch.int64))
    assert reward.shape == (2,)
    # A SIGTERM from their parent ends them (sent while their pipes are still open, so
    # that no worker can end first on the end of file a close would give it).
    for process in raw.processes:
        process.terminate()
    for process in raw.processes:
        process.join(timeout=10)
    assert [process.exitcode for process in raw.processes] == [128 + signal.SIGTERM] * 2
    # A forced close of the ended workers returns instead of hanging.
    raw.close(terminate=True)


def test_async_envs_leave_this_process_signals_alone() -> None:
    """Gymnasium builds one env in the main process too: its handlers and mask stay as they were."""
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    env = make("CartPole-v1", num_envs=2, seed=0, vectorization="async")
    env.close()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == mask
