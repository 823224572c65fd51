"""``NbLogger``: nb as a Lightning logger, ``Trainer(logger=NbLogger("proj"))``.

Constructed on every rank (Lightning builds the Trainer in every process), it follows
nb's rank rules rather than Lightning's rank-zero wrapper: rank 0 writes scalars and
hyper-parameters, every rank may time itself (``logger.run.timer(..., all_ranks=True)``
or ``timing_all_ranks=True``) and local rank 0 of every machine samples its system.

How every process finds the same run, without any communication:

- under torchrun or Slurm (a shared job id), nb derives the id from it on every rank,
  so a job requeued with the same ``SLURM_JOB_ID`` continues the run in a new session;
- under Lightning's own launcher (``python train.py`` with ``devices=2``), the main
  process draws the id when the logger is constructed, before ``fit`` starts the other
  processes, and puts it into its environment (``NB_LIGHTNING_RUN_ID``): the launcher
  starts them with a copy of that environment and ``LOCAL_RANK`` set, and they read it;
- a ``fit(ckpt_path=...)``: the run id is written beside each checkpoint (a file
  ``nb_run_id`` in the checkpoint folder, after every save), and the run is opened only
  once Lightning has chosen the checkpoint, so the run that wrote it continues.

Imports Lightning (``lightning``, else the older ``pytorch_lightning``) when this module
is imported; ``import nblog`` does not import it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from . import missing_extra

try:
    from lightning.pytorch.loggers import Logger as _Logger
    from lightning.pytorch.utilities import rank_zero_only as _rank_zero_only
except ImportError:  # the older package name
    try:
        # the same classes under the old name: mypy sees two distinct types
        from pytorch_lightning.loggers import Logger as _Logger  # type: ignore[assignment]
        from pytorch_lightning.utilities import rank_zero_only as _rank_zero_only
    except ImportError as err:
        raise missing_extra("Lightning (lightning or pytorch_lightning)", "lightning", err) from err

from .. import _log as log
from ..write._init import init
from ..write._run import Run
from ..write._runid import random_run_id, shared_job_id
from . import _common

ENV_RUN_ID = "NB_LIGHTNING_RUN_ID"
_exported: set[str] = set()  # ids this process put into its environment (not inherited)
_STATUS = {"success": "finished", "finished": "finished", "failed": "failed"}


class NbLogger(_Logger):
    """A Lightning ``Logger`` writing into an nb run.

    Args:
        project, run_name, run_id, resume, config, root, timing_all_ranks, system: as
            :func:`nblog.init`. ``config`` is merged with what Lightning passes to
            ``log_hyperparams`` (the LightningModule's ``save_hyperparameters``).
        **init_kwargs: other :func:`nblog.init` arguments (``system_interval``,
            ``flush_interval``, ``mode``, ``strict``).

    Attributes:
        run / experiment: the :class:`nblog.Run` (opened on first use).
        name: the project; version: the run id; log_dir: the run folder.
    """

    def __init__(
        self,
        project: str = "default",
        *,
        run_name: str | None = None,
        run_id: str | None = None,
        resume: str | None = None,
        config: object = None,
        root: str | os.PathLike | None = None,
        timing_all_ranks: bool = False,
        system: bool | list[str] | tuple[str, ...] = True,
        **init_kwargs: Any,
    ) -> None:
        super().__init__()
        self._kw = _common.init_kwargs(project, run_name, run_id, resume, root, timing_all_ranks, system)
        self._kw.update(init_kwargs)
        self._config = _common.as_config(config)
        self._run: Run | None = None
        self._ckpt_path: str | None = None
        env = os.environ
        if run_id is None and not env.get("NB_RUN_ID") and shared_job_id(env)[0] is None:
            inherited = env.get(ENV_RUN_ID)
            if "RANK" in env:  # started by torchrun / accelerate launch with a static rendezvous
                agent = _common.agent_run_id(project, run_name, env)
                if agent is not None:
                    self._kw["run_id"], self._kw["resume"] = agent, resume or "auto"
            elif "LOCAL_RANK" in env:
                if inherited and inherited not in _exported:
                    self._kw["run_id"] = inherited  # a process Lightning's launcher started
            elif "OMPI_COMM_WORLD_RANK" not in env and "SLURM_PROCID" not in env:
                # the main process: draw the id the processes it starts will inherit
                rid = random_run_id(run_name)
                env[ENV_RUN_ID] = rid
                _exported.add(rid)
                self._kw["run_id"] = rid

    # -- the run -------------------------------------------------------------------

    @property
    def run(self) -> Run:
        """The :class:`nblog.Run`, opened on first use (on every rank)."""
        if self._run is None:
            self._run = self._open()
        return self._run

    @property
    def experiment(self) -> Run:
        """Lightning's name for :attr:`run`.

        Lightning touches it while setting up, before it restores a checkpoint: until
        the run is open this returns a stand-in that opens it on first attribute use.
        """
        if self._run is None:
            return _LazyRun(self)  # type: ignore[return-value]
        return self._run

    def _open(self) -> Run:
        kw = dict(self._kw)
        saved = _common.read_run_id(os.path.dirname(self._ckpt_path)) if self._ckpt_path else None
        if saved is not None:  # fit(ckpt_path=...): continue the run that wrote it
            kw["run_id"], kw["resume"] = saved, "auto"
        return init(config=self._config, _environ=_lightning_env(), **kw)

    # -- Logger API ----------------------------------------------------------------

    @property
    def name(self) -> str:
        """The nb project (Lightning uses it in the default checkpoint folder)."""
        return self._kw["project"]

    @property
    def version(self) -> str:
        """The run id (Lightning puts it in the default checkpoint folder)."""
        if self._run is None and self._kw.get("run_id"):
            return self._kw["run_id"]  # known without opening the run
        return self.run.id

    @property
    def log_dir(self) -> str | None:
        """The run folder (``<root>/<project>/<run id>``)."""
        return self.run.dir

    @property
    def save_dir(self) -> str | None:
        """None: Lightning keeps checkpoints under ``default_root_dir``, out of nb's root."""
        return None

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        """Record ``params`` (dict, nested dict, ``argparse.Namespace``) in the config."""
        if isinstance(params, argparse.Namespace):
            params = vars(params)
        if not isinstance(params, Mapping):
            params = _common.as_config(params)
        if self._run is None:
            self._config.update(_common.as_config(dict(params)))  # run.json gets it at init
        else:
            _common.merge_config(self._run, dict(params))

    def log_graph(self, model: Any, input_array: Any = None) -> None:
        """Not a graph: Lightning calls this right after restoring a checkpoint, so here
        the logger learns ``trainer.ckpt_path`` before it opens the run."""
        if self._run is None:
            try:
                ckpt = model.trainer.ckpt_path
            except Exception:  # a module not attached to a Trainer
                ckpt = None
            if isinstance(ckpt, (str, os.PathLike)) and os.path.exists(ckpt):
                self._ckpt_path = os.fspath(ckpt)
        _ = self.run

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Log ``metrics`` at ``step`` (rank 0 writes; elsewhere it only keeps the step)."""
        self.run.add_scalar(dict(metrics), step=step)

    def save(self) -> None:
        """Flush nothing: nb's writer thread writes every flush interval on its own."""
        if self._run is None:
            _ = self.run

    def finalize(self, status: str) -> None:
        """End this session: ``success`` → finished, ``failed`` → failed."""
        if self._run is not None:
            self._run.finish(_STATUS.get(status, status))

    def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
        """Write the run id beside the checkpoints, for a later ``fit(ckpt_path=...)``."""
        try:
            folder = checkpoint_callback.dirpath
        except Exception:
            folder = None
        if folder and self._run is not None:
            _common.write_run_id(os.fspath(folder), self._run)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_run"] = None  # spawn launchers pickle the trainer: each process opens its own
        return state


class _LazyRun:
    """Stands for a logger's run until it is open; any attribute use opens it."""

    __slots__ = ("_logger",)

    def __init__(self, logger: NbLogger) -> None:
        self._logger = logger

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._logger.run, attr)

    def __bool__(self) -> bool:
        return True


def _lightning_env() -> Mapping[str, str]:
    """The environment nb reads ranks from: Lightning's launcher sets ``LOCAL_RANK``,
    ``NODE_RANK`` and ``WORLD_SIZE`` but no ``RANK``; Lightning knows the global rank."""
    env = os.environ
    if "RANK" in env or "OMPI_COMM_WORLD_RANK" in env or "SLURM_PROCID" in env:
        return env
    if "LOCAL_RANK" not in env or "WORLD_SIZE" not in env:
        return env
    rank = getattr(_rank_zero_only, "rank", None)
    if not isinstance(rank, int):
        log.warning("nblog: Lightning did not say this process's global rank; using LOCAL_RANK")
        rank = int(env["LOCAL_RANK"])
    return {**env, "RANK": str(rank)}
