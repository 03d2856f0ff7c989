"""What a trainer checkpoints: one typed value of live, checkpointable objects."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, final, runtime_checkable

import torch

from typedrl._validation import describe
from typedrl.errors import ConfigError
from typedrl.protocols import SupportsStateDict

__all__ = [
    "Counters",
    "GeneratorState",
    "Progress",
    "SupportsScheduleRestart",
    "SupportsSharedState",
    "TrainerState",
]

_GROUPS = ("modules", "optimizers", "schedulers", "rank_local")


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class TrainerState:
    """The objects a trainer's checkpoint holds, by name, grouped by how they are saved.

    Every value implements :class:`~typedrl.protocols.SupportsStateDict`. The
    trainer core saves their ``state_dict()`` into one
    :class:`~typedrl.checkpoint.Checkpoint` and restores them with
    ``load_state_dict`` on resume, naming the object in any error. A trainer
    returns the same names every time; a new kind of state (a critic, a
    scheduler, a counter object) is one more entry, not a new code path.

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(2, 1)
        >>> state = TrainerState(
        ...     modules={"policy": model},
        ...     optimizers={"policy": torch.optim.SGD(model.parameters(), lr=0.1)},
        ... )
        >>> sorted(state.modules), dict(state.schedulers)
        (['policy'], {})
    """

    modules: Mapping[str, SupportsStateDict]
    """Shared across ranks (identical on every rank), saved once from rank 0: networks,
    observation normalisers and counter objects. The policy is ``"policy"``."""
    optimizers: Mapping[str, SupportsStateDict] = field(default_factory=dict)
    """Optimizers by name (shared across ranks)."""
    schedulers: Mapping[str, SupportsStateDict] = field(default_factory=dict)
    """Learning-rate schedulers by name (shared across ranks)."""
    rank_local: Mapping[str, SupportsStateDict] = field(default_factory=dict)
    """State that differs between ranks (envs, collectors, samplers), saved for every
    rank under ``"<name>.rank<r>"`` and restored on the rank that saved it.

    A resume on another number of ranks restores none of it: an object that
    also implements :class:`SupportsSharedState` gets the rank-independent part
    of rank 0's saved state, a :class:`GeneratorState` is re-seeded, and the rest
    (collectors, hence envs) starts afresh."""

    def __post_init__(self) -> None:
        for group in _GROUPS:
            entries: Mapping[str, SupportsStateDict] = getattr(self, group)
            for name in entries:
                if not name or "." in name:
                    raise ConfigError(
                        f"TrainerState.{group} keys must be non-empty str without '.', "
                        f"got {describe(name)}"
                    )
            object.__setattr__(self, group, MappingProxyType(dict(entries)))
        if "policy" not in self.modules:
            raise ConfigError(
                "TrainerState.modules must hold the policy under 'policy', "
                f"got {sorted(self.modules)}"
            )


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """Where a run stands: the trainer core's counters and best score, saved beside its state.

    Example:
        >>> Progress(iteration=3, env_steps=768, best_score=None).env_steps
        768
    """

    iteration: int
    """Iterations done (over the whole run)."""
    env_steps: int
    """Env steps taken over every env row of every rank."""
    best_score: float | None
    """The best value of the run's best metric so far; ``None`` before any evaluation."""


@runtime_checkable
class SupportsSharedState(Protocol):
    """Rank-local state with a part that is the same on every rank (synchronised statistics).

    A reward normaliser keeps one running return per env row of its rank (lost
    when the number of ranks changes) and return statistics that every rank
    shares (kept).
    """

    def load_shared_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore only the rank-independent part of ``state_dict`` (rank 0's saved state)."""
        ...


@runtime_checkable
class SupportsScheduleRestart(Protocol):
    """State that keeps its own place on a schedule, beside the learning-rate schedulers.

    AHAC's horizon (:class:`~typedrl.ahac.AdaptiveHorizon`) decays its dual
    step over the run's updates. Loading a checkpoint with
    ``restart_schedule=True`` restarts every such object of the
    :class:`TrainerState` with the learning-rate curves.
    """

    def restart_schedule(self) -> None:
        """Go back to the schedule's beginning; learned values stay."""
        ...


@final
class GeneratorState:
    """A :class:`torch.Generator` as a checkpointable object (its state as a uint8 tensor).

    Example:
        >>> generator = torch.Generator().manual_seed(3)
        >>> saved = GeneratorState(generator).state_dict()
        >>> first = torch.rand(2, generator=generator)
        >>> GeneratorState(generator).load_state_dict(saved)
        >>> bool((torch.rand(2, generator=generator) == first).all())
        True
    """

    def __init__(self, generator: torch.Generator) -> None:
        self.generator = generator

    def state_dict(self) -> dict[str, Any]:
        """``{"generator": generator.get_state()}``."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore the generator's state.

        Raises:
            ConfigError: The dict has no ``"generator"`` uint8 tensor.
        """
        value = state_dict.get("generator")
        if not isinstance(value, torch.Tensor) or value.dtype != torch.uint8:
            raise ConfigError(
                "GeneratorState expects {'generator': <uint8 tensor>}, got keys "
                f"{sorted(state_dict)}"
            )
        self.generator.set_state(value.cpu())


@final
class Counters(dict[str, int]):
    """Named integer counters of a trainer or algorithm, as one checkpointable object.

    A dict of its names (reading and counting cost what a dict's do), saved and
    restored by name.

    Example:
        >>> counters = Counters("applied", "skipped")
        >>> counters["applied"] += 1
        >>> restored = Counters("applied", "skipped")
        >>> restored.load_state_dict(counters.state_dict())
        >>> restored["applied"], restored["skipped"]
        (1, 0)
    """

    def __init__(self, *names: str) -> None:
        super().__init__(dict.fromkeys(names, 0))

    def state_dict(self) -> dict[str, Any]:
        """Every counter by name."""
        return dict(self)

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            ConfigError: The names differ from this object's.
        """
        if set(state_dict) != set(self):
            raise ConfigError(f"Counters expects {sorted(self)}, got {sorted(state_dict)}")
        for name, value in state_dict.items():
            self[name] = int(value)
