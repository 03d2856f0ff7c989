"""Tests for typedrl.checkpoint: format, schema versions, atomic write, safe load, RNG states."""

import os
import random
import re
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pytest
import torch

import typedrl
from typedrl import checkpoint as checkpoint_module
from typedrl.checkpoint import (
    DEFAULT_POLICY,
    FORMAT_MARKER,
    SCHEMA_VERSION,
    Checkpoint,
    CheckpointMetadata,
    CheckpointPaths,
    RngState,
    capture_rng_state,
    load_checkpoint,
    load_into,
    restore_rng_state,
    save_checkpoint,
)
from typedrl.errors import CheckpointError, ConfigError
from typedrl.testing import CounterState

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def _trained_parts() -> tuple[
    torch.nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler
]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.99))
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    for _ in range(2):
        optimizer.zero_grad()
        model(torch.randn(5, 3)).square().mean().backward()
        optimizer.step()
        scheduler.step()
    return model, optimizer, scheduler


def _checkpoint(**overrides: Any) -> Checkpoint:
    model, optimizer, scheduler = _trained_parts()
    fields: dict[str, Any] = {
        "kind": "ppo",
        "env_id": "CartPole-v1",
        "modules": {
            "policy": model.state_dict(),
            "observation_normalizer": {
                "mean": torch.arange(3, dtype=torch.float64) / 3,
                "count": torch.tensor(7, dtype=torch.int64),
            },
        },
        "optimizers": {"policy": optimizer.state_dict()},
        "schedulers": {"policy": scheduler.state_dict()},
        "counters": {"epoch": 12, "big": INT64_MAX, "small": INT64_MIN, "seconds": 0.1},
        "best_score": -1.0 / 3.0,
        "config": {
            "lr": 3e-4,
            "hidden_sizes": [64, 64],
            "env": {"id": "CartPole-v1", "num_envs": 8, "kwargs": {}},
            "normalize": True,
            "clip": None,
        },
        "rng": (capture_rng_state(),),
    }
    fields.update(overrides)
    return Checkpoint(**fields)


def _assert_same(left: object, right: object, where: str = "") -> None:
    """Structural equality with exact types and bit-equal tensors."""
    assert type(left) is type(right), f"{where}: {type(left)} != {type(right)}"
    if isinstance(left, torch.Tensor):
        assert isinstance(right, torch.Tensor)
        assert left.dtype == right.dtype, where
        assert left.shape == right.shape, where
        assert torch.equal(left, right), where
    elif isinstance(left, dict):
        assert isinstance(right, dict)
        assert list(left) == list(right), where
        for key in left:
            _assert_same(left[key], right[key], f"{where}[{key!r}]")
    elif isinstance(left, list | tuple):
        assert isinstance(right, list | tuple)
        assert len(left) == len(right), where
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            _assert_same(a, b, f"{where}[{index}]")
    else:
        assert left == right, where


def _rewrite(path: Path, change: dict[str, Any]) -> None:
    payload = torch.load(path, weights_only=True)
    payload.update(change)
    torch.save(payload, path)


# ---------------------------------------------------------------------------- round trip


def test_round_trip_restores_every_field(tmp_path: Path) -> None:
    """Every field comes back with the same types, bit-equal tensors and exact numbers."""
    original = _checkpoint()
    path = save_checkpoint(tmp_path / "run" / "last.ckpt", original)
    assert path == tmp_path / "run" / "last.ckpt"
    loaded = load_checkpoint(path, expected_kind="ppo")
    assert loaded.schema_version == SCHEMA_VERSION
    assert loaded.kind == "ppo"
    assert loaded.env_id == "CartPole-v1"
    for group in ("modules", "optimizers", "schedulers", "counters", "config"):
        _assert_same(getattr(original, group), getattr(loaded, group), group)
    assert loaded.counters["big"] == INT64_MAX
    assert loaded.counters["small"] == INT64_MIN
    assert loaded.best_score == original.best_score
    assert loaded.metadata == original.metadata
    assert len(loaded.rng) == 1
    for name in RngState.__dataclass_fields__:
        _assert_same(getattr(original.rng[0], name), getattr(loaded.rng[0], name), name)


