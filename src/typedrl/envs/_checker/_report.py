"""What the env checkers return: violations, the report, and the rule table."""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, final

from typedrl._validation import describe
from typedrl.errors import ConfigError, EnvContractError

__all__ = ["CHECK_RULES", "CheckReport", "Violation"]

CHECK_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "protocol": "the env is a VecEnv (DifferentiableVecEnv) and provides_final_obs is a bool",
        "num_envs": "num_envs is a positive int",
        "device": "device is a torch.device",
        "spaces": "observation and action spaces are gymnasium spaces of supported kinds",
        "reset.returns": "reset(seed=...) returns a (TensorDict, dict) pair",
        "obs.batch_size": "every observation is a TensorDict with batch_size [num_envs]",
        "obs.device": "every observation leaf is on env.device",
        "obs.spec": "observation keys, shapes and dtypes match single_observation_space",
        "obs.finite": "floating-point observation leaves hold no NaN or infinity",
        "step.returns": "step(action) returns a StepResult for a valid action",
        "step.reward": "reward is a floating-point tensor [num_envs]",
        "step.flags": "terminated and truncated are torch.bool tensors [num_envs]",
        "step.device": "reward, terminated, truncated and valid are on env.device",
        "step.finite": "reward holds no NaN or infinity; step raises no NonFiniteError",
        "step.info": "info is a dict",
        "step.valid": "StepResult.valid is a torch.bool tensor [num_envs]",
        "final_obs.present": "provides_final_obs: final_obs is shaped like obs on every step",
        "final_obs.continuing": "rows that did not end: final_obs equals obs",
        "final_obs.terminal": "ended rows: final_obs differs from the reset obs at least once",
        "final_obs.absent": "not provides_final_obs: final_obs is None",
        "autoreset.min_length": "opt-in: no episode is shorter than min_episode_length steps",
        "seeding": "reset(seed=s) and the same actions reproduce every output exactly",
        "seeding.range": "reset accepts the largest seeds a run passes (2**63 - 1, 2**32 - n)",
        "grad.reward": "reward has a nonzero gradient w.r.t. the action",
        "grad.obs": "the next observation has a nonzero gradient w.r.t. the action",
        "grad.reset": "rows reset by step carry no gradient w.r.t. earlier actions",
        "detach.values": "detach_state() returns the last observation, value for value, graph-free",
        "detach.cut": "after detach_state(), outputs have no gradient w.r.t. earlier actions",
        "grad.finite_difference": "autograd agrees with central finite differences",
        "normalize_mask": "observation_normalize_mask, if present, is torch.bool [obs_dim]",
    }
)
"""Every rule id the checkers report, in report order, with a one-line summary."""


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    """One broken rule, as found by :func:`check_vec_env` or :func:`check_differentiable_vec_env`.

    Example:
        >>> violation = Violation(
        ...     rule="step.reward", message="expected float [4], got torch.int64 [4]", step=0
        ... )
        >>> print(violation)
        [step.reward] step 0: expected float [4], got torch.int64 [4]
    """

    rule: str
    """The rule's stable id, a key of :data:`CHECK_RULES`."""

    message: str
    """What was expected and what came."""

    step: int | None = None
    """Index of the ``step`` call since the last reset (0 = first step); ``None`` otherwise."""

    key: str | None = None
    """The observation key or the output concerned, where one is."""

    def __post_init__(self) -> None:
        if self.rule not in CHECK_RULES:
            raise ConfigError(
                f"Violation.rule must be one of {sorted(CHECK_RULES)}, got {describe(self.rule)}"
            )
        if self.step is not None and self.step < 0:
            raise ConfigError(f"Violation.step must be >= 0, got {describe(self.step)}")

    def __str__(self) -> str:
        where = [f"step {self.step}"] if self.step is not None else []
        if self.key is not None:
            where.append(f"key {self.key!r}")
        location = f" {', '.join(where)}" if where else ""
        return f"[{self.rule}]{location}: {self.message}"


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class CheckReport:
    """The outcome of an env check: every violation found and every rule evaluated.

    A rule appears in :attr:`checks_run` once the checker evaluated it at least
    once; a rule whose preconditions never arose (no episode ended, so no
    terminal observation could be compared) or whose prerequisites failed is
    absent.

    Example:
        >>> report = CheckReport(violations=(), checks_run=("num_envs", "device"))
        >>> report.ok, str(report)
        (True, 'env check passed: 2 rules checked, no violations')
    """

    violations: tuple[Violation, ...]
    """Every violation found, ordered as :data:`CHECK_RULES`."""

    checks_run: tuple[str, ...]
    """Ids of the rules that were evaluated, ordered as :data:`CHECK_RULES`."""

    def __post_init__(self) -> None:
        unknown = [rule for rule in self.checks_run if rule not in CHECK_RULES]
        if unknown:
            raise ConfigError(
                f"CheckReport.checks_run must hold rule ids from CHECK_RULES, "
                f"got {describe(self.checks_run)}"
            )

    @property
    def ok(self) -> bool:
        """``True`` when no rule was violated."""
        return not self.violations

    @property
    def failed_rules(self) -> tuple[str, ...]:
        """Ids of the violated rules, each once, ordered as :data:`CHECK_RULES`."""
        return tuple(dict.fromkeys(v.rule for v in self.violations))

    def __str__(self) -> str:
        checked = f"{len(self.checks_run)} rules checked"
        if self.ok:
            return f"env check passed: {checked}, no violations"
        lines = [f"env check failed: {len(self.violations)} violation(s), {checked}"]
        lines.extend(f"  {violation}" for violation in self.violations)
        return "\n".join(lines)

    def raise_if_failed(self) -> None:
        """Raise :class:`~typedrl.errors.EnvContractError` listing every violation, if any.

        Raises:
            EnvContractError: If :attr:`ok` is ``False``.
        """
        if not self.ok:
            raise EnvContractError(str(self))


