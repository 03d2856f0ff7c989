"""The names of the metrics the trainers log (``metrics.csv``, TensorBoard, W&B, summaries).

One definition of each name: the trainers, the logging, the plots and the
command import them from here. The groups are the prefixes of the names:
``loss/`` the minimised losses, ``train/`` the update's diagnostics,
``episode/`` the training episodes, ``eval/`` the evaluation episodes,
``critic/`` SHAC's critic, ``adjoint/`` APG's action adjoint, ``time/`` speed
and progress.

Example:
    >>> from typedrl import metrics
    >>> metrics.EVAL_SCORE
    'eval/score'
"""

from typing import Final

__all__ = [
    "ADJOINT_CLIPPED_FRACTION",
    "ADJOINT_NONFINITE_ROWS",
    "ADJOINT_NORM_MAX",
    "ADJOINT_NORM_MEAN",
    "ADJOINT_ROWS",
    "AHAC_CONTACT_NORM",
    "AHAC_CRITIC_PASSES",
    "AHAC_HORIZON",
    "AHAC_HORIZON_VALUE",
    "AHAC_MULTIPLIER",
    "CRITIC_EXPLAINED_VARIANCE",
    "CRITIC_TARGET_MEAN",
    "CRITIC_VALUE_MEAN",
    "EPISODE_LENGTH",
    "EPISODE_LENGTH_MEAN",
    "EPISODE_RETURN",
    "EPISODE_RETURN_MEAN",
    "EVAL_EPISODES",
    "EVAL_PREFIX",
    "EVAL_RETURN_MEAN",
    "EVAL_RETURN_STD",
    "EVAL_SCORE",
    "LOSS_CRITIC",
    "LOSS_ENTROPY",
    "LOSS_POLICY",
    "LOSS_TOTAL",
    "LOSS_VALUE",
    "SCHEDULE_PREFIX",
    "TIME_COLLECT_FRACTION",
    "TIME_ENV_STEPS",
    "TIME_ITERATION",
    "TIME_ITERATION_SECONDS",
    "TIME_SPS",
    "TRAIN_APPLIED_UPDATES",
    "TRAIN_APPROXIMATE_BOOTSTRAP",
    "TRAIN_APPROX_KL",
    "TRAIN_CLIP_FRACTION",
    "TRAIN_CRITIC_GRAD_NORM",
    "TRAIN_CRITIC_LEARNING_RATE",
    "TRAIN_CUT_ROWS",
    "TRAIN_ENTROPY",
    "TRAIN_EXPLAINED_VARIANCE",
    "TRAIN_GRAD_NORM",
    "TRAIN_LEARNING_RATE",
    "TRAIN_OBJECTIVE",
    "TRAIN_SKIPPED_LARGE",
    "TRAIN_SKIPPED_NONFINITE",
    "TRAIN_SKIPPED_UPDATES",
]

# ---------------------------------------------------------------- losses

LOSS_POLICY: Final = "loss/policy"
"""The policy's loss: PPO's clipped surrogate; APG's and SHAC's negated objective."""
LOSS_VALUE: Final = "loss/value"
"""PPO's value-function loss."""
LOSS_ENTROPY: Final = "loss/entropy"
"""PPO's entropy bonus term."""
LOSS_TOTAL: Final = "loss/total"
"""PPO's combined loss."""
LOSS_CRITIC: Final = "loss/critic"
"""SHAC's critic regression loss (mean squared error against its TD(lambda) targets)."""

# ---------------------------------------------------------------- the update

TRAIN_LEARNING_RATE: Final = "train/learning_rate"
"""The policy's learning rate at this update."""
TRAIN_GRAD_NORM: Final = "train/grad_norm"
"""The policy gradient's global norm before clipping."""
TRAIN_SKIPPED_UPDATES: Final = "train/skipped_updates"
"""PPO: the fraction of minibatch updates skipped for a non-finite gradient."""
TRAIN_SKIPPED_NONFINITE: Final = "train/skipped_nonfinite"
"""APG and SHAC: 1 when the update was skipped for a non-finite gradient or loss."""
TRAIN_SKIPPED_LARGE: Final = "train/skipped_large"
"""APG and SHAC: 1 when the update was skipped for a norm above ``skip_grad_norm_above``."""
TRAIN_APPLIED_UPDATES: Final = "train/applied_updates"
"""APG and SHAC: applied updates so far."""
TRAIN_OBJECTIVE: Final = "train/objective"
"""APG and SHAC: the differentiated objective, per step and row."""
TRAIN_ENTROPY: Final = "train/entropy"
"""APG and SHAC: the policy's entropy, per step and row."""
TRAIN_EXPLAINED_VARIANCE: Final = "train/explained_variance"
"""PPO: how much of the returns' variance the collected values explain."""
TRAIN_APPROX_KL: Final = "train/approx_kl"
"""PPO: the approximate KL divergence of the update."""
TRAIN_CLIP_FRACTION: Final = "train/clip_fraction"
"""PPO: the fraction of samples whose ratio was clipped."""
TRAIN_APPROXIMATE_BOOTSTRAP: Final = "train/approximate_bootstrap"
"""PPO: 1 when truncations were bootstrapped from the last observation (no terminal one)."""
TRAIN_CUT_ROWS: Final = "train/cut_rows"
"""SHAC: rows cut in the window for an exploded observation (summed over the ranks)."""
TRAIN_CRITIC_GRAD_NORM: Final = "train/critic_grad_norm"
"""SHAC: the critic's gradient norm before clipping, averaged over its minibatches."""
TRAIN_CRITIC_LEARNING_RATE: Final = "train/critic_learning_rate"
"""SHAC: the critic's learning rate at this update."""

