"""The public entry points: check a VecEnv or a DifferentiableVecEnv against its contract."""

from typedrl._validation import describe, non_negative_float, non_negative_int, positive_int
from typedrl.envs._checker._gradients import FiniteDifferenceOptions, check_gradients
from typedrl.envs._checker._report import CheckReport, Recorder
from typedrl.envs._checker._rollouts import run_rollouts
from typedrl.envs._checker._seeding import check_seed_range
from typedrl.envs._checker._vec import check_reset, inspect_env
from typedrl.errors import ConfigError

__all__ = ["check_differentiable_vec_env", "check_vec_env"]


def _validate(
    owner: str,
    seed: object,
    num_steps: object,
    max_examples: object,
    min_episode_length: object,
) -> None:
    non_negative_int(owner, "seed", seed)
    positive_int(owner, "num_steps", num_steps)
    positive_int(owner, "max_examples", max_examples)
    if min_episode_length is not None:
        positive_int(owner, "min_episode_length", min_episode_length)


def _check(
    env: object,
    *,
    differentiable: bool,
    seed: int,
    num_steps: int,
    max_examples: int,
    min_episode_length: int | None,
    finite_differences: FiniteDifferenceOptions | None,
) -> CheckReport:
    rec = Recorder()
    ctx = inspect_env(rec, env, differentiable=differentiable)
    if ctx is None:
        return rec.report()
    check_reset(rec, ctx, seed)
    if not rec.failed("reset.returns"):
        check_seed_range(rec, ctx)
    if ctx.sampler is None:
        return rec.report()
    run_rollouts(
        rec,
        ctx,
        ctx.sampler,
        seed=seed,
        num_steps=num_steps,
        max_examples=max_examples,
        min_episode_length=min_episode_length,
    )
    if finite_differences is not None:
        check_gradients(
            rec,
            ctx,
            ctx.sampler,
            seed=seed,
            num_steps=num_steps,
            finite_differences=finite_differences,
        )
    return rec.report()


def check_vec_env(
    env: object,
    *,
    seed: int = 0,
    num_steps: int = 32,
    max_examples: int = 10,
    min_episode_length: int | None = None,
) -> CheckReport:
    """Check an env against the :class:`~typedrl.protocols.VecEnv` contract.

    The checker reads the env's members, resets it with ``seed`` and with the
    largest seeds a training run may pass (``2**63 - 1``, and ``2**32 -
    num_envs``, the largest a Gymnasium env gets: rule ``seeding.range``), then runs
    ``max_examples`` rollouts of ``num_steps`` steps whose reset seeds and
    action sequences hypothesis draws from ``single_action_space`` (Box
    actions within the bounds, edges included; integer codes otherwise). It
    checks every output of every step, then replays each rollout from the same
    seed to check determinism. Every rule is checked on its own: an exception
    raised inside one check (by the env or by the check) becomes a violation
    of that rule, never an exception out of the checker. The run is
    deterministic for a given ``seed``. The env is left open, in whatever
    state the last rollout left it.

    The rule ids are the keys of :data:`CHECK_RULES`; the guide *Check your
    env* explains each with its typical cause and fix.

    Args:
        env: The env under test; anything is accepted and reported on.
        seed: Seeds the first reset and hypothesis's draws.
        num_steps: Steps per rollout; long enough for episodes to end, so that
            the terminal-observation and autoreset rules can be evaluated.
        max_examples: Rollouts drawn by hypothesis (fewer when the action
            space is too small to yield that many distinct sequences).
        min_episode_length: Opt-in autoreset rule: when set, an episode
            shorter than this many steps is a violation (use ``2`` if no episode
            of your env can end on its first step; a row that ends again right
            after its autoreset is the classic off-by-one of a late reset).

    Returns:
        The report: :attr:`CheckReport.ok`, the violations and the rules run.

    Raises:
        ConfigError: If an option is invalid (the env itself never raises).

    Example:
        >>> from typedrl.testing import CountingVecEnv
        >>> report = check_vec_env(CountingVecEnv(num_envs=2, truncate_after=3), num_steps=8)
        >>> report.ok, "final_obs.terminal" in report.checks_run
        (True, True)
        >>> report.raise_if_failed()
    """
    _validate("check_vec_env", seed, num_steps, max_examples, min_episode_length)
    return _check(
        env,
        differentiable=False,
        seed=seed,
        num_steps=num_steps,
        max_examples=max_examples,
        min_episode_length=min_episode_length,
        finite_differences=None,
    )


