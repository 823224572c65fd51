"""``nb watch RUN``: alerts from a run's files, computed outside the job (nblog.reader._views.watch)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from typing import Annotated, Any

import typer

from nblog.reader.lowlevel import (
    STRAGGLER_FLOOR_S,
    STRAGGLER_SPREAD,
    STRAGGLER_WARMUP_STEPS,
    plural,
)

from .._options import AllowDamaged, Json, Root, RunArg
from .._output import Output, Styled, clean, emit_json_line, fmt_time, info, json_text, warn

_LEVEL_STYLE = {"error": "bold red", "warn": "yellow", "info": "cyan"}


def _opt(name: str, help: str, **kw: Any) -> object:
    return typer.Option(name, help=help, show_default=True, **kw)


def _run_exec(argv: list[str], alert: dict, timeout: float) -> None:
    """Run ``argv`` with ``alert`` as JSON on stdin; a failure is a warning, never fatal."""
    try:
        done = subprocess.run(argv, input=json_text(alert, indent=None) + "\n", text=True, timeout=timeout,
                              stdout=subprocess.PIPE, check=False)
    except subprocess.TimeoutExpired:
        warn(f"--exec {clean(shlex.join(argv))}: still running after {timeout:g} s; killed")
    except OSError as err:
        warn(f"--exec {clean(shlex.join(argv))}: {clean(err.strerror or err)}")
    else:
        if done.stdout:  # what it printed goes to stderr: stdout is the alerts' own
            sys.stderr.write(done.stdout)
            sys.stderr.flush()
        if done.returncode:
            warn(f"--exec {clean(shlex.join(argv))}: exit status {done.returncode}")


def watch(
    run: RunArg,
    once: Annotated[bool, typer.Option("--once", help="Check what is on disk now and exit: 1 if any alert holds, "
                                                      "else 0 (for cron and Slurm epilogs).")] = False,
    interval: Annotated[float, _opt("--interval", "Seconds between polls while following.", min=0.05,
                                    metavar="SECONDS")] = 5.0,
    timeout: Annotated[float | None, typer.Option("--timeout", min=0, metavar="SECONDS", show_default=False,
                                                  help="Stop following after SECONDS [default: until the run "
                                                       "ends].")] = None,
    exec_cmd: Annotated[str | None, typer.Option("--exec", metavar="CMD", show_default=False,
                                                 help="Run CMD (split as a shell would, run without one) once "
                                                      "per alert, the alert as JSON on its stdin.")] = None,
    exec_timeout: Annotated[float, _opt("--exec-timeout", "Seconds an --exec command may run.", min=0.1,
                                        metavar="SECONDS")] = 30.0,
    spike_z: Annotated[float, _opt("--spike-z", "Spike: robust z-score at least Z.", min=0.1, metavar="Z")] = 10.0,
    spike_window: Annotated[int, _opt("--spike-window", "Spike: N points of the rolling median and MAD.",
                                      min=3, max=1_000_000, metavar="N")] = 50,
    spike_warmup: Annotated[int, _opt("--spike-warmup", "Spike: N points of a tag before it is judged.",
                                      min=3, max=1_000_000, metavar="N")] = 20,
    stall_k: Annotated[float, _opt("--stall-k", "Stall: no new step for K times the rank's median step time.",
                                   min=0, metavar="K")] = 10.0,
    stall_floor: Annotated[float, _opt("--stall-floor", "Stall: ... and for at least SECONDS.", min=0,
                                       metavar="SECONDS")] = 60.0,
    straggler_ratio: Annotated[float, _opt("--straggler-ratio", "Straggler (the rule of nb timers): a rank's "
                                                                "lower median per step at least X times the "
                                                                "median of the ranks' ...", min=1.0,
                                           metavar="X")] = STRAGGLER_SPREAD,
    straggler_floor: Annotated[float, _opt("--straggler-floor", "... and at least SECONDS above it ...", min=0.0,
                                           metavar="SECONDS")] = STRAGGLER_FLOOR_S,
    straggler_warmup: Annotated[int, _opt("--straggler-warmup", "... the first N steps of each rank's session "
                                                                "left out ...", min=0, max=10_000_000,
                                          metavar="N")] = STRAGGLER_WARMUP_STEPS,
    straggler_steps: Annotated[int, _opt("--straggler-steps", "... over each rank's last N steps.",
                                         min=1, max=10_000_000, metavar="N")] = 50,
    gpu_idle: Annotated[float, _opt("--gpu-idle", "GPU idle: utilization below PERCENT ...", min=0, max=100,
                                    metavar="PERCENT")] = 5.0,
    gpu_samples: Annotated[int, _opt("--gpu-samples", "... or a throttle flag set, for M samples in a row.",
                                     min=1, max=1_000_000, metavar="M")] = 12,
    root: Root = None,
    allow_damaged: AllowDamaged = False,
    as_json: Json = False,
) -> None:
    """Watch a run from outside the job and report each alert once, as it appears.

    Rules: nonfinite (first NaN/inf of a scalar tag), spike (robust z-score against a
    rolling median), stall (a rank with no new step for a while, or silent while others
    go on), straggler (the rule of nb timers over each rank's last --straggler-steps
    steps: a rank's lower median per step, the first --straggler-warmup steps of each
    session and the steps from where a rank failed or died left out, at least
    --straggler-ratio times the median of the ranks' and --straggler-floor seconds
    above it; named after 3 steps of a rank slower on every step), gpu_idle and
    gpu_throttled (from the system metrics), failure (an uncaught exception on any
    rank) and alert (run.alert in the training code).

    Follows the run, polling every --interval seconds, until it is finished or failed
    and every rank's session is closed (or Ctrl-C). Each alert is one line (escaped),
    or with --json one JSON object per line with keys rule, level, run, rank, host,
    tag, step, wall_time, message and values of the rule. Exit status, with --once as
    when following ends (the run ended, or --timeout): 1 if any alert was reported, else
    0; also 1 on a runtime error, 2 on a usage error.
    """
    from nblog.reader import Watcher, WatchOptions, default_root, resolve_run

    argv = None
    if exec_cmd is not None:
        try:
            argv = shlex.split(exec_cmd)
        except ValueError as err:
            raise typer.BadParameter(f"cannot split {exec_cmd!r}: {err}", param_hint="--exec") from None
        if not argv:
            raise typer.BadParameter("empty command", param_hint="--exec")
    try:
        options = WatchOptions(spike_window=spike_window, spike_z=spike_z, spike_warmup=spike_warmup,
                               stall_k=stall_k, stall_floor_s=stall_floor, straggler_ratio=straggler_ratio,
                               straggler_floor_s=straggler_floor, straggler_warmup=straggler_warmup,
                               straggler_steps=straggler_steps, gpu_idle_percent=gpu_idle, gpu_samples=gpu_samples)
    except ValueError as err:  # not finite: the options' min/max let inf and nan through
        raise typer.BadParameter(str(err)) from None
    watcher = Watcher(run, root, options)
    if watcher.resolve() is None:
        if once:
            resolve_run(run, root)  # raises RunNotFoundError, saying where it looked
        info(f"waiting for run {run} under {os.path.abspath(root or default_root())} ...")
    out = None if as_json else Output()

    def report(alerts: list[dict]) -> None:
        for alert in alerts:
            if out is None:
                emit_json_line(alert)
            else:
                out.line([Styled(fmt_time(alert["wall_time"]) if alert["wall_time"] else "-", "dim"),
                          Styled(alert["level"], _LEVEL_STYLE.get(alert["level"], "")),
                          Styled(alert["rule"], "bold"), Styled(clean(alert["message"]))])
                sys.stdout.flush()
            if argv is not None:
                _run_exec(argv, alert, exec_timeout)

    if once:
        alerts = watcher.poll()
        report(alerts)
        if watcher.dir is not None and not alerts:
            info(f"no alerts in run {clean(watcher.name)}")
        raise typer.Exit(1 if alerts else 0)
    try:
        for alerts in watcher.follow(interval, timeout=timeout):
            report(alerts)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if watcher.done():
        info(f"run {clean(watcher.name)} {watcher.status}; {plural(len(watcher.alerts), 'alert')}")
    raise typer.Exit(1 if watcher.alerts else 0)  # the rule of --once: an alert is not a success


def register(app: typer.Typer) -> None:
    app.command("watch")(watch)
