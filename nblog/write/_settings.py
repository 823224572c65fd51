"""Settings resolved once at ``init``: argument, then ``NB_*`` variable, then default."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping

SYSTEM_GROUPS = ("cpu", "memory", "disk", "network", "gpu")
RESUME_VALUES = (None, "auto", "must")


class Settings(
    namedtuple(
        "Settings",
        "root mode strict resume run_id wait_s flush_interval heartbeat_s system "
        "system_interval timing_all_ranks progress_s provenance console scalars_all_ranks",
        defaults=(False,),
    )
):
    """Resolved configuration of one ``init`` call, recorded in ``run.json``.

    Attributes:
        root: the folder holding projects (``root=``, ``$NB_DIR``, ``./nb_runs``).
        mode: "online" or "disabled" (``mode=``, ``$NB_MODE``).
        strict: bad data raises instead of warning (``strict=``, ``$NB_STRICT=1``).
        resume: None, "auto" or "must" (``resume=``, ``$NB_RESUME``).
        run_id: explicit run id or None (``run_id=``, then ``$NB_RUN_ID``). ``run_id=""``
            is refused by ``init`` (``ValueError``); an empty or blank ``$NB_RUN_ID``
            counts as unset.
        wait_s: seconds a non-zero rank waits for rank 0's folder (``$NB_WAIT_S``, 120).
        flush_interval: seconds between background flushes (``flush_interval=``,
            ``$NB_FLUSH_INTERVAL``, 1.0); bounds what ``kill -9`` can lose.
        heartbeat_s: seconds of silence before the writer records a heartbeat
            (``$NB_HEARTBEAT_S``, 60).
        system: system metric groups sampled on local rank 0 (``system=``, ``$NB_SYSTEM``).
        system_interval: seconds between system samples (``system_interval=``, 30).
        timing_all_ranks: every timer logs on every rank (``timing_all_ranks=``).
        progress_s: at most this often (seconds) rank 0 rewrites ``run.json`` with the
            session's last step, and only when the step moved (``$NB_PROGRESS_S``, 5).
        provenance: record what code ran (command, versions, git state, allow-listed
            environment) once per session (``provenance=``, ``$NB_PROVENANCE``, True).
        console: capture this process's stdout and stderr into the run folder
            (``console=``, ``$NB_CONSOLE=1``; off by default).
        scalars_all_ranks: every ``add_scalar`` logs on every rank into that rank's own
            event log (``scalars_all_ranks=``, ``$NB_SCALARS_ALL_RANKS=1``; off by default).
    """

    __slots__ = ()

    def to_json(self) -> dict:
        d = self._asdict()
        d["system"] = list(self.system)
        return d


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        v = float(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not a number") from None
    if not (v >= 0 and v != _INF):  # also NaN
        raise ValueError(f"environment variable {name}={raw!r} must be a finite number >= 0")
    return v


_INF = float("inf")


def _flag(raw: str) -> bool:
    return raw.strip().lower() in ("1", "true", "yes", "on")


def parse_system(value: object, where: str) -> tuple[str, ...]:
    """Turn ``True``/``False``/a list of groups/a ``NB_SYSTEM`` string into groups."""
    if value is True:
        return SYSTEM_GROUPS
    if value is False or value is None:
        return ()
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("", "1", "true", "all", "on", "yes"):
            return SYSTEM_GROUPS
        if v in ("0", "false", "off", "none", "no"):
            return ()
        value = [p.strip() for p in v.split(",") if p.strip()]
    try:
        # any iterable of names; one that is not raises TypeError, answered just below
        groups = tuple(dict.fromkeys(str(g).lower() for g in value))  # type: ignore[attr-defined]
    except TypeError:
        raise ValueError(f"{where} must be a bool or a list of groups, got {value!r}") from None
    bad = [g for g in groups if g not in SYSTEM_GROUPS]
    if bad:
        raise ValueError(f"{where}: unknown system group(s) {bad}; known: {list(SYSTEM_GROUPS)}")
    return groups


def resolve(
    env: Mapping[str, str],
    *,
    root: str | None,
    mode: str | None,
    strict: bool | None,
    resume: str | None,
    run_id: str | None,
    flush_interval: float | None,
    system: object,
    system_interval: float | None,
    timing_all_ranks: bool,
    provenance: bool | None = None,
    console: bool | None = None,
    scalars_all_ranks: bool | None = None,
) -> Settings:
    """Resolve arguments against ``env``. Raises ``ValueError`` naming a bad one."""
    mode = (mode or env.get("NB_MODE", "") or "online").strip().lower()
    if mode not in ("online", "disabled"):
        raise ValueError(f"mode must be 'online' or 'disabled', got {mode!r}")
    if resume is None:
        resume = env.get("NB_RESUME", "").strip().lower() or None
        if resume in ("none", "0", "false", "never"):
            resume = None
    if resume not in RESUME_VALUES:
        raise ValueError(f"resume must be None, 'auto' or 'must', got {resume!r}")
    if flush_interval is None:
        flush_interval = _float(env, "NB_FLUSH_INTERVAL", 1.0)
    if not (isinstance(flush_interval, (int, float)) and 0 < flush_interval <= 60):  # also NaN
        raise ValueError(f"flush_interval must be a number in (0, 60] seconds, got {flush_interval!r}")
    if system_interval is None:
        system_interval = _float(env, "NB_SYSTEM_INTERVAL", 30.0)
    if not (isinstance(system_interval, (int, float)) and 0 < system_interval < _INF):
        raise ValueError(f"system_interval must be a finite number > 0 seconds, got {system_interval!r}")
    if system is True and "NB_SYSTEM" in env:
        groups = parse_system(env["NB_SYSTEM"], "NB_SYSTEM")
    else:
        groups = parse_system(system, "system")
    return Settings(
        root=str(root or env.get("NB_DIR") or "nb_runs"),
        mode=mode,
        strict=_flag(env.get("NB_STRICT", "")) if strict is None else bool(strict),
        resume=resume,
        # run_id="" is kept, so init refuses it; an empty variable is an unset one
        run_id=run_id if run_id is not None else (env.get("NB_RUN_ID", "").strip() or None),
        wait_s=_float(env, "NB_WAIT_S", 120.0),
        flush_interval=float(flush_interval),
        heartbeat_s=_float(env, "NB_HEARTBEAT_S", 60.0),
        system=groups,
        system_interval=float(system_interval),
        timing_all_ranks=bool(timing_all_ranks),
        progress_s=_progress(env),
        provenance=_provenance_flag(env) if provenance is None else bool(provenance),
        console=_flag(env.get("NB_CONSOLE", "")) if console is None else bool(console),
        scalars_all_ranks=(_flag(env.get("NB_SCALARS_ALL_RANKS", "")) if scalars_all_ranks is None
                           else bool(scalars_all_ranks)),
    )


def _progress(env: Mapping[str, str]) -> float:
    v = _float(env, "NB_PROGRESS_S", 5.0)
    if not v > 0:
        raise ValueError(f"environment variable NB_PROGRESS_S={env['NB_PROGRESS_S']!r} must be > 0 seconds")
    return v


def _provenance_flag(env: Mapping[str, str]) -> bool:
    """``$NB_PROVENANCE``: on unless it says 0/false/off/no."""
    return env.get("NB_PROVENANCE", "").strip().lower() not in ("0", "false", "off", "no", "none")