_RULE_ORDER: Final[dict[str, int]] = {rule: index for index, rule in enumerate(CHECK_RULES)}


@final
class Recorder:
    """Collects violations while the checks run, one entry per rule and key.

    The first violation of each ``(rule, key)`` pair is kept; repeats (the same
    problem on later steps) are counted and mentioned in its message, so a
    broken dtype does not fill the report with one line per step.
    """

    def __init__(self) -> None:
        self._run: set[str] = set()
        self._first: dict[tuple[str, str | None], Violation] = {}
        self._repeats: dict[tuple[str, str | None], int] = {}

    def ran(self, rule: str) -> None:
        """Note that ``rule`` was evaluated (an unknown id fails the report's own check)."""
        self._run.add(rule)

    def fail(
        self, rule: str, message: str, *, step: int | None = None, key: str | None = None
    ) -> None:
        """Record a violation of ``rule``."""
        self.ran(rule)
        slot = (rule, key)
        if slot in self._first:
            self._repeats[slot] = self._repeats.get(slot, 0) + 1
        else:
            self._first[slot] = Violation(rule=rule, message=message, step=step, key=key)

    def failed(self, rule: str) -> bool:
        """Whether ``rule`` has a violation already."""
        return any(slot[0] == rule for slot in self._first)

    @contextmanager
    def guard(
        self,
        rule: str,
        *,
        what: str = "the check",
        step: int | None = None,
        key: str | None = None,
        mark_run: bool = True,
    ) -> Iterator[None]:
        """Run a block as a check of ``rule``: any exception becomes a violation of it.

        With ``mark_run=False`` the rule counts as run only if the block calls
        :meth:`ran` or :meth:`fail` (or raises): for checks whose preconditions
        may never arise.
        """
        if mark_run:
            self.ran(rule)
        try:
            yield
        except Exception as exc:  # every failure, the env's or the check's, lands in the report
            self.fail(rule, f"{what} raised {type(exc).__name__}: {exc}", step=step, key=key)

    def report(self) -> CheckReport:
        """Freeze what was recorded into a :class:`CheckReport`."""
        violations = []
        for slot, first in self._first.items():
            repeats = self._repeats.get(slot, 0)
            violations.append(
                Violation(
                    rule=first.rule,
                    message=f"{first.message} (and {repeats} more time(s))",
                    step=first.step,
                    key=first.key,
                )
                if repeats
                else first
            )
        violations.sort(key=lambda v: _RULE_ORDER[v.rule])
        checks_run = tuple(sorted(self._run, key=_RULE_ORDER.__getitem__))
        return CheckReport(violations=tuple(violations), checks_run=checks_run)
