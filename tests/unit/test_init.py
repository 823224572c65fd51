"""nblog.init in one process: argument errors fail fast, run.json, run ids, sessions."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import re
import sys

import pytest

import nblog as nb
from nblog.write._runid import derive_run_id


def run_json(run):
    with open(os.path.join(run.dir, "run.json"), encoding="utf-8") as f:
        return json.load(f)


BAD_NAMES = [
    (arg, bad)
    for arg in ("project", "run_name", "run_id")
    for bad in ("..", "a/b", "a\\b", "a\0b", "", "\x1b", " ", "   ", "\u00a0\u3000")  # blank: whitespace only
    if not (arg == "run_id" and bad == "")  # means "no run id": test_empty_run_id_means_none
]


@pytest.mark.parametrize(("arg", "bad"), BAD_NAMES)
def test_bad_names_raise_before_anything_is_created(root, arg, bad):
    kwargs = {"project": "p", arg: bad}
    with pytest.raises(ValueError) as info:
        nb.init(root=root, _environ={}, system=False, **kwargs)
    assert arg in str(info.value)
    assert not root.exists()


def test_an_empty_run_id_argument_raises_before_anything_is_created(root):
    with pytest.raises(ValueError, match="run_id must not be empty"):
        nb.init("p", run_id="", root=root, _environ={"NB_RUN_ID": "from-env"}, system=False)
    assert not root.exists()


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_nb_run_id_variable_counts_as_unset(make_run, value):
    run = make_run(env={"NB_RUN_ID": value})
    assert run_json(run)["run_id_source"] == "random"


def test_nb_run_id_from_the_environment_is_checked_too(root):
    with pytest.raises(ValueError, match="run_id"):
        nb.init("p", root=root, _environ={"NB_RUN_ID": "../escape"}, system=False)
    assert not root.exists()


@pytest.mark.parametrize("kwargs", [{"resume": "yes"}, {"mode": "offline"}, {"flush_interval": -1}])
def test_bad_arguments_raise_value_error(root, kwargs):
    with pytest.raises(ValueError):
        nb.init("p", root=root, _environ={}, system=False, **kwargs)
    assert not root.exists()


def test_bad_launcher_variables_raise_value_error(root):
    with pytest.raises(ValueError, match="RANK"):
        nb.init("p", root=root, _environ={"RANK": "x", "WORLD_SIZE": "2"}, system=False)


def test_a_root_that_is_a_file_raises_naming_the_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError) as info:
        nb.init("p", root=blocker, _environ={}, system=False)
    assert str(blocker) in str(info.value)


def test_run_json_written_by_rank_0(make_run):
    run = make_run(run_name="ddp", config={"lr": 0.1, "layers": [1, 2]})
    meta = run_json(run)
    assert meta["project"] == "p"
    assert meta["id"] == run.id
    assert meta["name"] == "ddp"
    assert meta["config"] == {"lr": 0.1, "layers": [1, 2]}
    assert meta["status"] == "running"
    assert meta["world_size"] == 1
    assert meta["launcher"] == "none"
    assert meta["run_id_source"] == "random"
    assert meta["format_version"] == 2  # 2: COLUMNS frames (issue 18)
    assert meta["nblog_version"] == nb.__version__
    (session,) = meta["sessions"]
    assert session["session"] == 0 and session["pid"] == os.getpid()
    assert sorted(os.listdir(run.dir)) == ["events.r0.s0.log", "run.json"]  # no temp files
    run.add_scalar("x", 1.0, step=5)
    run.finish()
    meta = run_json(run)
    assert meta["status"] == "finished"
    assert meta["sessions"][0]["first_step"] == 5


def test_random_run_id_without_a_job_id(make_run):
    a, b = make_run(run_name="Exp 1"), make_run(run_name="Exp 1")
    assert re.fullmatch(r"exp-1-[0-9a-f]{8}", a.id)
    assert a.id != b.id


def test_derived_run_id_from_slurm_job_id(make_run):
    run = make_run(run_name="n", env={"SLURM_JOB_ID": "4242"})
    assert run.id == derive_run_id("p", "n", "4242")
    meta = run_json(run)
    assert (meta["job_id"], meta["job_id_source"], meta["run_id_source"]) == ("4242", "slurm", "derived")


def test_derived_run_id_that_exists_continues_in_a_new_session(make_run, caplog):
    caplog.set_level(logging.INFO, "nblog")
    first = make_run(env={"SLURM_JOB_ID": "7"})
    first.finish()
    second = make_run(env={"SLURM_JOB_ID": "7", "SLURM_RESTART_COUNT": "1"})
    assert (second.id, second.session) == (first.id, 1)
    assert any("continuing" in r.getMessage() for r in caplog.records)
    meta = run_json(second)
    assert [s["session"] for s in meta["sessions"]] == [0, 1]
    assert meta["sessions"][1]["restart_counts"] == {"SLURM_RESTART_COUNT": "1"}


def test_explicit_run_id_that_exists_needs_resume(make_run, root):
    make_run(run_id="fixed-00000001").finish()
    with pytest.raises(FileExistsError) as info:
        nb.init("p", root=root, run_id="fixed-00000001", _environ={}, system=False)
    assert "resume='auto'" in str(info.value)
    with pytest.raises(FileExistsError):
        nb.init("p", root=root, _environ={"NB_RUN_ID": "fixed-00000001"}, system=False)
    assert sorted(os.listdir(root / "p" / "fixed-00000001")) == ["events.r0.s0.log", "run.json"]


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_resume_auto_continues_or_creates(make_run, how):
    def start():
        if how == "argument":
            return make_run(run_id="r-0000000a", resume="auto")
        return make_run(env={"NB_RUN_ID": "r-0000000a", "NB_RESUME": "auto"})

    first = start()
    first.finish()
    second = start()
    assert (second.id, second.session) == ("r-0000000a", 1)
    # run.json.bak: the run.json the resume read whole, kept should a later read fail
    assert sorted(os.listdir(second.dir)) == ["events.r0.s0.log", "events.r0.s1.log", "run.json", "run.json.bak"]


def test_resume_must_on_a_missing_run_raises(root):
    with pytest.raises(FileNotFoundError) as info:
        nb.init("p", root=root, run_id="gone-00000000", resume="must", _environ={}, system=False)
    assert "gone-00000000" in str(info.value)
    assert not (root / "p" / "gone-00000000").exists()


def test_resume_must_without_a_run_id_says_it_needs_one(root):
    """No run_id, NB_RUN_ID or shared job id: the id would be a random one init made
    up, so "run 'run-1a2b3c4d' does not exist" would be a riddle."""
    with pytest.raises(ValueError) as info:
        nb.init("p", root=root, resume="must", _environ={}, system=False)
    text = str(info.value)
    assert "resume='must' needs" in text and "run_id=" in text and "NB_RUN_ID" in text, text
    assert "does not exist" not in text
    assert not root.exists()


def test_resume_must_with_a_derived_run_id_is_legitimate(make_run, root):
    env = {"SLURM_JOB_ID": "4242"}
    with pytest.raises(FileNotFoundError) as info:  # nothing of that job yet
        make_run(env=env, resume="must")
    assert "derived from the job id '4242'" in str(info.value), info.value
    first = make_run(env=env, resume="auto")
    first.finish()
    again = make_run(env=env, resume="must")
    assert (again.id, again.session) == (first.id, 1)


def test_resume_must_on_an_existing_run_continues(make_run):
    make_run(run_id="r-0000000b").finish()
    run = make_run(run_id="r-0000000b", resume="must")
    assert run.session == 1


@dataclasses.dataclass
class Cfg:
    lr: float = 0.1
    name: str = "x"


class ToDict:
    def to_dict(self):
        return {"a": 1}


@pytest.mark.parametrize(
    ("config", "stored"),
    [
        (None, {}),
        (Cfg(), {"lr": 0.1, "name": "x"}),
        (argparse.Namespace(epochs=3, fast=True), {"epochs": 3, "fast": True}),
        (ToDict(), {"a": 1}),
        ({"path": os.sep, "nan": float("nan"), "obj": Cfg, 1: "int key"},
         {"path": os.sep, "nan": "nan", "obj": repr(Cfg), "1": "int key"}),
    ],
)
def test_config_is_stored_as_json(make_run, config, stored):
    run = make_run(config=config)
    assert run.config == stored
    assert run_json(run)["config"] == stored


def test_config_that_is_not_a_mapping_raises_type_error(root):
    with pytest.raises(TypeError, match="config"):
        nb.init("p", root=root, config=[1, 2], _environ={}, system=False)


OMEGACONF_STAND_IN = '''
class DictConfig:
    def __init__(self, data):
        self._data = data

class OmegaConf:
    @staticmethod
    def to_container(cfg, resolve=False):
        assert resolve
        return {k: ("${resolved}" if v == "${x}" else v) for k, v in cfg._data.items()}
'''


def test_an_omegaconf_config_is_resolved_by_its_own_library(make_run, tmp_path, monkeypatch):
    """An OmegaConf container (omegaconf is not installed here: a stand-in package of the
    same name and API) is turned into a dict by ``OmegaConf.to_container(resolve=True)``."""
    pkg = tmp_path / "site" / "omegaconf"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .dictconfig import DictConfig, OmegaConf\n")
    (pkg / "dictconfig.py").write_text(OMEGACONF_STAND_IN)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in ("omegaconf", "omegaconf.dictconfig"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    from omegaconf import DictConfig

    run = make_run(config=DictConfig({"lr": 0.1, "path": "${x}"}))
    assert run.config == {"lr": 0.1, "path": "${resolved}"}