def test_resumed_training_matches_uninterrupted_training(tmp_path: Path) -> None:
    """Model, optimizer and scheduler restored from a file continue bit-exactly."""
    model, optimizer, scheduler = _trained_parts()
    checkpoint = Checkpoint(
        kind="apg",
        modules={"policy": model.state_dict()},
        optimizers={"policy": optimizer.state_dict()},
        schedulers={"policy": scheduler.state_dict()},
        rng=(capture_rng_state(),),
    )
    path = save_checkpoint(tmp_path / "last.ckpt", checkpoint)

    def step(
        net: torch.nn.Module,
        opt: torch.optim.Optimizer,
        sched: torch.optim.lr_scheduler.LRScheduler,
    ) -> None:
        opt.zero_grad()
        net(torch.randn(5, 3)).square().mean().backward()
        opt.step()
        sched.step()

    for _ in range(3):
        step(model, optimizer, scheduler)
    expected = [parameter.detach().clone() for parameter in model.parameters()]

    fresh_model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    fresh_optimizer = torch.optim.Adam(fresh_model.parameters(), lr=1.0)
    fresh_scheduler = torch.optim.lr_scheduler.StepLR(fresh_optimizer, step_size=1, gamma=0.5)
    loaded = load_checkpoint(path, expected_kind="apg")
    load_into(fresh_model, loaded.modules["policy"], name="policy", path=path)
    load_into(fresh_optimizer, loaded.optimizers["policy"], name="optimizer", path=path)
    load_into(fresh_scheduler, loaded.schedulers["policy"], name="scheduler", path=path)
    restore_rng_state(loaded.rng_state(0))
    for _ in range(3):
        step(fresh_model, fresh_optimizer, fresh_scheduler)
    for want, got in zip(expected, fresh_model.parameters(), strict=True):
        assert torch.equal(want, got)


# ---------------------------------------------------------------------------- RNG states


def _draws() -> tuple[list[float], list[int], list[float], list[float]]:
    return (
        torch.randn(4).tolist() + torch.rand(2).tolist(),
        torch.randint(0, 1000, (3,)).tolist(),
        [*np.random.standard_normal(3).tolist(), float(np.random.rand())],
        [random.random(), random.gauss(0.0, 1.0), float(random.randrange(1000))],
    )


def test_rng_round_trip_reproduces_next_draws(tmp_path: Path) -> None:
    """Restoring a captured state, also through a file, repeats torch/numpy/python draws."""
    np.random.standard_normal()  # leave a cached Gaussian in numpy's legacy state
    random.gauss(0.0, 1.0)  # and in random's gauss_next
    state = capture_rng_state()
    assert state.numpy_has_gauss == 1
    assert state.python_gauss_next is not None
    first = _draws()
    restore_rng_state(state)
    assert _draws() == first

    path = save_checkpoint(
        tmp_path / "rng.ckpt", Checkpoint(kind="ppo", modules={"policy": {}}, rng=(state,))
    )
    restore_rng_state(load_checkpoint(path).rng_state(0))
    assert _draws() == first


def test_rng_state_validates_its_fields() -> None:
    """A malformed RNG state is refused on construction, naming the field."""
    state = capture_rng_state()
    with pytest.raises(ConfigError, match=r"RngState\.numpy_key must be an int64 CPU tensor"):
        RngState(
            torch_cpu=state.torch_cpu,
            numpy_key=state.numpy_key[:10],
            numpy_pos=state.numpy_pos,
            numpy_has_gauss=state.numpy_has_gauss,
            numpy_cached_gaussian=state.numpy_cached_gaussian,
            python_version=state.python_version,
            python_state=state.python_state,
            python_gauss_next=state.python_gauss_next,
        )
    with pytest.raises(ConfigError, match=r"RngState\.torch_cpu must be a 1-D uint8 CPU tensor"):
        RngState(
            torch_cpu=state.torch_cpu.float(),
            numpy_key=state.numpy_key,
            numpy_pos=state.numpy_pos,
            numpy_has_gauss=state.numpy_has_gauss,
            numpy_cached_gaussian=state.numpy_cached_gaussian,
            python_version=state.python_version,
            python_state=state.python_state,
            python_gauss_next=state.python_gauss_next,
        )


