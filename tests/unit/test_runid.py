"""nblog.write._runid: the shared job id, derived and random run ids."""

from __future__ import annotations

import re
import uuid

import pytest

from nblog.write._runid import derive_run_id, is_torchrun_uuid, random_run_id, shared_job_id

RUN_ID = re.compile(r"^[a-z0-9._-]+-[0-9a-f]{8}$")
UUID = str(uuid.uuid4())


def test_no_job_id():
    assert shared_job_id({}) == (None, None)
    assert shared_job_id({"TORCHELASTIC_RUN_ID": "none"}) == (None, None)
    assert shared_job_id({"TORCHELASTIC_RUN_ID": "", "SLURM_JOB_ID": " "}) == (None, None)


def test_rdzv_id_given_to_torchrun_comes_first():
    env = {"TORCHELASTIC_RUN_ID": "exp42", "SLURM_JOB_ID": "17"}
    assert shared_job_id(env) == ("exp42", "torchelastic")


@pytest.mark.parametrize("none", ["none", "None", "NONE"])
def test_literal_none_of_static_rendezvous_is_not_a_job_id(none):
    assert shared_job_id({"TORCHELASTIC_RUN_ID": none, "SLURM_JOB_ID": "17"}) == ("17", "slurm")


def test_slurm_job_id_beats_a_uuid_torchrun_made_up():
    env = {"TORCHELASTIC_RUN_ID": UUID, "SLURM_JOB_ID": "17"}
    assert shared_job_id(env) == ("17", "slurm")


def test_torchrun_uuid_is_the_last_resort():
    assert shared_job_id({"TORCHELASTIC_RUN_ID": UUID}) == (UUID, "torchelastic_uuid")


def test_is_torchrun_uuid():
    assert is_torchrun_uuid(UUID)
    assert is_torchrun_uuid(UUID.upper())
    assert not is_torchrun_uuid("exp42")
    assert not is_torchrun_uuid(str(uuid.uuid1()))  # torchrun makes uuid4s only
    assert not is_torchrun_uuid(UUID + "x")


def test_derive_run_id_is_deterministic_and_well_formed():
    a = derive_run_id("llm", "DDP run", "17")
    assert a == derive_run_id("llm", "DDP run", "17")
    assert RUN_ID.match(a)
    assert a.startswith("ddp-run-")
    assert derive_run_id("llm", None, "17").startswith("run-")


def test_derive_run_id_depends_on_project_name_and_job():
    ids = {
        derive_run_id("llm", "a", "17"),
        derive_run_id("llm", "a", "18"),
        derive_run_id("vision", "a", "17"),
        derive_run_id("llm", "b", "17"),
        derive_run_id("llm", None, "17"),
        derive_run_id("llm", "", "17"),
    }
    assert len(ids) == 5  # None and "" are the same name


def test_derive_run_id_fields_do_not_run_together():
    # ("ab", "c") must not collide with ("a", "bc")
    assert derive_run_id("ab", "c", "1")[-8:] != derive_run_id("a", "bc", "1")[-8:]


def test_random_run_id():
    ids = {random_run_id("x") for _ in range(50)}
    assert len(ids) == 50
    assert all(RUN_ID.match(i) and i.startswith("x-") for i in ids)
    assert random_run_id(None).startswith("run-")