def check_differentiable_vec_env(
    env: object,
    *,
    seed: int = 0,
    num_steps: int = 32,
    max_examples: int = 10,
    min_episode_length: int | None = None,
    fd_horizon: int = 3,
    fd_entries: int = 4,
    fd_eps: float | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> CheckReport:
    """Check an env against the :class:`~typedrl.protocols.DifferentiableVecEnv` contract.

    Runs every rule of :func:`check_vec_env`, then the gradient rules: the
    reward and the next observation have a gradient w.r.t. the action; rows
    reset inside ``step`` carry none w.r.t. earlier actions; ``detach_state()``
    returns the last observation unchanged and cuts the graph; autograd agrees
    with central finite differences of the reward summed over ``fd_horizon``
    steps after a seeded reset; ``observation_normalize_mask``, if present, is
    ``torch.bool`` ``[obs_dim]``.

    The env is used as given. Finite differences are far more precise in
    float64: build the env in float64 for this check if it can be (its action
    space dtype and reward dtype then select the tight default tolerances).
    Probes whose perturbation moves an episode end are skipped, since the
    summed reward is not smooth there. Actions for these rules are drawn from
    the middle half of the action bounds, so a perturbation never leaves them.

    Args:
        env: The env under test; anything is accepted and reported on.
        seed: As for :func:`check_vec_env`; also seeds the gradient probes.
        num_steps: As for :func:`check_vec_env`; also bounds the search for
            episode ends in the autoreset gradient rule.
        max_examples: As for :func:`check_vec_env`.
        min_episode_length: As for :func:`check_vec_env`.
        fd_horizon: Steps after reset whose summed reward is differentiated.
        fd_entries: Action numbers probed by finite differences.
        fd_eps: Perturbation; by default ``1e-6`` (float64) or ``1e-3``
            (float32) times the half-width of the action bounds.
        rtol: Relative tolerance; default ``1e-5`` (float64) or ``5e-2``.
        atol: Absolute tolerance; default ``1e-8`` (float64) or ``5e-3``.

    Returns:
        The report, as for :func:`check_vec_env`.

    Raises:
        ConfigError: If an option is invalid.

    Example:
        >>> from typedrl.testing import QuadraticEnv
        >>> env = QuadraticEnv(num_envs=2, horizon=4, dtype="float64")
        >>> check_differentiable_vec_env(env, num_steps=8, max_examples=2).ok
        True
    """
    owner = "check_differentiable_vec_env"
    _validate(owner, seed, num_steps, max_examples, min_episode_length)
    positive_int(owner, "fd_horizon", fd_horizon)
    positive_int(owner, "fd_entries", fd_entries)
    for name, value in (("fd_eps", fd_eps), ("rtol", rtol), ("atol", atol)):
        if value is not None:
            non_negative_float(owner, name, value)
    if fd_eps is not None and fd_eps == 0:
        raise ConfigError(f"{owner}.fd_eps must be > 0, got {describe(fd_eps)}")
    options = FiniteDifferenceOptions(
        horizon=fd_horizon, entries=fd_entries, eps=fd_eps, rtol=rtol, atol=atol
    )
    return _check(
        env,
        differentiable=True,
        seed=seed,
        num_steps=num_steps,
        max_examples=max_examples,
        min_episode_length=min_episode_length,
        finite_differences=options,
    )