def test_cuda_states_round_trip_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """With CUDA visible, every device's state is captured and set back (CUDA simulated)."""
    fake = [torch.arange(8, dtype=torch.uint8), torch.arange(8, 16, dtype=torch.uint8)]
    restored: list[list[torch.Tensor]] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: list(fake))
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", restored.append)
    state = capture_rng_state()
    assert state.torch_cuda == tuple(fake)
    restore_rng_state(state)
    assert restored == [fake]


def test_cuda_device_count_mismatch_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Restoring two CUDA states with one visible device fails before any generator changes."""
    state = capture_rng_state()
    two_devices = RngState(
        torch_cpu=torch.zeros_like(state.torch_cpu),
        torch_cuda=(torch.zeros(8, dtype=torch.uint8), torch.zeros(8, dtype=torch.uint8)),
        numpy_key=state.numpy_key,
        numpy_pos=state.numpy_pos,
        numpy_has_gauss=state.numpy_has_gauss,
        numpy_cached_gaussian=state.numpy_cached_gaussian,
        python_version=state.python_version,
        python_state=state.python_state,
        python_gauss_next=state.python_gauss_next,
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    before = torch.get_rng_state()
    with pytest.raises(CheckpointError, match=r"2 CUDA generator state\(s\), but 1 CUDA device"):
        restore_rng_state(two_devices)
    assert torch.equal(torch.get_rng_state(), before)


def test_rng_state_for_missing_rank_is_an_error() -> None:
    """Asking for a rank the checkpoint has no state for names the world size."""
    with pytest.raises(CheckpointError, match=r"1 rank\(s\) \(world size 1\), rank 1 asked"):
        _checkpoint().rng_state(1)


# ---------------------------------------------------------------------------- atomic write


def _boom(*args: object, **kwargs: object) -> NoReturn:
    raise RuntimeError("disk on fire")


@pytest.mark.parametrize("failing", ["torch.save", "os.replace", "os.fsync"])
def test_failed_write_leaves_target_and_folder_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """A crash while writing keeps the previous file and removes the temporary file."""
    path = save_checkpoint(tmp_path / "last.ckpt", _checkpoint(counters={"epoch": 1}))
    before = path.read_bytes()
    module_name, attribute = failing.split(".")
    monkeypatch.setattr(torch if module_name == "torch" else os, attribute, _boom)
    with pytest.raises(CheckpointError, match=r"cannot write checkpoint .*last\.ckpt.*unchanged"):
        save_checkpoint(path, _checkpoint(counters={"epoch": 2}))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [entry.name for entry in tmp_path.iterdir()] == ["last.ckpt"]
    assert load_checkpoint(path).counters == {"epoch": 1}


def test_interrupted_write_removes_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt during the write propagates as is and leaves no temporary file."""

    def interrupt(*args: object, **kwargs: object) -> NoReturn:
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", interrupt)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path / "last.ckpt", _checkpoint())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_written_file_gets_umask_permissions(tmp_path: Path) -> None:
    """The checkpoint gets the mode any new file gets, not a private temp-file mode."""
    umask = os.umask(0o022)
    try:
        path = save_checkpoint(tmp_path / "last.ckpt", _checkpoint())
    finally:
        os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o644


def test_unstorable_state_is_refused_before_writing(tmp_path: Path) -> None:
    """A value weights-only loading could not read back is named before any file exists."""
    state = {"weight": torch.zeros(2), "extra": {"scale": np.float64(2.0)}}
    with pytest.raises(ConfigError, match=r"Checkpoint\.modules\['policy'\]\['extra'\]\['scale'\]"):
        Checkpoint(kind="ppo", modules={"policy": state}, rng=(capture_rng_state(),))
    with pytest.raises(ConfigError, match=r"optimizers\['policy'\]\['fn'\] holds"):
        Checkpoint(
            kind="ppo",
            modules={"policy": {}},
            optimizers={"policy": {"fn": len}},
            rng=(capture_rng_state(),),
        )
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- safe load


