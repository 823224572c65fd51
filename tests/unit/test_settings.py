"""nblog.write._settings.resolve: argument, then NB_* variable, then default."""

from __future__ import annotations

import json

import pytest

from nblog.write._settings import SYSTEM_GROUPS, parse_system, resolve

DEFAULTS = dict(
    root=None, mode=None, strict=None, resume=None, run_id=None, flush_interval=None,
    system=True, system_interval=None, timing_all_ranks=False,
)


def settings(env=None, **kwargs):
    return resolve(env or {}, **{**DEFAULTS, **kwargs})


def test_defaults():
    s = settings()
    assert (s.root, s.mode, s.strict, s.resume, s.run_id) == ("nb_runs", "online", False, None, None)
    assert (s.wait_s, s.flush_interval, s.heartbeat_s, s.system_interval) == (120.0, 1.0, 60.0, 30.0)
    assert s.system == SYSTEM_GROUPS
    assert s.timing_all_ranks is False
    assert s.progress_s == 5.0


def test_progress_interval_from_the_environment():
    assert settings({"NB_PROGRESS_S": "0.5"}).progress_s == 0.5
    assert settings({"NB_PROGRESS_S": " "}).progress_s == 5.0


def test_an_empty_run_id_is_kept_for_init_to_refuse_but_an_empty_variable_is_unset():
    assert settings(run_id="").run_id == ""
    assert settings({"NB_RUN_ID": ""}).run_id is None
    assert settings({"NB_RUN_ID": "  "}, run_id=None).run_id is None


def test_environment_overrides_defaults():
    env = {
        "NB_DIR": "/d", "NB_MODE": "Disabled", "NB_STRICT": "1", "NB_RESUME": "AUTO",
        "NB_RUN_ID": " r-1 ", "NB_WAIT_S": "1.5", "NB_FLUSH_INTERVAL": "0.25",
        "NB_HEARTBEAT_S": "5", "NB_SYSTEM": "cpu, memory", "NB_SYSTEM_INTERVAL": "2",
    }
    s = settings(env)
    assert (s.root, s.mode, s.strict, s.resume, s.run_id) == ("/d", "disabled", True, "auto", "r-1")
    assert (s.wait_s, s.flush_interval, s.heartbeat_s, s.system_interval) == (1.5, 0.25, 5.0, 2.0)
    assert s.system == ("cpu", "memory")


def test_arguments_override_environment():
    env = {
        "NB_DIR": "/d", "NB_MODE": "disabled", "NB_STRICT": "1", "NB_RESUME": "must",
        "NB_RUN_ID": "env-id", "NB_FLUSH_INTERVAL": "5", "NB_SYSTEM": "cpu",
        "NB_SYSTEM_INTERVAL": "9",
    }
    s = settings(
        env, root="/a", mode="online", strict=False, resume="auto", run_id="arg-id",
        flush_interval=0.5, system=["gpu"], system_interval=3.0,
    )
    assert (s.root, s.mode, s.strict, s.resume, s.run_id) == ("/a", "online", False, "auto", "arg-id")
    assert (s.flush_interval, s.system, s.system_interval) == (0.5, ("gpu",), 3.0)


@pytest.mark.parametrize("raw", ["none", "0", "false", "never", ""])
def test_nb_resume_off_values(raw):
    assert settings({"NB_RESUME": raw}).resume is None


@pytest.mark.parametrize("raw", ["0", "", "no", "false"])
def test_nb_strict_off_values(raw):
    assert settings({"NB_STRICT": raw}).strict is False


@pytest.mark.parametrize(
    ("kwargs", "env", "needle"),
    [
        ({"mode": "offline"}, {}, "mode"),
        ({}, {"NB_MODE": "dryrun"}, "mode"),
        ({"resume": "yes"}, {}, "resume"),
        ({}, {"NB_RESUME": "always"}, "resume"),
        ({"flush_interval": 0}, {}, "flush_interval"),
        ({"flush_interval": 61}, {}, "flush_interval"),
        ({}, {"NB_FLUSH_INTERVAL": "fast"}, "NB_FLUSH_INTERVAL"),
        ({}, {"NB_WAIT_S": "forever"}, "NB_WAIT_S"),
        ({}, {"NB_WAIT_S": "-1"}, "NB_WAIT_S"),
        ({}, {"NB_WAIT_S": "nan"}, "NB_WAIT_S"),
        ({"system_interval": 0}, {}, "system_interval"),
        ({"system": ["cpu", "fans"]}, {}, "fans"),
        ({"system": 3}, {}, "system"),
        ({}, {"NB_SYSTEM": "cpu,disk,quantum"}, "NB_SYSTEM"),
    ],
)
def test_bad_values_raise_naming_the_setting(kwargs, env, needle):
    with pytest.raises(ValueError) as info:
        settings(env, **kwargs)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("value", "groups"),
    [
        (True, SYSTEM_GROUPS),
        (False, ()),
        (None, ()),
        ("all", SYSTEM_GROUPS),
        ("off", ()),
        ("GPU,cpu,gpu", ("gpu", "cpu")),
        (["memory"], ("memory",)),
        (("disk", "network"), ("disk", "network")),
    ],
)
def test_parse_system(value, groups):
    assert parse_system(value, "system") == groups


def test_nb_system_applies_only_when_the_argument_is_left_true():
    assert settings({"NB_SYSTEM": "off"}).system == ()
    assert settings({"NB_SYSTEM": "off"}, system=["cpu"]).system == ("cpu",)
    assert settings({"NB_SYSTEM": "cpu"}, system=False).system == ()


def test_settings_are_frozen_and_json_able():
    s = settings({"NB_SYSTEM": "cpu"})
    with pytest.raises(AttributeError):
        s.mode = "disabled"  # type: ignore[misc]
    d = json.loads(json.dumps(s.to_json()))
    assert d["system"] == ["cpu"]
    assert d["root"] == "nb_runs"


@pytest.mark.parametrize("name", ["NB_SYSTEM_INTERVAL", "NB_FLUSH_INTERVAL", "NB_WAIT_S", "NB_HEARTBEAT_S",
                                  "NB_PROGRESS_S"])
@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "NaN"])
def test_a_float_variable_that_is_not_finite_says_so(name, raw):
    with pytest.raises(ValueError) as info:
        settings({name: raw})
    assert name in str(info.value) and "finite number" in str(info.value), info.value


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("key", ["system_interval", "flush_interval"])
def test_an_interval_argument_that_is_not_finite_is_refused(key, value):
    with pytest.raises(ValueError) as info:
        settings({}, **{key: value})
    assert key in str(info.value)
