"""``nb resume-id PROJECT``: print the run id to pass to ``nb.init`` (``RUN_ID=$(nb resume-id …)``)."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from .._options import Root


def _name(value: str, what: str) -> str:
    from nblog.format import check_name

    try:
        return check_name(value, what)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def resume_id(
    project: Annotated[str, typer.Argument(metavar="PROJECT", help="The project, as given to nb.init.", show_default=False)],
    name: Annotated[
        str | None,
        typer.Option("--name", "-n", metavar="NAME", help="The run name, as given to nb.init(run_name=...).",
                     show_default=False),
    ] = None,
    job_id: Annotated[
        str | None,
        typer.Option("--job-id", metavar="ID",
                     help="Derive the id from this job id [default: from the environment: TORCHELASTIC_RUN_ID "
                          "given with --rdzv-id, else SLURM_JOB_ID, else torchrun's own uuid].",
                     show_default=False),
    ] = None,
    latest: Annotated[
        bool,
        typer.Option("--latest", help="The newest existing run of PROJECT (and NAME): continue it under a new job."),
    ] = False,
    root: Root = None,
) -> None:
    """Print exactly one run id and a newline on stdout, nothing else.

    With a job id (--job-id, else the environment as nb.init reads it) this is the id
    nb.init derives for PROJECT, NAME and that job. With --latest, the newest run of
    PROJECT and NAME under the root (exit 1 if there is none). Otherwise a fresh random id.
    """
    from nblog.write import derive_run_id, random_run_id, shared_job_id

    project = _name(project, "PROJECT")
    name = None if name is None else _name(name, "--name")
    if latest and job_id is not None:
        raise typer.BadParameter("--latest and --job-id exclude each other", param_hint="--latest")
    if latest:
        from .._resume import print_latest

        code = print_latest(project, name, root)
        if code:
            raise typer.Exit(code)
        return
    else:
        if job_id is not None and not job_id.strip():
            raise typer.BadParameter("must not be empty", param_hint="--job-id")
        job = job_id.strip() if job_id is not None else shared_job_id(os.environ)[0]
        rid = derive_run_id(project, name, job) if job is not None else random_run_id(name)
    sys.stdout.write(rid + "\n")


def register(app: typer.Typer) -> None:
    app.command("resume-id")(resume_id)
