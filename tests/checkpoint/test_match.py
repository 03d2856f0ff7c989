"""Tests for typedrl.checkpoint._match: whether a checkpoint fits the trainer resuming it."""

from typing import Any

import torch

from typedrl.checkpoint import Checkpoint, capture_rng_state
from typedrl.checkpoint._match import resume_mismatch
from typedrl.policies import PolicyFactory

_MLP = "typedrl.policies:MLPActorCritic"


def _checkpoint(config: dict[str, Any], factory: PolicyFactory | None = None) -> Checkpoint:
    return Checkpoint(
        kind="ppo",
        modules={"policy": torch.nn.Linear(1, 1).state_dict()},
        config=config,
        rng=(capture_rng_state(),),
        policy_factory=factory,
    )


def _mismatch(
    saved: Checkpoint,
    config: dict[str, Any],
    *,
    resumable: frozenset[str] = frozenset(),
    factory: PolicyFactory | None = None,
) -> str | None:
    error = resume_mismatch(
        saved, "run/last.ckpt", config=config, resumable_changes=resumable, policy_factory=factory
    )
    return None if error is None else str(error)


def test_the_same_config_and_policy_fit() -> None:
    """A checkpoint of the same config and policy factory gives no reason."""
    factory = PolicyFactory(_MLP, kwargs={"actor_hidden": [16]})
    saved = _checkpoint({"lr": 0.001, "sizes": [64, 64]}, factory)
    assert _mismatch(saved, {"lr": 0.001, "sizes": [64, 64]}, factory=factory) is None


def test_every_changed_field_is_named_with_both_values() -> None:
    """The message names the file and each changed field, saved and now, in name order."""
    saved = _checkpoint({"lr": 0.001, "gamma": 0.99, "seed": 0})
    message = _mismatch(saved, {"lr": 0.01, "gamma": 0.9, "seed": 0})
    assert message is not None
    assert message.startswith(
        "run/last.ckpt: saved with another config "
        "(gamma: saved 0.99, now 0.9; lr: saved 0.001, now 0.01). Resume with the saved config"
    )
    assert "strict_config=False" in message


def test_resumable_changes_and_fields_the_checkpoint_lacks_are_not_compared() -> None:
    """A resumable field may differ; a field added to the config since the save is ignored."""
    saved = _checkpoint({"total_timesteps": 100, "lr": 0.001})
    now = {"total_timesteps": 500, "lr": 0.001, "new_option": True}
    assert _mismatch(saved, now, resumable=frozenset({"total_timesteps"})) is None


def test_a_field_the_config_no_longer_has_is_reported_absent() -> None:
    """A saved field the current config lacks counts as changed."""
    message = _mismatch(_checkpoint({"lr": 0.001, "old": 1}), {"lr": 0.001})
    assert message is not None
    assert "(old: saved 1, now '(absent)')" in message


def test_another_policy_factory_is_refused_naming_both() -> None:
    """A checkpoint of another policy factory names the saved and the current one."""
    saved = _checkpoint({"lr": 0.001}, PolicyFactory(_MLP, kwargs={"actor_hidden": [16]}))
    current = PolicyFactory(_MLP, kwargs={"actor_hidden": [32]})
    message = _mismatch(saved, {"lr": 0.001}, factory=current)
    assert message == (
        f"run/last.ckpt: saved with the policy factory {_MLP} {{'actor_hidden': [16]}}, now "
        f"{_MLP} {{'actor_hidden': [32]}}; resume with the policy it trained "
        "(typedrl train --resume RUN_DIR rebuilds it from the run's config.yaml)"
    )


def test_the_config_is_reported_before_the_policy() -> None:
    """When both differ, the config's difference is the reason given."""
    saved = _checkpoint({"lr": 0.001}, PolicyFactory(_MLP, kwargs={"actor_hidden": [16]}))
    message = _mismatch(saved, {"lr": 0.1}, factory=PolicyFactory(_MLP))
    assert message is not None
    assert "saved with another config" in message


def test_policies_are_not_compared_unless_both_record_a_factory() -> None:
    """A checkpoint without a factory, or a trainer given a bare policy, compares no policy."""
    with_factory = _checkpoint({"lr": 0.001}, PolicyFactory(_MLP))
    assert _mismatch(with_factory, {"lr": 0.001}, factory=None) is None
    without = _checkpoint({"lr": 0.001})
    assert _mismatch(without, {"lr": 0.001}, factory=PolicyFactory(_MLP)) is None
