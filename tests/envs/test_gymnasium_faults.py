"""A user's Gymnasium env's faults, as GymnasiumVecEnv and make report them: one line each."""

from typing import Any

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from tests.envs import faulty_envs
from tests.envs.faulty_envs import FAULT_STEP, FaultyEnv, LegacySeedsEnv, SmallSeedsEnv
from typedrl.envs import GymnasiumVecEnv, make
from typedrl.errors import ConfigError, EnvContractError, EnvError, NonFiniteError
from typedrl.protocols import VecEnv
from typedrl.seeding import derive_seed, env_seed

ACTION = torch.zeros(2, dtype=torch.int64)
SPEC = "tests.envs.faulty_envs"


def _sync(env_fn: Any, num_envs: int = 2) -> SyncVectorEnv:
    return SyncVectorEnv([env_fn] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP)


def _step_to_the_fault(env: VecEnv) -> None:
    env.reset(seed=0)
    for _ in range(FAULT_STEP):
        env.step(ACTION)


def _one_line(error: BaseException) -> str:
    message = str(error)
    assert "\n" not in message
    return message


def test_large_seeds_reach_every_row_within_32_bits() -> None:
    """A 63-bit seed is folded so that seed + i < 2**32 for every row; small seeds pass as given."""
    raw = _sync(LegacySeedsEnv, num_envs=4)
    env = GymnasiumVecEnv(raw)
    seed = derive_seed(0, "env")
    obs, _ = env.reset(seed=seed)
    expected = np.stack(
        [np.random.RandomState(env_seed(seed, rows=4) + i).uniform(-1, 1, 2) for i in range(4)]
    )
    np.testing.assert_array_equal(obs["obs"].numpy(), expected.astype(np.float32))
    env.reset(seed=2**32 - 4)  # the largest seed whose rows all fit, passed unchanged
    env.close()


def test_default_seed_is_folded_too() -> None:
    """The construction seed (a derived one, from the command line) is folded like any other."""
    rows = [LegacySeedsEnv() for _ in range(2)]
    seed = derive_seed(3, "eval_env", rank=1)
    env = GymnasiumVecEnv(_sync(iter(rows).__next__), default_seed=seed)
    env.reset()
    folded = env_seed(seed, rows=2)
    assert folded != seed
    assert [row.seeds for row in rows] == [[folded], [folded + 1]]
    env.close()


def test_a_seed_the_env_refuses_is_one_env_error_naming_the_env_and_seed() -> None:
    """An env whose reset refuses a 32-bit seed: EnvError with the env, the call, the cause."""
    env = GymnasiumVecEnv(_sync(SmallSeedsEnv), env_id=f"{SPEC}:small_seeds")
    with pytest.raises(EnvError) as caught:
        env.reset(seed=2**31)
    assert _one_line(caught.value) == (
        f"the env '{SPEC}:small_seeds' raised ValueError in reset(seed={2**31}): Seed must be "
        f"between 0 and 2**31 - 1, got {2**31}; run `typedrl check-env {SPEC}:small_seeds` "
        "for a report of every rule"
    )
    assert isinstance(caught.value.__cause__, ValueError)
    env.close()


def test_an_exception_in_step_is_one_env_error_with_the_cause_chained() -> None:
    """The env's own exception: its type and message on one line, the step, chained."""
    env = GymnasiumVecEnv(_sync(faulty_envs.raise_in_step), env_id=f"{SPEC}:raise_in_step")
    with pytest.raises(EnvError) as caught:
        _step_to_the_fault(env)
    assert _one_line(caught.value) == (
        f"the env '{SPEC}:raise_in_step' raised RuntimeError in step {FAULT_STEP}: physics "
        f"exploded at joint 3; run `typedrl check-env {SPEC}:raise_in_step` for a report of "
        "every rule"
    )
    assert isinstance(caught.value.__cause__, RuntimeError)
    env.close()


def test_an_exception_in_a_same_step_reset_names_the_step() -> None:
    """A reset that fails inside a Sync env's autoreset fails the step that ended the episode."""
    env = GymnasiumVecEnv(_sync(faulty_envs.raise_in_reset))
    env.reset(seed=0)
    env.step(ACTION)
    with pytest.raises(EnvError, match=r"^the env SyncVectorEnv raised RuntimeError in step 2: "):
        env.step(ACTION)
    env.close()


def test_an_exception_in_a_partial_reset_names_the_rows() -> None:
    """The adapter's own reset of ended rows (NEXT_STEP envs) names the rows and the step."""
    raw = SyncVectorEnv([faulty_envs.raise_in_reset] * 2, autoreset_mode=AutoresetMode.NEXT_STEP)
    env = GymnasiumVecEnv(raw)
    env.reset(seed=0)
    env.step(ACTION)
    with pytest.raises(EnvError, match=r"of rows \[0, 1\] after step 2: the simulator lost"):
        env.step(ACTION)
    env.close()


