"""The env checker's seeding.range rule: reset accepts every seed a training run passes."""

from typing import Any

from gymnasium.vector import AutoresetMode, SyncVectorEnv

from tests.envs.faulty_envs import LegacySeedsEnv, SmallSeedsEnv
from typedrl.envs import GymnasiumVecEnv, check_vec_env
from typedrl.seeding import ENV_SEED_LIMIT, SEED_LIMIT
from typedrl.testing import CountingVecEnv, VecEnvWrapper

FAST: dict[str, Any] = {"num_steps": 4, "max_examples": 2}


def _gymnasium(env_fn: Any) -> GymnasiumVecEnv:
    raw = SyncVectorEnv([env_fn] * 3, autoreset_mode=AutoresetMode.SAME_STEP)
    return GymnasiumVecEnv(raw, env_id="my_envs:make")


def test_an_env_that_refuses_32_bit_seeds_is_one_violation() -> None:
    """Seeds from 2**31 on refused: one seeding.range line naming the seed and the range."""
    report = check_vec_env(_gymnasium(SmallSeedsEnv), **FAST)
    assert report.failed_rules == ("seeding.range",)
    (violation,) = report.violations
    assert "\n" not in violation.message
    assert violation.message.startswith(
        f"reset(seed={ENV_SEED_LIMIT - 3}) raised EnvError: the env 'my_envs:make' raised "
        "ValueError"
    )
    assert "Seed must be between 0 and 2**31 - 1" in violation.message
    assert "each row's seed is below 2**32" in violation.message


def test_an_env_that_takes_32_bit_seeds_passes() -> None:
    """NumPy's legacy RandomState, as dm_control seeds it, takes every seed the adapter passes."""
    report = check_vec_env(_gymnasium(LegacySeedsEnv), **FAST)
    assert report.ok, str(report)
    assert "seeding.range" in report.checks_run


class _SeedLog(VecEnvWrapper):
    """Records the seeds of every reset."""

    def __init__(self, env: CountingVecEnv) -> None:
        super().__init__(env)
        self.seeds: list[int | None] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.seeds.append(seed)
        return super().reset(seed=seed, options=options)


def test_the_rule_resets_with_the_largest_derived_and_32_bit_seeds() -> None:
    """A torch env gets 2**63 - 1 and 2**32 - num_envs, right after the first reset."""
    env = _SeedLog(CountingVecEnv(num_envs=2, terminate_after=3))
    assert check_vec_env(env, seed=5, **FAST).ok
    assert env.seeds[:3] == [5, SEED_LIMIT - 1, ENV_SEED_LIMIT - 2]