# ---------------------------------------------------------------- AHAC's horizon

AHAC_HORIZON: Final = "ahac/horizon"
"""AHAC: the window's length ``round(H)`` at this update, in steps."""
AHAC_HORIZON_VALUE: Final = "ahac/horizon_value"
"""AHAC: ``H`` after this update's dual-ascent step (unrounded)."""
AHAC_MULTIPLIER: Final = "ahac/multiplier"
"""AHAC: the Lagrange multiplier ``lambda`` the next window starts from."""
AHAC_CONTACT_NORM: Final = "ahac/contact_norm"
"""AHAC: the window's mean contact-force norm over its valid steps and every rank's rows."""
AHAC_CRITIC_PASSES: Final = "ahac/critic_passes"
"""AHAC: passes the critic's fit ran before its stop rule ended it."""

# ---------------------------------------------------------------- SHAC's critic

CRITIC_VALUE_MEAN: Final = "critic/value_mean"
"""The target critic's mean value on the window's states."""
CRITIC_TARGET_MEAN: Final = "critic/target_mean"
"""The mean of the window's TD(lambda) targets."""
CRITIC_EXPLAINED_VARIANCE: Final = "critic/explained_variance"
"""How much of the targets' variance the critic explained before this update's regression."""

# ---------------------------------------------------------------- APG's action adjoint

ADJOINT_ROWS: Final = "adjoint/rows"
"""Action rows whose adjoint was measured in the update (summed over the ranks)."""
ADJOINT_CLIPPED_FRACTION: Final = "adjoint/clipped_fraction"
"""The fraction of those rows whose adjoint was clipped to ``adjoint_max_norm``."""
ADJOINT_NONFINITE_ROWS: Final = "adjoint/nonfinite_rows"
"""Rows whose adjoint was non-finite and zeroed."""
ADJOINT_NORM_MEAN: Final = "adjoint/norm_mean"
"""The mean adjoint norm over the finite rows, before clipping."""
ADJOINT_NORM_MAX: Final = "adjoint/norm_max"
"""The largest finite adjoint norm, before clipping (over every rank)."""

# ---------------------------------------------------------------- episodes

EPISODE_RETURN: Final = "episode/return"
"""One training episode's return (aggregated into :data:`EPISODE_RETURN_MEAN`)."""
EPISODE_LENGTH: Final = "episode/length"
"""One training episode's length (aggregated into :data:`EPISODE_LENGTH_MEAN`)."""
EPISODE_RETURN_MEAN: Final = "episode/return_mean"
"""The mean return of the training episodes that ended in the iteration."""
EPISODE_LENGTH_MEAN: Final = "episode/length_mean"
"""The mean length of the training episodes that ended in the iteration."""

# ---------------------------------------------------------------- evaluation

EVAL_PREFIX: Final = "eval/"
"""The prefix of every evaluation metric (an evaluator's metrics are logged under it)."""
EVAL_SCORE: Final = "eval/score"
"""The evaluator's score (what ``best.ckpt`` is chosen by, by default)."""
EVAL_RETURN_MEAN: Final = "eval/return_mean"
"""The mean return of the evaluation episodes."""
EVAL_RETURN_STD: Final = "eval/return_std"
"""The standard deviation of the evaluation episodes' returns."""
EVAL_EPISODES: Final = "eval/episodes"
"""How many evaluation episodes the score averages."""

# ---------------------------------------------------------------- speed and progress

TIME_SPS: Final = "time/sps"
"""Env steps per second of the iteration."""
TIME_COLLECT_FRACTION: Final = "time/collect_fraction"
"""PPO: the fraction of the iteration spent collecting."""
TIME_ITERATION_SECONDS: Final = "time/iteration_seconds"
"""Wall-clock seconds of the iteration."""
TIME_ENV_STEPS: Final = "time/env_steps"
"""Env steps so far, over every rank."""
TIME_ITERATION: Final = "time/iteration"
"""Iterations so far."""

SCHEDULE_PREFIX: Final = "schedule/"
"""The prefix of a scheduled env's per-rollout metadata, averaged over the update."""