def test_missing_file_and_folder(tmp_path: Path) -> None:
    """A missing path or a folder gives a CheckpointError naming it."""
    with pytest.raises(CheckpointError, match=r"absent\.ckpt does not exist"):
        load_checkpoint(tmp_path / "absent.ckpt")
    with pytest.raises(CheckpointError, match="is not a regular file"):
        load_checkpoint(tmp_path)


def test_truncated_and_empty_files(tmp_path: Path) -> None:
    """Half a checkpoint, or zero bytes, is reported as such with the file name."""
    path = save_checkpoint(tmp_path / "last.ckpt", _checkpoint())
    data = path.read_bytes()
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"truncated\.ckpt is truncated, corrupt"):
        load_checkpoint(truncated)
    empty = tmp_path / "empty.ckpt"
    empty.write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"empty\.ckpt is empty \(0 bytes\)"):
        load_checkpoint(empty)


def test_foreign_files(tmp_path: Path) -> None:
    """A bare state dict, a pickled module and a text file are refused as foreign."""
    bare = tmp_path / "bare.pt"
    torch.save(torch.nn.Linear(2, 2).state_dict(), bare)
    with pytest.raises(CheckpointError, match=r"bare\.pt is not a typedrl checkpoint.*'weight'"):
        load_checkpoint(bare)
    tensor = tmp_path / "tensor.pt"
    torch.save(torch.zeros(3), tensor)
    with pytest.raises(CheckpointError, match=r"tensor\.pt is not a typedrl checkpoint"):
        load_checkpoint(tensor)
    pickled = tmp_path / "module.pt"
    torch.save(torch.nn.Linear(2, 2), pickled)
    with pytest.raises(
        CheckpointError,
        match=r"module\.pt .*Python objects .*Unsupported global: GLOBAL torch.nn.*never code",
    ) as err:
        load_checkpoint(pickled)
    assert "weights_only" + "=False" not in str(err.value)
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint\n")
    with pytest.raises(CheckpointError, match=r"notes\.txt is truncated, corrupt or not a torch"):
        load_checkpoint(text)


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (4, "has schema_version 4, but this typedrl reads schema versions [1, 2, 3] only; upgr"),
        (0, "has schema_version 0, but this typedrl reads schema versions [1, 2, 3] only; it c"),
        (None, "has schema_version None"),
        (True, "has schema_version True"),
        (torch.ones(2), "has schema_version tensor([1., 1.])"),
    ],
)
def test_wrong_schema_version(tmp_path: Path, version: object, message: str) -> None:
    """Another (or no) schema version names the file, the found and the supported version."""
    path = save_checkpoint(tmp_path / "last.ckpt", _checkpoint())
    _rewrite(path, {"schema_version": version})
    with pytest.raises(CheckpointError, match=re.escape(f"{path} {message}")):
        load_checkpoint(path)


def _schema_1_payload() -> dict[str, Any]:
    """A checkpoint as release files of schema version 1 hold it, built key by key."""
    numpy_state = np.random.get_state(legacy=True)
    assert isinstance(numpy_state, tuple)
    _, key, pos, has_gauss, cached_gaussian = numpy_state
    python_version, python_words, gauss_next = random.getstate()
    return {
        "format": "typedrl.checkpoint",
        "schema_version": 1,
        "kind": "apg",
        "modules": {"policy": {"weight": torch.arange(6.0).reshape(2, 3)}},
        "optimizers": {},
        "schedulers": {},
        "counters": {"updates": 40, "seconds": 1.5},
        "best_score": -12.5,
        "config": {"horizon": 32, "sizes": [64, 64]},
        "rng": [
            {
                "torch": {"cpu": torch.get_rng_state(), "cuda": []},
                "numpy": {
                    "bit_generator": "MT19937",
                    "key": torch.from_numpy(key.astype(np.int64)),
                    "pos": int(pos),
                    "has_gauss": int(has_gauss),
                    "cached_gaussian": float(cached_gaussian),
                },
                "python": {
                    "version": python_version,
                    "state": torch.tensor(python_words, dtype=torch.int64),
                    "gauss_next": gauss_next,
                },
            }
        ],
        "metadata": {
            "typedrl_version": "0.1.0",
            "torch_version": "2.5.0",
            "created": "2025-01-31T12:00:00+00:00",
            "world_size": 1,
        },
    }


