"""Return, forward speed and root height of trained Newton locomotion policies.

For each checkpoint (a file, or every checkpoint of a run folder's ``checkpoints/``,
ordered by env steps), plays one deterministic episode per row on the env the run
trained on, seeded as ``typedrl evaluate --episodes N --num-envs N`` seeds it (the
same episodes, so the same returns), and prints the env steps the checkpoint was
saved at, the episode return, the forward speed (the root's ``x`` velocity, m/s,
averaged over every step a row was alive), the root height (the Ant's torso height;
the planar tasks' ``rootz``, relative to the start) and the episode length. It
gives the learning curves of docs/guides/differentiable_locomotion.rst their
forward-speed column:

    python benchmarks/newton_gait.py runs/shac-ant --episodes 4
"""

import argparse
from pathlib import Path

import torch

from typedrl.checkpoint import load_checkpoint
from typedrl.envs.newton import NewtonVecEnv
from typedrl.restore import locate_checkpoint, restore_policy, trained_env

FORWARD_VELOCITY = {
    "typedrl/NewtonAnt-v0": 5,  # torso height, quaternion (4), then v_x
    "typedrl/NewtonHalfCheetah-v0": 8,  # joint_q[1:] (8), then joint_qd[0] = v_x
    "typedrl/NewtonHopper-v0": 5,  # joint_q[1:] (5), then joint_qd[0] = v_x
}
"""Index of the root's ``x`` velocity in each task's observation."""

HEIGHT = {
    "typedrl/NewtonAnt-v0": 0,  # torso height (m)
    "typedrl/NewtonHalfCheetah-v0": 0,  # joint_q[1] = rootz (m, relative to the start)
    "typedrl/NewtonHopper-v0": 0,  # joint_q[1] = rootz (m, relative to the start)
}
"""Index of the root's height in each task's observation."""


def _checkpoints(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            folder = path / "checkpoints"
            found.extend(sorted(folder.glob("*.ckpt")))
        else:
            found.append(path)
    return found


def _gait(path: Path, episodes: int, seed: int) -> dict[str, float]:
    checkpoint = load_checkpoint(path)
    spec = trained_env(checkpoint, locate_checkpoint(path), env_id=None)
    env = spec.make(num_envs=episodes, seed=seed)
    if not isinstance(env, NewtonVecEnv) or spec.env_id not in FORWARD_VELOCITY:
        raise SystemExit(f"{path}: not a run on a Newton locomotion task ({spec.env_id})")
    forward, height = FORWARD_VELOCITY[spec.env_id], HEIGHT[spec.env_id]
    policy = restore_policy(checkpoint, env, path=path)
    obs, _ = env.reset(seed=seed)
    alive = torch.ones(episodes, dtype=torch.bool)
    # Sums in float64, as typedrl evaluate's returns.
    total = torch.zeros(episodes, dtype=torch.float64)
    speed = torch.zeros(episodes, dtype=torch.float64)
    heights = torch.zeros(episodes, dtype=torch.float64)
    length = torch.zeros(episodes, dtype=torch.float64)
    with torch.no_grad():
        for _ in range(env.max_episode_steps):
            action = policy.act(obs, deterministic=True)["action"]
            result = env.step(action)
            reached = result.final_obs["obs"] if result.final_obs is not None else result.obs["obs"]
            weight = alive.double()
            total += weight * result.reward
            speed += weight * reached[:, forward]
            heights += weight * reached[:, height]
            length += weight
            alive &= ~(result.terminated | result.truncated)
            obs = result.obs
            if not bool(alive.any()):
                break
    env.close()
    return {
        "env_steps": float(checkpoint.counters.get("env_steps", 0)),
        "return": float(total.mean()),
        "speed": float((speed / length).mean()),
        "height": float((heights / length).mean()),
        "length": float(length.mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", type=Path, nargs="+", help="run folders or checkpoint files")
    parser.add_argument("--episodes", type=int, default=4, help="one episode per row")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [(path, _gait(path, args.episodes, args.seed)) for path in _checkpoints(args.paths)]
    rows.sort(key=lambda row: row[1]["env_steps"])
    print(
        f"{'checkpoint':<48} {'env steps':>10} {'return':>8} {'m/s':>6} {'height':>7} {'length':>7}"
    )
    for path, gait in rows:
        print(
            f"{path!s:<48} {gait['env_steps']:>10,.0f} {gait['return']:>8,.0f} "
            f"{gait['speed']:>6.2f} {gait['height']:>7.2f} {gait['length']:>7.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
