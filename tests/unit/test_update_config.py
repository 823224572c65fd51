"""Run.update_config: the in-memory config everywhere, run.json on rank 0, never raising."""

from __future__ import annotations

import argparse
import json
import logging
import os

import nblog as nb


def run_json(run) -> dict:
    with open(os.path.join(run.dir, "run.json")) as f:
        return json.load(f)


def warnings_about(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def test_rank0_merges_into_config_and_run_json(root):
    run = nb.init("p", run_id="cfg", root=root, config={"lr": 0.1, "model": {"depth": 2}}, _environ={},
                  system=False)
    try:
        run.update_config({"model": {"depth": 4}, "batch": 32, "tags": ("a", "b")})
        run.update_config(argparse.Namespace(seed=7))
        expected = {"lr": 0.1, "model": {"depth": 4}, "batch": 32, "tags": ["a", "b"], "seed": 7}
        assert run.config == expected
        assert run_json(run)["config"] == expected
        for step in range(3):  # the writer thread rewrites run.json (first and last step)...
            run.add_scalar("loss", 1.0, step)
        run.flush()
    finally:
        run.finish()
    assert run_json(run)["config"] == expected  # ...and keeps the new keys
    run.update_config({"after": True})  # after finish: still recorded
    assert run_json(run)["config"]["after"] is True
    assert nb.RunReader(run.dir).config["after"] is True


def test_other_ranks_change_only_their_memory(root):
    rank0 = nb.init("p", run_id="two", root=root, config={"a": 1}, _environ={}, system=False)
    rank1 = nb.init("p", root=root, system=False, _environ={
        "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "NB_RUN_ID": "two", "NB_WAIT_S": "5"})
    try:
        rank1.update_config({"b": 2})
        assert rank1.config["b"] == 2
        assert run_json(rank0)["config"] == {"a": 1}
    finally:
        rank1.finish()
        rank0.finish()


def test_bad_values_warn_once_and_change_nothing(root, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    run = nb.init("p", run_id="bad", root=root, config={"a": 1}, _environ={}, system=False)
    try:
        run.update_config(5)
        run.update_config([1, 2])
        assert run.config == {"a": 1} and run_json(run)["config"] == {"a": 1}
        assert len(warnings_about(caplog, "update_config ignored")) == 1
    finally:
        run.finish()


def test_unwritable_run_json_warns_once(root, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    run = nb.init("p", run_id="ro", root=root, _environ={}, system=False)
    path = os.path.join(run.dir, "run.json")
    saved = open(path).read()
    try:
        os.remove(path)
        os.mkdir(path)  # a folder where run.json goes: replacing it fails (also for root)
        open(os.path.join(path, "x"), "w").close()
        run.update_config({"x": 1})
        run.update_config({"y": 2})
        assert run.config == {"x": 1, "y": 2}
        assert len(warnings_about(caplog, "could not write the config")) == 1
    finally:
        os.remove(os.path.join(path, "x"))
        os.rmdir(path)
        with open(path, "w") as f:
            f.write(saved)
        run.finish()
