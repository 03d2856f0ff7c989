"""`typedrl train` launched by torchrun (two nodes on this host) or SLURM's srun: one DDP run."""

import csv
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Final

import pytest
import torch
import yaml

from tests.cli.factories import SMALL_RUN
from tests.cli.rank_weights import WEIGHTS_DIR_VARIABLE
from tests.multiprocess import free_port, run_two_ranks, wait_until
from typedrl.checkpoint import load_checkpoint
from typedrl.cli import main
from typedrl.training import _fabric, leave_process_group

pytestmark = pytest.mark.distributed

_SCRIPT: Final = str(Path(__file__).with_name("rank_weights.py"))
_TIMEOUT_S: Final = 240.0

_RUNS: Final[Mapping[str, Sequence[str]]] = {
    "ppo": [
        "typedrl/CartPole-v0",
        "--set",
        "num_steps=16",
        "--set",
        "batch_size=32",
    ],
    "apg": ["typedrl/PointMass-v0", "--algo", "apg", "--set", "segment_length=16"],
    "shac": [
        "typedrl/Pendulum-v0",
        "--algo",
        "shac",
        "--set",
        "segment_length=16",
        "--set",
        "algorithm.critic_iterations=2",
    ],
}
"""Each algorithm's run: 4 rows per rank, 2 ranks, 256 env steps (two iterations)."""

_BUDGET: Final = ["--total-timesteps", "256", "--num-envs", "4", "--eval-episodes", "2"]

_LAUNCH_VARIABLES: Final = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def _environment(weights: Path, extra: Mapping[str, str] = {}) -> dict[str, str]:
    """This process's variables without any launch of its own, plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SLURM_", "TORCHELASTIC_", "MASTER_"))
        and key not in _LAUNCH_VARIABLES
        and key != "OMP_NUM_THREADS"
    }
    weights.mkdir(parents=True, exist_ok=True)
    return {**env, WEIGHTS_DIR_VARIABLE: str(weights), **extra}


def _launch(
    commands: Sequence[Sequence[str]], *, cwd: Path, envs: Sequence[Mapping[str, str]]
) -> list[tuple[int, str, str]]:
    """Start every command at once, wait for all; ``(exit code, stdout, stderr)`` each."""
    processes = [
        subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for command, env in zip(commands, envs, strict=True)
    ]
    results: list[tuple[int, str, str]] = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=_TIMEOUT_S)
            results.append((process.returncode, out, err))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
    return results


def _torchrun(
    nodes: int, per_node: int, port: int, node_rank: int, *, max_restarts: int = 0
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={nodes}",
        f"--nproc-per-node={per_node}",
        f"--node-rank={node_rank}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=localhost:{port}",
        f"--max-restarts={max_restarts}",
        _SCRIPT,
    ]


def two_node_torchrun(folder: Path, argv: Sequence[str]) -> list[tuple[int, str, str]]:
    """``typedrl train argv --run-dir run`` as two one-process torchrun nodes, in ``folder``."""
    port = free_port()
    env = _environment(folder / "weights")
    commands = [[*_torchrun(2, 1, port, rank), "train", *argv] for rank in (0, 1)]
    return _launch(commands, cwd=folder, envs=[env, env])


def _devices_two(folder: Path, argv: Sequence[str]) -> list[tuple[int, str, str]]:
    """``typedrl train argv --devices 2``: the command starts the second process itself."""
    env = _environment(folder / "weights")
    return _launch(
        [[sys.executable, _SCRIPT, "train", *argv, "--devices", "2"]], cwd=folder, envs=[env]
    )


def _ok(results: Sequence[tuple[int, str, str]]) -> str:
    """Every process exited 0; their stdout, joined."""
    for code, out, err in results:
        assert code == 0, f"exit {code}\n{out}\n{err[-3000:]}"
    return "".join(out for _, out, _ in results)


def _weights(folder: Path, rank: int) -> dict[str, torch.Tensor]:
    loaded: dict[str, torch.Tensor] = torch.load(folder / "weights" / f"rank{rank}.pt")
    return loaded


def _same_weights(first: Mapping[str, torch.Tensor], second: Mapping[str, torch.Tensor]) -> bool:
    return first.keys() == second.keys() and all(
        torch.equal(first[key], second[key]) for key in first
    )


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "metrics.csv").open() as handle:
        return list(csv.DictReader(handle))


def _trained_values(rows: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """The rows without their timings, which differ from run to run."""
    return [
        {key: value for key, value in row.items() if not key.startswith("time/")} for row in rows
    ]


@pytest.fixture(scope="module")
def devices_two(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The folder of ``--devices 2`` runs of each algorithm (trained once, on first use)."""
    made: dict[str, Path] = {}

    def run(algo: str) -> Path:
        if algo not in made:
            folder = tmp_path_factory.mktemp(f"devices-{algo}")
            _ok(_devices_two(folder, [*_RUNS[algo], *_BUDGET, "--run-dir", "run", "--no-progress"]))
            made[algo] = folder
        return made[algo]

    return run


