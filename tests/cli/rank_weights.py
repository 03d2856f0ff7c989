"""``typedrl`` as a script that also saves each rank's final policy weights.

The launch tests start it through ``torchrun``, SLURM's variables or
``--devices``: ``python rank_weights.py train ...`` runs the command, and
every rank writes ``rank<global rank>.pt`` (its policy's state dict) into
the folder named by ``TYPEDRL_TEST_WEIGHTS_DIR``, so that the test can check
that all ranks ended with the same weights. Under ``torchrun`` each worker
also writes its process id there first, as
``pid_rank<global rank>_attempt<restart count>``, for the tests that kill one.
"""

import os
import sys
from pathlib import Path

import pytest
import torch

from typedrl.cli import main
from typedrl.training import AbstractTrainer, FitResult

WEIGHTS_DIR_VARIABLE = "TYPEDRL_TEST_WEIGHTS_DIR"
"""Where each rank writes its final policy weights."""


def run(argv: list[str]) -> int:
    """Run ``typedrl argv``; each rank's fitted policy is saved as ``rank<r>.pt``."""
    out = Path(os.environ[WEIGHTS_DIR_VARIABLE])
    if "TORCHELASTIC_RESTART_COUNT" in os.environ:
        attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
        (out / f"pid_rank{os.environ['RANK']}_attempt{attempt}").write_text(str(os.getpid()))
    fit = AbstractTrainer.fit

    def fit_and_save(trainer: AbstractTrainer) -> FitResult:
        result = fit(trainer)
        policy = trainer.policy
        if not isinstance(policy, torch.nn.Module):
            raise TypeError(f"expected a torch module as the policy, got {type(policy)}")
        weights = {key: value.detach().cpu() for key, value in policy.state_dict().items()}
        torch.save(weights, out / f"rank{trainer.dist.rank}.pt")
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AbstractTrainer, "fit", fit_and_save)
        return main(argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
