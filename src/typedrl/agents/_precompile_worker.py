"""The child process of :func:`~typedrl.agents._compiled_update.start_background_precompile`.

``python -m typedrl.agents._precompile_worker SPEC LOCK``: reads the spec file
the run wrote (and deletes it), rebuilds the run's policy and Adam, compiles
the minibatch update for the spec's minibatch as :class:`CompiledUpdate`
does (which saves the precompiled update and records it), and removes LOCK
if it still names this process. A failure writes ``<key>.failed`` with the
traceback beside the precompiled files, so that later runs do not try again.
"""

import contextlib
import os
import sys
import traceback
from pathlib import Path
from typing import Any

__all__ = ["main"]


def main(argv: list[str]) -> int:
    """Precompile the update a spec file describes; 0 when it was compiled."""
    spec_path, lock = Path(argv[0]), Path(argv[1])
    with contextlib.suppress(AttributeError, OSError):
        os.nice(10)  # below the runs this machine is doing
    key = ""
    failed = None
    try:
        import torch  # noqa: PLC0415 - after the priority is lowered

        torch.set_num_threads(1)
        spec: dict[str, Any] = torch.load(spec_path, weights_only=False)
        spec_path.unlink(missing_ok=True)
        key = str(spec["key"])
        _compile(spec)
    except Exception:  # everything goes to the .failed file: the run's console is not ours
        failed = traceback.format_exc()
    finally:
        spec_path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            if lock.read_text().strip() == str(os.getpid()):
                lock.unlink()
    if failed is not None and key:
        with contextlib.suppress(OSError):
            (lock.parent / f"{key}.failed").write_text(failed)
    return 0 if failed is None else 1


def _compile(spec: dict[str, Any]) -> None:
    """Build the run's update from ``spec`` and compile it once (saved and recorded)."""
    from typedrl.agents._compiled_update import CompiledUpdate, CompileRecord  # noqa: PLC0415
    from typedrl.agents._config import PPOConfig  # noqa: PLC0415
    from typedrl.agents._loss import EpochData  # noqa: PLC0415
    from typedrl.agents._ppo import PPOAgent  # noqa: PLC0415
    from typedrl.training import build_optimizer  # noqa: PLC0415

    config = PPOConfig.from_dict(spec["config"])
    observation_space, action_space = spec["spaces"]
    policy = PPOAgent.build_policy(config, observation_space, action_space).to(spec["dtype"])
    policy.load_state_dict(spec["policy"])
    optimizer = build_optimizer(
        list(policy.parameters()),
        name="adam",
        learning_rate=config.learning_rate,
        betas=spec["adam"]["betas"],
        eps=spec["adam"]["eps"],
        fused=True,
    )
    batch = spec["batch"]
    if not isinstance(batch, EpochData):
        raise TypeError(f"the spec's batch is a {type(batch).__name__}, not EpochData")
    record = CompileRecord(Path(spec["record"]))
    spaces = (observation_space, action_space)
    update = CompiledUpdate(
        policy,
        optimizer,
        config,
        record=(record, lambda rows: CompileRecord.key(config, spaces, rows)),
    )
    update(batch)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