@pytest.mark.parametrize(
    "algo",
    # Each launch takes 80-110 s on a loaded 2-core machine: PPO runs by default, all with slow.
    [
        "ppo",
        pytest.param("apg", marks=pytest.mark.slow),
        pytest.param("shac", marks=pytest.mark.slow),
    ],
)
def test_two_node_torchrun_trains_one_run_as_devices_two_does(
    algo: str, tmp_path: Path, devices_two: Callable[[str], Path]
) -> None:
    """Two torchrun nodes: one run folder by rank 0, equal ranks, bit-identical to --devices 2."""
    argv = [*_RUNS[algo], *_BUDGET, "--run-dir", "run", "--no-progress"]
    printed = _ok(two_node_torchrun(tmp_path, argv))
    run_dir = tmp_path / "run"
    assert printed.count("run directory") == 1
    rows = _rows(run_dir)
    trained = [row for row in rows if row["time/iteration_seconds"]]
    assert [int(float(row["step"])) for row in trained] == [128, 256]
    assert json.loads((run_dir / "summary.json").read_text())["global_step"] == 256
    run = yaml.safe_load((run_dir / "config.yaml").read_text())["run"]
    assert (run["devices"], run["num_nodes"]) == (1, 2)
    assert _same_weights(_weights(tmp_path, 0), _weights(tmp_path, 1))
    reference = devices_two(algo)
    assert _same_weights(_weights(tmp_path, 0), _weights(reference, 0))
    assert _trained_values(rows) == _trained_values(_rows(reference / "run"))
    reference_run = yaml.safe_load((reference / "run" / "config.yaml").read_text())["run"]
    assert (reference_run["devices"], reference_run["num_nodes"]) == (2, 1)


def test_a_slurm_launch_trains_one_run(tmp_path: Path, devices_two: Callable[[str], Path]) -> None:
    """Two srun tasks on two nodes (SLURM's variables) train the --devices 2 run."""
    port = free_port()
    envs = [
        _environment(
            tmp_path / "weights",
            {
                "SLURM_JOB_ID": "4242",
                "SLURM_JOB_NAME": "typedrl",
                "SLURM_NTASKS": "2",
                "SLURM_NTASKS_PER_NODE": "1",
                "SLURM_NNODES": "2",
                "SLURM_NODELIST": "localhost",
                "SLURM_PROCID": str(rank),
                "SLURM_LOCALID": "0",
                "SLURM_NODEID": str(rank),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            },
        )
        for rank in (0, 1)
    ]
    argv = [*_RUNS["ppo"], *_BUDGET, "--run-dir", "run", "--no-progress"]
    printed = _ok(_launch([[sys.executable, _SCRIPT, "train", *argv]] * 2, cwd=tmp_path, envs=envs))
    assert printed.count("run directory") == 1
    assert _same_weights(_weights(tmp_path, 0), _weights(tmp_path, 1))
    assert _same_weights(_weights(tmp_path, 0), _weights(devices_two("ppo"), 0))
    run = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["run"]
    assert (run["devices"], run["num_nodes"]) == (1, 2)


def test_devices_contradicting_torchrun_is_one_line_on_every_rank(tmp_path: Path) -> None:
    """--devices 4 under a two-process torchrun: each rank prints one ConfigError and exits 1."""
    argv = ["train", *_RUNS["ppo"], *_BUDGET, "--run-dir", "run", "--devices", "4"]
    env = _environment(tmp_path / "weights")
    [(code, _, err)] = _launch(
        [[*_torchrun(1, 2, free_port(), 0), *argv]], cwd=tmp_path, envs=[env]
    )
    assert code != 0
    line = (
        "typedrl: ConfigError: --devices 4: torchrun launched 2 process(es) per node "
        "(WORLD_SIZE=2, LOCAL_WORLD_SIZE=2, GROUP_WORLD_SIZE=1); leave --devices out or pass "
        "--devices 2"
    )
    assert err.count(line) == 2, err[-3000:]
    assert not (tmp_path / "run").exists()