def test_nan_observations_are_one_non_finite_error_naming_key_row_and_step() -> None:
    """A NaN observation never reaches the policy: the step that returned it raises."""
    env = GymnasiumVecEnv(_sync(faulty_envs.nan_obs), env_id=f"{SPEC}:nan_obs")
    with pytest.raises(NonFiniteError) as caught:
        _step_to_the_fault(env)
    assert _one_line(caught.value) == (
        f"GymnasiumVecEnv.step (step {FAULT_STEP}): observation 'obs' of row 0 holds nan[0] "
        "(as float32), expected finite values for the env's single_observation_space "
        f"Box(-1.0, 1.0, (2,), float32) (non-finite rows: [0, 1]); run `typedrl check-env "
        f"{SPEC}:nan_obs` for a report of every rule"
    )
    env.close()


def test_infinite_rewards_are_one_non_finite_error_naming_row_and_step() -> None:
    """An infinite reward raises at its step, with the row and the value."""
    env = GymnasiumVecEnv(_sync(faulty_envs.inf_reward))
    with pytest.raises(NonFiniteError) as caught:
        _step_to_the_fault(env)
    assert _one_line(caught.value).startswith(
        f"GymnasiumVecEnv.step (step {FAULT_STEP}): reward of row 0 is inf, expected a finite "
        "number (non-finite rows: [0, 1]); check the env with typedrl.envs.check_vec_env"
    )
    env.close()


def test_a_reward_beyond_float32_is_named_with_its_value() -> None:
    """A finite float64 reward that overflows float32 names the value that came."""

    class Huge(FaultyEnv):
        def step(self, action: np.int64) -> Any:
            obs, _, terminated, truncated, info = super().step(action)
            return obs, 1e300, terminated, truncated, info

    env = GymnasiumVecEnv(_sync(Huge))
    env.reset(seed=0)
    with (
        pytest.warns(RuntimeWarning, match="overflow"),
        pytest.raises(NonFiniteError, match=r"reward of row 0 is 1e\+300 \(inf as float32\)"),
    ):
        env.step(ACTION)
    env.close()


def test_a_row_with_the_wrong_observation_shape_is_named_by_make() -> None:
    """A single-env factory's row shape is checked before Gymnasium batches it."""
    env = make(f"{SPEC}:wide_obs", num_envs=2, seed=0)
    with pytest.raises(EnvContractError) as caught:
        _step_to_the_fault(env)
    assert _one_line(caught.value) == (
        f"the env '{SPEC}:wide_obs' returned an observation of shape [3] in row 0 from step "
        f"{FAULT_STEP} of its episode, expected [2] (the shape of its observation_space "
        f"Box(-1.0, 1.0, (2,), float32)); run `typedrl check-env {SPEC}:wide_obs` for a report "
        "of every rule"
    )
    env.close()


@pytest.mark.parametrize(
    ("env_id", "kwargs", "error", "message"),
    [
        (
            f"{SPEC}:broken",
            {},
            EnvError,
            f"building env '{SPEC}:broken' raised FileNotFoundError: assets/robot.xml not found",
        ),
        (
            f"{SPEC}:bounded",
            {"max_episode_steps": -5},
            EnvError,
            f"building env '{SPEC}:bounded' with env_kwargs {{'max_episode_steps': -5}} raised "
            "ValueError: max_episode_steps must be positive, got -5; check --env-kwargs against "
            "the env's parameters",
        ),
        (
            "CartPole-v1",
            {"max_episode_steps": -5},
            EnvError,
            "building env 'CartPole-v1' with env_kwargs {'max_episode_steps': -5} raised "
            "ValueError: Expect the `max_episode_steps` to be positive, actually: -5; check "
            "--env-kwargs against the env's parameters",
        ),
        (
            "CartPole-v1",
            {"gravity": 9.8},
            ConfigError,
            "building env 'CartPole-v1' with env_kwargs {'gravity': 9.8} raised TypeError: ",
        ),
    ],
)
def test_an_env_that_cannot_be_built_is_one_line(
    env_id: str, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    """A factory or constructor that raises: the env, its kwargs, the exception, the fix."""
    with pytest.raises(error) as caught:
        make(env_id, num_envs=2, env_kwargs=kwargs)
    assert _one_line(caught.value).startswith(message)
    assert caught.value.__cause__ is not None


def test_a_user_typedrl_error_inside_the_env_passes_through() -> None:
    """A TypedRLError the env raises itself is not wrapped in an EnvError."""

    class Strict(FaultyEnv):
        def step(self, action: np.int64) -> Any:
            raise ConfigError("my env's own message")

    env = GymnasiumVecEnv(_sync(Strict))
    env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"^my env's own message$"):
        env.step(ACTION)
    env.close()


def test_an_env_without_faults_steps_on() -> None:
    """The checks leave a well-behaved env alone, through episode ends."""
    env = make(f"{SPEC}:bounded", num_envs=2, seed=derive_seed(0, "env"))
    env.reset()
    rewards = [env.step(ACTION).reward.tolist() for _ in range(20)]
    assert rewards == [[1.0, 1.0]] * 20
    env.close()