def test_schema_1_file_loads_without_env_id(tmp_path: Path) -> None:
    """A schema-1 file loads as schema 3: no env_id, the default policy, the rest kept."""
    payload = _schema_1_payload()
    path = tmp_path / "old.ckpt"
    torch.save(payload, path)
    first = _draws()
    loaded = load_checkpoint(path, expected_kind="apg")
    assert loaded.schema_version == SCHEMA_VERSION == 3
    assert (loaded.env_id, loaded.policy_factory) == (None, DEFAULT_POLICY)
    assert (loaded.counters, loaded.best_score, loaded.config) == (
        payload["counters"],
        payload["best_score"],
        payload["config"],
    )
    _assert_same(payload["modules"], loaded.modules)
    assert loaded.metadata == CheckpointMetadata(**payload["metadata"])
    restore_rng_state(loaded.rng_state(0))
    assert _draws() == first

    resaved = torch.load(save_checkpoint(tmp_path / "new.ckpt", loaded), weights_only=True)
    assert (resaved["schema_version"], resaved["env_id"]) == (3, None)
    assert resaved["policy_factory"] == DEFAULT_POLICY


def test_schema_keys_are_exact_per_version(tmp_path: Path) -> None:
    """Schema 3 writes env_id and policy_factory after kind; a key of another version is refused."""
    path = save_checkpoint(tmp_path / "last.ckpt", _checkpoint(env_id=None))
    payload = torch.load(path, weights_only=True)
    assert list(payload) == [
        "format",
        "schema_version",
        "kind",
        "env_id",
        "policy_factory",
        "modules",
        "optimizers",
        "schedulers",
        "counters",
        "best_score",
        "config",
        "rng",
        "metadata",
    ]
    assert (payload["format"], payload["env_id"]) == (FORMAT_MARKER, None)
    assert load_checkpoint(path).env_id is None
    _rewrite(path, {"schema_version": 1})
    with pytest.raises(CheckpointError, match=r"unexpected \['env_id', 'policy_factory'\]"):
        load_checkpoint(path)
    old = tmp_path / "old.ckpt"
    torch.save({**_schema_1_payload(), "schema_version": 2}, old)
    with pytest.raises(CheckpointError, match=r"malformed: .*missing \['env_id'\]"):
        load_checkpoint(old)


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "typedrl/Pendulum-v0", "", None])
def test_env_id_round_trip(tmp_path: Path, env_id: str | None) -> None:
    """Any builtin str, or None, is stored and read back as is."""
    path = save_checkpoint(tmp_path / "last.ckpt", _checkpoint(env_id=env_id))
    assert load_checkpoint(path).env_id == env_id


def test_env_id_must_be_a_builtin_str_or_none() -> None:
    """A str subclass or a non-str env id is refused, with the conversion when one exists."""

    class EnvName(str):
        __slots__ = ()

    with pytest.raises(ConfigError, match=r"env_id must be .*got 'a' \(type EnvName\); convert"):
        _checkpoint(env_id=EnvName("a"))
    with pytest.raises(ConfigError, match=r"env_id must be a builtin str .* got 1 \(type int\)$"):
        _checkpoint(env_id=1)