def test_rank_0_refuses_an_existing_run_for_every_rank(tmp_path: Path) -> None:
    """A run folder holding a run: rank 0 decides, and every rank stops with its line."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.csv").write_text("global_step\n64\n")
    argv = ["train", *_RUNS["ppo"], *_BUDGET, "--run-dir", "run", "--no-progress"]
    [(code, _, err)] = _launch(
        [[*_torchrun(1, 2, free_port(), 0), *argv]],
        cwd=tmp_path,
        envs=[_environment(tmp_path / "weights")],
    )
    assert code != 0
    assert err.count("typedrl: ConfigError: --run-dir run holds a run (metrics.csv)") == 2, err
    assert (tmp_path / "run" / "metrics.csv").read_text() == "global_step\n64\n"


def _torchrun_variables(monkeypatch: pytest.MonkeyPatch, *, nodes: int, per_node: int) -> None:
    """Make this process look like rank 0 of a torchrun job of ``nodes`` x ``per_node``."""
    variables = {
        "TORCHELASTIC_RUN_ID": "test",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "GROUP_RANK": "0",
        "WORLD_SIZE": str(nodes * per_node),
        "LOCAL_WORLD_SIZE": str(per_node),
        "GROUP_WORLD_SIZE": str(nodes),
    }
    for key, value in variables.items():
        monkeypatch.setenv(key, value)


def test_num_nodes_contradicting_the_launch_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--num-nodes 3 in a two-node torchrun job stops before connecting, naming the launch."""
    _torchrun_variables(monkeypatch, nodes=2, per_node=1)
    argv = ["train", *SMALL_RUN, "--run-dir", str(tmp_path / "run"), "--num-nodes", "3"]
    assert main(argv) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        "typedrl: ConfigError: --num-nodes 3: torchrun launched 2 node(s) (WORLD_SIZE=2, "
        "LOCAL_WORLD_SIZE=1, GROUP_WORLD_SIZE=2); leave --num-nodes out or pass --num-nodes 2"
    )
    assert not (tmp_path / "run").exists()


def test_num_nodes_without_a_launcher_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--num-nodes 2 with no torchrun or srun around the command says how to launch it."""
    assert main(["train", *SMALL_RUN, "--run-dir", str(tmp_path / "run"), "--num-nodes", "2"]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        "typedrl: ConfigError: --num-nodes 2: no torchrun or srun launch found (no torchrun or "
        "srun variables); start the command on every node through torchrun --nnodes 2 or srun"
    )


def test_torchrun_max_restarts_resumes_after_a_worker_is_killed(tmp_path: Path) -> None:
    """kill -9 of one worker: torchrun restarts both, which resume from last.ckpt and finish.

    The restarted gloo group must not read the killed attempt's connection
    details from the agent's shared store (it connected to the dead worker's
    port, or hung, before each attempt got keys of its own).
    """
    weights = tmp_path / "weights"
    run_dir = tmp_path / "run"
    total = 160 * 128  # 2 ranks x 4 envs x 16 steps an iteration; last.ckpt at iteration 100
    argv = [*_RUNS["ppo"], "--num-envs", "4", "--eval-episodes", "2", "--no-progress"]
    command = [
        *_torchrun(1, 2, free_port(), 0, max_restarts=1),
        "train",
        *argv,
        *["--total-timesteps", str(total), "--run-dir", str(run_dir), "--resume", "auto"],
    ]
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=_environment(weights),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        last = run_dir / "checkpoints" / "last.ckpt"
        wait_until(process, last.is_file)
        saved = int(load_checkpoint(last).counters["env_steps"])
        wait_until(
            process,
            lambda: any(
                row["step"].isdigit() and int(row["step"]) > saved for row in _rows(run_dir)
            ),
        )
        victim = int((weights / "pid_rank1_attempt0").read_text())
        os.kill(victim, signal.SIGKILL)
        out, err = process.communicate(timeout=_TIMEOUT_S)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    assert process.returncode == 0, f"{out}\n{err[-3000:]}"
    assert (weights / "pid_rank0_attempt1").is_file()
    assert (weights / "pid_rank1_attempt1").is_file()
    assert f"after the checkpoint (env step {saved:,})" in out
    steps = [int(row["step"]) for row in _rows(run_dir)]
    # One series: every iteration once, then the final evaluation's row.
    assert steps == [*range(128, total + 1, 128), total]
    assert json.loads((run_dir / "summary.json").read_text())["global_step"] == total
    assert _same_weights(_weights(tmp_path, 0), _weights(tmp_path, 1))


def _leave_on_rank(rank: int, port: int, out_dir: str) -> None:
    """Gather on two gloo ranks, then leave as ``typedrl train`` does."""
    torch.distributed.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=2,
        timeout=timedelta(seconds=60),
    )
    gathered = [torch.zeros(3) for _ in range(2)]
    torch.distributed.all_gather(gathered, torch.full((3,), float(rank)))
    fabric = SimpleNamespace(world_size=2, device=torch.device("cpu"))
    leave_process_group(fabric)  # type: ignore[arg-type]  # what it reads of a Fabric
    kept = _fabric._FINISHED_WORK
    result = {
        "gathered": torch.stack(gathered),
        "left": not torch.distributed.is_initialized(),
        "kept": len(kept),
        "completed": all(work.is_completed() for work in kept),  # type: ignore[attr-defined]
    }
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


def test_ranks_leave_the_group_keeping_the_final_barrier(tmp_path: Path) -> None:
    """Both ranks pass the final barrier, leave the group and keep its work.

    The mechanism only: the deadlock it prevents (gloo's worker thread freeing
    the last collectives' tensors while the main thread tears the group down)
    is a race between two threads, seen in about 1 of 19 runs.
    """
    run_two_ranks(_leave_on_rank, str(tmp_path))
    for rank in (0, 1):
        result = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        assert torch.equal(result["gathered"], torch.tensor([[0.0] * 3, [1.0] * 3]))
        assert result["left"]
        assert result["kept"] == 1
        assert result["completed"]
