"""`typedrl train`: resolved settings, --print-config, --config, --resume RUN_DIR, env specs."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import typedrl.envs
from tests.cli.factories import SMALL_RUN
from typedrl.checkpoint import load_checkpoint
from typedrl.cli import _train, main
from typedrl.cli._config import parse_env_kwargs
from typedrl.cli._run_folder import LOCK_FILE, lock_run_dir, unlock_run_dir
from typedrl.errors import ConfigError
from typedrl.runs import RUN_KEYS

_SMALL = SMALL_RUN


def _printed(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["train", *argv, "--print-config"]) == 0
    document: dict[str, Any] = yaml.safe_load(capsys.readouterr().out)
    return document


def _resolved(document: dict[str, Any]) -> dict[str, Any]:
    """A document without what records how it was made (the layers and the command)."""
    return {key: value for key, value in document.items() if key not in ("source", "command")}


def test_print_config_resolves_every_layer_without_building_envs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defaults < tuned file < --config < flags; nothing is built, exit status 0."""

    def no_envs(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("--print-config built an env")

    monkeypatch.setattr(typedrl.envs, "make", no_envs)
    user = tmp_path / "user.yaml"
    user.write_text("config:\n  learning_rate: 0.0005\n  gamma: 0.9\nrun:\n  eval_episodes: 3\n")
    document = _printed(
        capsys, "CartPole-v1", "--config", str(user), "--set", "gamma=0.95", "--seed", "4"
    )
    assert tuple(document) == RUN_KEYS
    assert (document["algo"], document["env_id"], document["seed"]) == ("ppo", "CartPole-v1", 4)
    # The built-in policy's settings have a section of their own.
    assert document["policy"]["core"] == "mlp"
    assert document["policy"]["actor_hidden"] == [64, 64]
    assert "actor_hidden" not in document["config"]
    config = document["config"]
    assert document["num_envs"] == 8  # the tuned file
    assert config["num_mini_epochs"] == 20  # the tuned file
    assert config["learning_rate"] == 0.0005  # --config over the tuned file
    assert config["gamma"] == 0.95  # --set over --config
    assert config["clip_range"] == 0.2  # the dataclass default
    assert "seed" not in config
    assert document["run"]["eval_episodes"] == 3
    assert document["source"] == (
        f"typedrl train: PPOConfig defaults < tuned ppo/CartPole-v1.yaml < --config {user} "
        "< command-line flags"
    )
    assert document["command"][:2] == ["typedrl", "train"]


def test_print_config_round_trips_through_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Printed YAML fed back with --config resolves to the same config, for every algorithm."""
    cases = [
        ["Pendulum-v1", "--set", "actor_hidden=[32, 32]", "--wrapper", "RecordEpisodeStatistics"],
        ["--algo", "apg", "--set", "algorithm.gamma=0.97", "--set", "total_updates=7"],
        ["typedrl/Pendulum-v0", "--algo", "shac", "--set", "algorithm.actor.learning_rate=0.003"],
    ]
    for index, argv in enumerate(cases):
        first = _printed(capsys, *argv)
        path = tmp_path / f"printed{index}.yaml"
        path.write_text(yaml.safe_dump(first))
        again = _printed(capsys, "--config", str(path))
        assert _resolved(again) == _resolved(first)
    apg = _printed(capsys, "--algo", "apg", "--set", "total_updates=7")
    assert (apg["config"]["total_timesteps"], apg["config"]["total_updates"]) == (None, 7)
    assert apg["env_id"] == "typedrl/Reacher-v0"
    shac = _printed(capsys, "--algo", "shac")
    assert shac["config"]["algorithm"]["actor"]["betas"] == [0.7, 0.95]


def test_every_config_field_is_reachable_by_set(capsys: pytest.CaptureFixture[str]) -> None:
    """Each PPOConfig field given by --set lands in the resolved config."""
    from typedrl.ppo import PPOConfig

    defaults = PPOConfig().to_dict()
    document = _printed(capsys, "--set", "num_steps=64", "--set", "activation=relu")
    assert set(document["config"]) | set(document["policy"]) == set(defaults) - {"seed"}
    assert not set(document["config"]) & set(document["policy"])
    assert (document["config"]["num_steps"], document["policy"]["activation"]) == (64, "relu")
    assert _printed(capsys, "--set", "seed=9")["seed"] == 9
    # The policy's fields are reachable as policy.<field> too.
    document = _printed(capsys, "--set", "policy.core=gru", "--set", "policy.core_hidden_size=32")
    assert (document["policy"]["core"], document["policy"]["core_hidden_size"]) == ("gru", 32)


def test_a_policy_section_sets_the_built_in_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """policy: core, encoder and widths in a file; a wrong key and a clash are one line each."""
    user = tmp_path / "user.yaml"
    user.write_text("policy:\n  core: lstm\n  actor_hidden: [32]\n  encoder: small\n")
    document = _printed(capsys, "--config", str(user), "--set", "policy.critic_hidden=[16]")
    assert document["policy"]["core"] == "lstm"
    assert document["policy"]["actor_hidden"] == [32]
    assert document["policy"]["critic_hidden"] == [16]
    assert document["policy"]["encoder"] == "small"
    # Earlier releases wrote the fields under config:, which still reads.
    old = tmp_path / "old.yaml"
    old.write_text("config:\n  actor_hidden: [8]\n")
    assert _printed(capsys, "--config", str(old))["policy"]["actor_hidden"] == [8]
    bad = tmp_path / "bad.yaml"
    bad.write_text("policy:\n  cores: gru\n")
    with pytest.raises(ConfigError, match=r"policy has unknown keys \['cores'\]"):
        main(["--debug", "train", "--config", str(bad), "--print-config"])
    with pytest.raises(ConfigError, match=r"policy\.core is a setting of ppo's built-in policy"):
        main(
            [
                "--debug",
                "train",
                "--policy",
                "typedrl.testing:TinyActorCritic",
                "--set",
                "policy.core=gru",
                "--print-config",
            ]
        )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--set", "lr=1"], r"PPOConfig has no fields \['lr'\]; valid fields: \[.*'gamma'"),
        (["--set", "actor_hidden=64"], r"actor_hidden must be a list such as \[64, 64\]"),
        (["--set", "algorithm.gamma=0.9"], r"PPOConfig has no fields \['algorithm'\]"),
        (["--algo", "apg", "--set", "algorithm.lr=1"], r"APGConfig has no fields"),
        (["--algo", "apg", "--set", "algorithm.critic_iterations=2"], "SHAC fields"),
        (["--set", "gamma"], "--set expects KEY=VALUE"),
        (["--set", "a..b=1"], "empty part in a dotted key"),
        (["--num-envs", "0"], "num_envs must be a positive int"),
        (["--eval-every", "0"], "eval_every must be a positive int"),
        (["--keep-checkpoints", "0"], "keep_checkpoints must be a positive int"),
        (["--env-kwargs", "{bad"], "not a JSON object"),
        (["--env-kwargs", "[1]"], "expects a JSON object or KEY=VALUE"),
        (["--env-kwargs", "novalue"], "expects a JSON object or KEY=VALUE"),
        (["--wrapper", "NoSuchWrapper"], "gymnasium.wrappers has no 'NoSuchWrapper'"),
        (["--wrapper", "tests.cli.factories:Absent"], "has no attribute 'Absent'"),
        (["no_such_module_here:make"], "cannot import module 'no_such_module_here'"),
        (["tests.cli.factories:absent"], "has no attribute 'absent'"),
        (["tests.cli.factories:NOT_CALLABLE"], "is not callable"),
        (["tests.cli.factories:"], "expected 'module:name'"),
    ],
)
def test_flag_errors_are_one_config_error(argv: list[str], message: str) -> None:
    """Each bad flag raises a ConfigError that names what is wrong, before anything runs."""
    with pytest.raises(ConfigError, match=message):
        main(["--debug", "train", *argv, "--no-progress"])


def test_config_file_errors(tmp_path: Path) -> None:
    """A --config file with unknown keys, bad YAML, bad sections or bad run settings."""
    cases = {
        r"unknown keys \['foo'\]": "foo: 1\n",
        "not valid YAML": "config: [\n",
        "config must be a mapping": "config: 3\n",
        r"run has no fields \['colour'\]": "run:\n  colour: red\n",
        "run.vectorization must be one of": "run:\n  vectorization: threads\n",
        "run.wrappers must be a list": "run:\n  wrappers: TimeLimit\n",
        "algo must be one of": "algo: sac\n",
        "seed must be an int": "seed: one\n",
    }
    for index, (message, text) in enumerate(cases.items()):
        path = tmp_path / f"bad{index}.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            main(["--debug", "train", "--config", str(path), "--print-config"])
    with pytest.raises(ConfigError, match="cannot read the config file"):
        main(["--debug", "train", "--config", str(tmp_path / "absent.yaml"), "--print-config"])


def test_env_kwargs_forms() -> None:
    """JSON objects and KEY=VALUE items merge, later ones winning."""
    assert parse_env_kwargs(['{"a": 1, "b": [2]}', "b=3", "c=text"]) == {
        "a": 1,
        "b": 3,
        "c": "text",
    }


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_run_folder_then_resume_into_the_same_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """config.yaml, metrics.csv and summary.json; --resume RUN_DIR appends and continues."""
    run_dir = tmp_path / "run"
    argv = ["train", "CartPole-v1", "--total-timesteps", "64", "--run-dir", str(run_dir)]
    assert main([*argv, *_SMALL]) == 0
    capsys.readouterr()
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["config"]["total_timesteps"] == 64
    rows = _rows(run_dir / "metrics.csv")
    assert [row["step"] for row in rows[:4]] == ["16", "32", "48", "64"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["global_step"] == 64
    assert summary["stopped_by_signal"] is False
    resume = ["train", "--resume", str(run_dir), "--total-timesteps", "128", "--no-progress"]
    assert main([*resume, "--eval-episodes", "3"]) == 0
    out = capsys.readouterr().out
    assert f"run directory   {run_dir}" in out
    steps = [int(row["step"]) for row in _rows(run_dir / "metrics.csv") if row["step"]]
    assert steps[:4] == [16, 32, 48, 64]
    assert max(steps) == 128
    assert sorted(set(steps)) == list(range(16, 129, 16))
    assert json.loads((run_dir / "summary.json").read_text())["global_step"] == 128
    updated = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert updated["config"]["total_timesteps"] == 128
    assert updated["run"]["eval_episodes"] == 3
    assert updated["source"].startswith("typedrl train: the resumed run's")
    checkpoint = load_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    assert checkpoint.counters["env_steps"] == 128
    # What a resume may not change is refused, naming the key and both values.
    cases = [
        (["--set", "learning_rate=0.5"], r"config.learning_rate was 0.001 in the run, now 0.5"),
        (["--num-envs", "4"], "num_envs was 2 in the run, now 4"),
        (["--seed", "1"], "seed was 0 in the run, now 1"),
        (["Pendulum-v1"], "env_id was 'CartPole-v1' in the run, now 'Pendulum-v1'"),
        (["--algo", "apg"], "algo was 'ppo' in the run, now 'apg'"),
        (["--wrapper", "RecordEpisodeStatistics"], r"run.wrappers was \[\] in the run"),
        (["--env-kwargs", "a=1"], r"run.env_kwargs was \{\} in the run"),
        (["--clip-actions"], "run.clip_actions was None in the run, now True"),
        (["--run-dir", str(tmp_path / "other")], "continues in that folder"),
    ]
    for extra, message in cases:
        with pytest.raises(ConfigError, match=message):
            main(["--debug", "train", "--resume", str(run_dir), *extra, "--no-progress"])


def test_resume_needs_a_run_folder_or_checkpoint(tmp_path: Path) -> None:
    """A folder without config.yaml or last.ckpt, or a path that is neither, is refused."""
    with pytest.raises(ConfigError, match="not a run folder"):
        main(["--debug", "train", "--resume", str(tmp_path)])
    (tmp_path / "config.yaml").write_text("algo: ppo\n")
    with pytest.raises(ConfigError, match=r"has no checkpoints/last\.ckpt"):
        main(["--debug", "train", "--resume", str(tmp_path)])
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"")
    with pytest.raises(ConfigError, match="lacks the keys"):
        main(["--debug", "train", "--resume", str(tmp_path)])
    with pytest.raises(ConfigError, match="no such run folder or checkpoint file"):
        main(["--debug", "train", "--resume", str(tmp_path / "absent")])


def test_default_run_folder_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --run-dir the run goes to runs/<algo>-<env>-<YYYYmmdd-HHMMSS>."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_train, "_run_stamp", lambda: "20260101-120000")
    assert main(["train", "CartPole-v1", "--total-timesteps", "32", *_SMALL]) == 0
    run_dir = tmp_path / "runs" / "ppo-CartPole-v1-20260101-120000"
    assert (run_dir / "config.yaml").is_file()
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.parametrize(
    "env",
    ["tests.cli.factories:cartpole", "tests.cli.factories:builtin_cartpole"],
)
def test_train_on_a_factory(tmp_path: Path, env: str) -> None:
    """A single-env factory (with kwargs and wrappers) and a vector factory both train."""
    run_dir = tmp_path / "run"
    argv = ["train", env, "--total-timesteps", "32", "--run-dir", str(run_dir), *_SMALL]
    if env.endswith(":cartpole"):
        argv += [
            "--env-kwargs",
            "max_episode_steps=20",
            "--wrapper",
            "tests.cli.factories:HalveReward",
        ]
    assert main(argv) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_id"] == env
    if env.endswith(":cartpole"):
        # Halved rewards over episodes of at most 20 steps.
        assert summary["final_eval_return_mean"] <= 10.0
        saved = yaml.safe_load((run_dir / "config.yaml").read_text())
        assert saved["run"]["env_kwargs"] == {"max_episode_steps": 20}
        assert saved["run"]["wrappers"] == ["tests.cli.factories:HalveReward"]
        # Evaluating the run plays the env it trained on: its kwargs and wrappers.
        assert main(["evaluate", str(run_dir), "--episodes", "4", "--num-envs", "2"]) == 0
        report = json.loads((run_dir / "eval.json").read_text())
        assert report["length_max"] <= 20
        assert report["return_max"] == pytest.approx(0.5 * report["length_max"])
        # Options given to evaluate go over the run's.
        argv = ["evaluate", str(run_dir), "--episodes", "2", "--env-kwargs", "max_episode_steps=5"]
        assert main(argv) == 0
        assert json.loads((run_dir / "eval.json").read_text())["length_max"] <= 5


def test_clip_actions_reaches_the_env_and_the_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--clip-actions / --no-clip-actions: config.yaml, the env built, and evaluate's env."""
    assert _printed(capsys, "Pendulum-v1")["run"]["clip_actions"] is None
    assert _printed(capsys, "Pendulum-v1", "--clip-actions")["run"]["clip_actions"] is True
    assert _printed(capsys, "Pendulum-v1", "--no-clip-actions")["run"]["clip_actions"] is False
    built: list[bool | None] = []
    make = typedrl.envs.make

    def spy(env_id: str, **kwargs: Any) -> Any:
        built.append(kwargs.get("clip_actions"))
        return make(env_id, **kwargs)

    monkeypatch.setattr(typedrl.envs, "make", spy)
    run_dir = tmp_path / "run"
    argv = ["train", "Pendulum-v1", "--clip-actions", "--total-timesteps", "16"]
    assert main([*argv, "--run-dir", str(run_dir), *_SMALL]) == 0
    assert built == [True, True]  # the training env and the evaluation env
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["run"]["clip_actions"] is True
    monkeypatch.setattr("typedrl.restore.make", spy)
    assert main(["evaluate", str(run_dir), "--episodes", "2", "--num-envs", "2"]) == 0
    assert built[-1] is True
    assert "clip_actions=True (from" in capsys.readouterr().out
    config = tmp_path / "bad.yaml"
    config.write_text("run:\n  clip_actions: 3\n")
    with pytest.raises(ConfigError, match=r"run\.clip_actions must be a bool, got 3"):
        main(["--debug", "train", "--config", str(config), "--print-config"])


@pytest.mark.parametrize(
    ("env", "extra", "message"),
    [
        ("tests.cli.factories:not_an_env", [], r"must return a gymnasium.Env .*got 7"),
        (
            "tests.cli.factories:pool_without_num_envs",
            [],
            r"returned a vector env \(_PoolOfOne\) from a factory without a num_envs parameter",
        ),
        # The first build is the memory check's one-row probe: either build is refused.
        (
            "tests.cli.factories:wrong_rows",
            [],
            r"returned a VecEnv of \d+ rows, expected num_envs=\d+",
        ),
        ("tests.cli.factories:cartpole", ["--env-kwargs", "colour=1"], "could not be called"),
        (
            "tests.cli.factories:builtin_cartpole",
            ["--wrapper", "RecordEpisodeStatistics"],
            "builds vector envs itself",
        ),
        (
            "tests.cli.factories:builtin_cartpole",
            ["--clip-actions"],
            "clip_actions applies only to Gymnasium envs",
        ),
    ],
)
def test_factory_errors(tmp_path: Path, env: str, extra: list[str], message: str) -> None:
    """A factory returning the wrong thing, or given what it cannot take, is one ConfigError."""
    argv = ["--debug", "train", env, "--run-dir", str(tmp_path / "run"), *_SMALL, *extra]
    with pytest.raises(ConfigError, match=message):
        main(argv)


def _files(run_dir: Path) -> dict[str, bytes]:
    """Every file under ``run_dir`` by relative path, with its bytes."""
    return {
        str(path.relative_to(run_dir)): path.read_bytes()
        for path in sorted(run_dir.rglob("*"))
        if path.is_file()
    }


def test_a_new_run_refuses_an_existing_run_and_overwrite_starts_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--run-dir of a run: one line, nothing touched; --overwrite removes only a run's files."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()  # an empty folder is fine to use
    argv = ["train", "CartPole-v1", "--run-dir", str(run_dir), *_SMALL, "--checkpoint-every", "1"]
    assert main([*argv, "--total-timesteps", "64"]) == 0
    (run_dir / "eval.json").write_text("{}")
    (run_dir / "notes.txt").write_text("mine")
    before = _files(run_dir)
    capsys.readouterr()
    assert main([*argv, "--total-timesteps", "32"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == (
        f"typedrl: ConfigError: --run-dir {run_dir} holds a run (config.yaml, metrics.csv, "
        f"summary.json, checkpoints/); continue it with --resume {run_dir}, choose another "
        "--run-dir, or pass --overwrite to replace it"
    )
    assert _files(run_dir) == before
    assert main([*argv, "--total-timesteps", "32", "--overwrite"]) == 0
    assert (
        "overwrite       removed config.yaml, metrics.csv, summary.json" in capsys.readouterr().out
    )
    assert [row["step"] for row in _rows(run_dir / "metrics.csv")][:2] == ["16", "32"]
    assert max(int(row["step"]) for row in _rows(run_dir / "metrics.csv")) == 32
    assert sorted(path.name for path in (run_dir / "checkpoints").iterdir()) == [
        "best.ckpt",
        "epoch_00000001.ckpt",
        "epoch_00000002.ckpt",
        "last.ckpt",
    ]
    assert (run_dir / "notes.txt").read_text() == "mine"
    assert not (run_dir / "eval.json").exists()
    assert json.loads((run_dir / "summary.json").read_text())["global_step"] == 32


_HOLD_A_FOLDER = """
import sys
from pathlib import Path
from typedrl.cli._run_folder import lock_run_dir
lock_run_dir(Path(sys.argv[1]), flag="holder")
print("locked", flush=True)
sys.stdin.read()
"""


def test_a_folder_another_process_trains_in_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """While another process holds a run folder, no overwrite or resume touches it."""
    run_dir = tmp_path / "run"
    argv = ["train", "CartPole-v1", "--run-dir", str(run_dir), *_SMALL]
    assert main([*argv, "--total-timesteps", "64"]) == 0
    assert not (run_dir / LOCK_FILE).exists()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_A_FOLDER, str(run_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        before = _files(run_dir)
        assert before[LOCK_FILE] == f"{holder.pid}\n".encode()
        capsys.readouterr()
        for extra in (["--overwrite"], ["--resume", str(run_dir)]):
            assert main([*argv, "--total-timesteps", "128", *extra]) == 1
            assert capsys.readouterr().err.strip().splitlines()[0] == (
                f"typedrl: ConfigError: --run-dir {run_dir} is in use: a typedrl train in "
                f"process {holder.pid} is writing to it; wait for it to end or stop it, or "
                "choose another --run-dir (nothing was changed)"
            )
            assert _files(run_dir) == before
    finally:
        holder.communicate(timeout=60)
    # The holder is gone: its lock went with it, though its file stays.
    assert main([*argv, "--total-timesteps", "128", "--resume", str(run_dir)]) == 0
    assert json.loads((run_dir / "summary.json").read_text())["global_step"] == 128
    assert not (run_dir / LOCK_FILE).exists()


def test_the_run_folder_lock_is_held_once_and_outlives_no_process(tmp_path: Path) -> None:
    """Taking a held folder again is a no-op; a lock file left by a killed process is free."""
    run_dir = tmp_path / "new" / "run"
    lock_run_dir(run_dir, flag="--run-dir x")
    try:
        assert (run_dir / LOCK_FILE).read_text() == f"{os.getpid()}\n"
        lock_run_dir(run_dir, flag="--run-dir x")
    finally:
        unlock_run_dir(run_dir)
    assert not (run_dir / LOCK_FILE).exists()
    unlock_run_dir(run_dir)  # not held: nothing to do
    (run_dir / LOCK_FILE).write_text("999999\n")  # no process holds its lock
    lock_run_dir(run_dir, flag="--run-dir x")
    unlock_run_dir(run_dir)
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        lock_run_dir(tmp_path / "file", flag="--run-dir file")


def test_a_run_that_fails_before_training_leaves_no_folder_behind(tmp_path: Path) -> None:
    """A failed start removes the config.yaml it wrote, and the folder when it made it."""
    new, empty = tmp_path / "new", tmp_path / "empty"
    empty.mkdir()
    for run_dir in (new, empty):
        argv = ["--debug", "train", "tests.cli.factories:wrong_rows", "--run-dir", str(run_dir)]
        with pytest.raises(ConfigError, match="returned a VecEnv of"):
            main([*argv, *_SMALL])
    assert not new.exists()
    assert list(empty.iterdir()) == []


def test_resume_without_last_ckpt_takes_the_newest_periodic_one_and_cleans_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """epoch_<n>.ckpt that loads, stale .tmp removed, rows past it dropped; a met budget: no-op."""
    run_dir = tmp_path / "run"
    argv = ["train", "CartPole-v1", "--run-dir", str(run_dir), *_SMALL, "--checkpoint-every", "2"]
    assert main([*argv, "--total-timesteps", "64"]) == 0
    checkpoints = run_dir / "checkpoints"
    (checkpoints / "last.ckpt").unlink()
    (checkpoints / "epoch_00000004.ckpt").write_bytes(b"cut short")
    (checkpoints / ".last.ckpt.0123abcd.tmp").write_bytes(b"")
    capsys.readouterr()
    assert main(["train", "--resume", str(run_dir), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert (
        f"resuming from   {checkpoints / 'epoch_00000002.ckpt'} (the run has no last.ckpt: its "
        "newest periodic checkpoint that loads; epoch_00000004.ckpt does not load)"
    ) in out
    assert "removed         checkpoints/.last.ckpt.0123abcd.tmp" in out
    assert "dropped 3 row(s) logged after the checkpoint (env step 32)" in out
    assert not (checkpoints / ".last.ckpt.0123abcd.tmp").exists()
    steps = [int(row["step"]) for row in _rows(run_dir / "metrics.csv")]
    assert steps == [16, 32, 48, 64, 64]  # four iterations once, then the final evaluation
    before = _files(run_dir)
    assert main(["train", "--resume", str(run_dir), "--no-progress"]) == 0
    assert capsys.readouterr().out == (
        "the run already reached its budget of 64 env steps (its checkpoint is at 64); "
        "raise --total-timesteps to continue\n"
    )
    assert _files(run_dir) == before
    (checkpoints / "last.ckpt").unlink()
    for path in checkpoints.glob("epoch_*.ckpt"):
        path.unlink()
    with pytest.raises(ConfigError, match=r"no checkpoints/last\.ckpt or epoch_<n>\.ckpt to"):
        main(["--debug", "train", "--resume", str(run_dir)])