def test_wrong_kind(tmp_path: Path) -> None:
    """A checkpoint of another trainer is refused when a kind is expected."""
    path = save_checkpoint(tmp_path / "last.ckpt", _checkpoint())
    with pytest.raises(CheckpointError, match=r"last\.ckpt is of kind 'ppo', expected kind 'apg'"):
        load_checkpoint(path, expected_kind="apg")
    _rewrite(path, {"kind": "dqn"})
    assert load_checkpoint(path).kind == "dqn"  # a trainer of one's own declares its kind
    _rewrite(path, {"kind": "no such kind"})
    with pytest.raises(CheckpointError, match=r"malformed: 'kind' must be an identifier-like str"):
        load_checkpoint(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"counters": {"epoch": "12"}}, r"Checkpoint\.counters\['epoch'\] must be an int"),
        ({"best_score": float("nan")}, r"Checkpoint\.best_score must be a finite float"),
        ({"modules": {"critic": {}}}, r"must hold the policy's state dict under 'policy'"),
        ({"config": {"sizes": (1, 2)}}, r"Checkpoint\.config\['sizes'\] must be JSON-like"),
        ({"env_id": 7}, r"Checkpoint\.env_id must be a builtin str .* or None"),
        ({"rng": "seed"}, r"rng must be a list"),
        ({"rng": []}, r"Checkpoint\.rng must hold one RngState per rank"),
        ({"metadata": {"world_size": 1}}, r"metadata must have the keys .* missing"),
        ({"extra": 1}, r"the checkpoint must have the keys .* unexpected \['extra'\]"),
        ({"kind": "in ference"}, r"'kind' must be an identifier-like str"),
        ({"policy_factory": 3}, r"policy_factory must be a dict with 'target' and 'kwargs'"),
        ({"policy_factory": {"target": "m.f"}}, r"policy_factory: PolicyFactory\.target must be"),
    ],
)
def test_malformed_fields_are_named(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    """A loaded file whose field has the wrong type or shape names the file and the field."""
    path = save_checkpoint(tmp_path / "last.ckpt", _checkpoint())
    _rewrite(path, change)
    with pytest.raises(
        CheckpointError, match=rf"checkpoint .*last\.ckpt is malformed: .*{message}"
    ):
        load_checkpoint(path)


def test_malformed_rng_state_is_named(tmp_path: Path) -> None:
    """A broken RNG state in a file names the rank and the field."""
    path = save_checkpoint(tmp_path / "last.ckpt", _checkpoint())
    payload = torch.load(path, weights_only=True)
    payload["rng"][0]["numpy"]["key"] = torch.zeros(3, dtype=torch.int64)
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=r"malformed: rng\[0\]: RngState\.numpy_key"):
        load_checkpoint(path)
    del payload["rng"][0]["python"]["gauss_next"]
    torch.save(payload, path)
    with pytest.raises(CheckpointError, match=r"rng\[0\]\['python'\] must have the keys"):
        load_checkpoint(path)


# ---------------------------------------------------------------------------- validation


def test_config_must_be_json_like() -> None:
    """Non-JSON config values raise ConfigError naming the path to them."""
    with pytest.raises(
        ConfigError, match=r"Checkpoint\.config\['net'\]\['sizes'\]\[1\] .*use a list"
    ):
        _checkpoint(config={"net": {"sizes": [64, (32, 32)]}})
    with pytest.raises(ConfigError, match=r"Checkpoint\.config\['lr'\] must be JSON-like"):
        _checkpoint(config={"lr": np.float32(0.1)})
    with pytest.raises(
        ConfigError, match=r"Checkpoint\.config\['lr'\] .*float64\); convert it with float"
    ):
        _checkpoint(config={"lr": np.float64(0.1)})
    with pytest.raises(ConfigError, match=r"Checkpoint\.config\['env'\] keys must be str"):
        _checkpoint(config={"env": {1: "x"}})
    with pytest.raises(ConfigError, match=r"Checkpoint\.config must be a dict"):
        _checkpoint(config=[1, 2])


@pytest.mark.parametrize(
    ("counters", "message"),
    [
        ({"steps": 2**63}, r"counters\['steps'\] must be an int in \[-9223372036854775808"),
        ({"steps": True}, r"counters\['steps'\] must be an int in the int64 range"),
        ({"steps": np.int64(3)}, r"convert numpy or tensor scalars"),
        ({"loss": float("inf")}, r"counters\['loss'\] must be an int in the int64 range or a"),
        ({1: 2}, r"Checkpoint\.counters keys must be str"),
    ],
)
def test_counters_are_validated(counters: dict[Any, Any], message: str) -> None:
    """Counters are builtin ints in the int64 range or finite floats, under str keys."""
    with pytest.raises(ConfigError, match=message):
        _checkpoint(counters=counters)


def test_fields_that_must_agree() -> None:
    """Kind, env id, schema version and world size are checked together."""
    with pytest.raises(ConfigError, match=r"schema_version must be 3, got 1"):
        _checkpoint(schema_version=1)
    with pytest.raises(ConfigError, match=r"kind must be an identifier-like str .*got 'my kind'"):
        _checkpoint(kind="my kind")
    with pytest.raises(ConfigError, match=r"kind must be an identifier-like str .*got ''"):
        _checkpoint(kind="")
    assert _checkpoint(kind="random_search").kind == "random_search"
    with pytest.raises(ConfigError, match=r"one RngState per rank \(metadata\.world_size=2\)"):
        _checkpoint(metadata=CheckpointMetadata.now(world_size=2))
    two_ranks = _checkpoint(
        rng=[capture_rng_state(), capture_rng_state()],
        metadata=CheckpointMetadata.now(world_size=2),
    )
    assert isinstance(two_ranks.rng, tuple)
    with pytest.raises(ConfigError, match=r"world_size must be an int in \[1,"):
        CheckpointMetadata.now(world_size=0)


def test_repr_is_a_summary() -> None:
    """The repr lists names and counters, never tensor contents."""
    text = repr(_checkpoint())
    assert text.startswith(
        "Checkpoint(kind='ppo', env_id='CartPole-v1', policy_factory=None, "
        "modules=['observation_normalizer', 'policy']"
    )
    assert "tensor(" not in text
    assert repr(capture_rng_state()).startswith("RngState(torch_cuda_devices=")


# ---------------------------------------------------------------------------- load_into


def test_load_into_names_component_and_file(tmp_path: Path) -> None:
    """Shape mismatches, missing keys and optimizer mismatches become CheckpointErrors."""
    path = tmp_path / "last.ckpt"
    state = torch.nn.Linear(3, 2).state_dict()
    with pytest.raises(
        CheckpointError,
        match=r"(?s)cannot restore policy from checkpoint .*last\.ckpt: .*size mismatch",
    ):
        load_into(torch.nn.Linear(4, 2), state, name="policy", path=path)
    with pytest.raises(CheckpointError, match=r"(?s)restore critic from .*Missing key"):
        load_into(torch.nn.Linear(3, 2), {"weight": state["weight"]}, name="critic", path=path)
    one_param = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
    two_params = torch.optim.SGD(torch.nn.Linear(3, 2).parameters(), lr=0.1)
    with pytest.raises(CheckpointError, match=r"cannot restore optimizers\['policy'\] from"):
        load_into(two_params, one_param.state_dict(), name="optimizers['policy']", path=path)
    with pytest.raises(
        CheckpointError, match=r"restore counter from .*CheckpointError: CounterState"
    ):
        load_into(CounterState(), {"steps": "x"}, name="counter", path=path)


def test_load_into_restores_matching_state(tmp_path: Path) -> None:
    """A matching state loads silently."""
    counter = CounterState()
    load_into(counter, {"steps": 41}, name="counter", path=tmp_path / "x.ckpt")
    assert counter.steps == 41


# ---------------------------------------------------------------------------- file names


def test_checkpoint_paths_names(tmp_path: Path) -> None:
    """last, best and zero-padded periodic names; invalid indices are refused."""
    paths = CheckpointPaths(tmp_path)
    assert paths.directory == tmp_path
    assert paths.last == tmp_path / "last.ckpt"
    assert paths.best == tmp_path / "best.ckpt"
    assert paths.periodic(7) == tmp_path / "epoch_00000007.ckpt"
    assert paths.periodic(123_456_789) == tmp_path / "epoch_123456789.ckpt"
    with pytest.raises(ConfigError, match="non-negative int, got -1"):
        paths.periodic(-1)
    assert repr(paths) == f"CheckpointPaths({str(tmp_path)!r})"


# ---------------------------------------------------------------------------- safety


def test_no_unsafe_loading_anywhere_in_the_package() -> None:
    """No source file of typedrl turns weights-only loading off."""
    package = Path(typedrl.__file__).parent
    pattern = re.compile(r"weights_only\s*=\s*False")
    offenders = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
    reader = Path(checkpoint_module.__file__).parent / "_io.py"
    assert "weights_only=True" in reader.read_text(encoding="utf-8")
