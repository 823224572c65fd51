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
- a ``fit(ckpt_path=...)`` (a path, ``"last"``, ``"best"``...): the run id is written
  beside each checkpoint (a file ``nb_run_id`` in the checkpoint folder, after every
  save), and the run opened inside ``fit`` is the one that wrote the checkpoint Lightning
  resolved, however early it is opened (a callback's ``setup`` reading ``logger.run``).
  Lightning hands that path to no logger before it loads the file (after the ``setup``
  hooks): until the run is open, the logger reads it from the ``ckpt_path`` argument of
  the ``Trainer._run`` frame of its trainer on the call stack, and from
  ``trainer.ckpt_path`` once Lightning has set it.

``version``, ``log_dir`` and ``save_dir`` do not open the run: they are computed as
:func:`nblog.init` would name it (``<root>/<project>/<run id>``), so reading them creates
no folder (only where init itself would draw the id, no job id and not Lightning's
launcher, does ``version`` open the run to learn it). ``save_dir`` being nb's root, Lightning's default ``ModelCheckpoint`` puts the
checkpoints in ``<root>/<project>/<run id>/checkpoints``, inside the run folder, as it
does in a ``TensorBoardLogger``'s version folder.

Imports Lightning (``lightning``, else the older ``pytorch_lightning``) when this module
is imported; ``import nblog`` does not import it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

from . import missing_extra

try:
    from lightning.pytorch import Trainer as _Trainer
    from lightning.pytorch.loggers import Logger as _Logger
    from lightning.pytorch.utilities import rank_zero_only as _rank_zero_only
except ImportError:  # the older package name
    try:
        # the same classes under the old name: mypy sees two distinct types
        from pytorch_lightning import Trainer as _Trainer  # type: ignore[assignment]
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
# Trainer._run(self, model, ckpt_path=...): fit, validate, test and predict all call it
# with the checkpoint path Lightning resolved ("last", "best"... made a file path)
_RUN_CODE = getattr(getattr(_Trainer, "_run", None), "__code__", None)
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
        name: the project; version: the run id; log_dir: the run folder; save_dir:
            nb's root (none of the four opens the run).
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

    def _checkpoint_run_id(self) -> str | None:
        """The id in ``nb_run_id`` beside the checkpoint the trainer restores, or None."""
        return _saved_run_id(self._ckpt_path or _restored_checkpoint(self))

    def _open(self) -> Run:
        kw = dict(self._kw)
        saved = self._checkpoint_run_id()
        if saved is not None:  # fit(ckpt_path=...): continue the run that wrote it
            kw["run_id"], kw["resume"] = saved, "auto"
        return init(config=self._config, _environ=_lightning_env(), **kw)

    def _planned(self) -> tuple[str, str | None] | None:
        """``(root, run id or None)`` the run has or will open with; None: mode disabled."""
        kw = dict(self._kw)
        saved = self._checkpoint_run_id()
        if saved is not None:
            kw["run_id"] = saved
        return _common.planned_run(kw, _lightning_env())

    # -- Logger API ----------------------------------------------------------------

    @property
    def name(self) -> str:
        """The nb project (Lightning uses it in the default checkpoint folder)."""
        return self._kw["project"]

    @property
    def version(self) -> str:
        """The run id (Lightning uses it in the default checkpoint folder).

        Known without opening the run, except on a rank that draws a random id in
        :func:`nblog.init` (no job id, not Lightning's own launcher): there it opens it.
        """
        if self._run is None:
            planned = self._planned()
            if planned is not None and planned[1] is not None:
                return planned[1]
        return self.run.id

    @property
    def log_dir(self) -> str | None:
        """The run folder ``<root>/<project>/<run id>``; reading it creates nothing.

        None where the run id is not known before the run opens (see :attr:`version`)
        and on a rank that logs nothing (``mode="disabled"``, no run id to share).
        Inside ``fit(ckpt_path=...)`` it names the run that wrote the checkpoint.
        """
        if self._run is not None:
            return self._run.dir
        planned = self._planned()
        if planned is None:
            return self.run.dir  # mode "disabled": an inert run, which creates nothing
        root, rid = planned
        return os.path.join(root, self.name, rid) if rid is not None else None

    @property
    def save_dir(self) -> str | None:
        """nb's root (``root=``, ``$NB_DIR``, ``./nb_runs``): Lightning's default
        ``ModelCheckpoint`` saves into ``<save_dir>/<name>/<version>/checkpoints``, the
        run folder's ``checkpoints``. None with ``mode="disabled"`` (Lightning then uses
        ``default_root_dir``). Reading it creates nothing."""
        planned = _common.planned_run(self._kw, _lightning_env())
        return planned[0] if planned is not None else None

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
        """Not a graph: Lightning calls this as ``fit`` starts, once the checkpoint is
        chosen, so here the logger learns ``trainer.ckpt_path`` and opens the run. A run
        opened before (outside ``fit``) that is not the checkpoint's: a warning (rank 0)."""
        try:
            ckpt = model.trainer.ckpt_path
        except Exception:  # a module not attached to a Trainer
            ckpt = None
        saved = _saved_run_id(ckpt)
        if saved is not None:
            if self._run is None:
                self._ckpt_path = os.fspath(ckpt)
            elif saved != self._run.id and self._run.is_logging:
                log.warning(
                    "nblog: run %r was opened before fit restored %s, written by run %r: "
                    "this session goes on in %r. Touch logger.run only inside fit (or pass "
                    "NbLogger(run_id=%r, resume='auto')) to continue the checkpoint's run.",
                    self._run.id, ckpt, saved, self._run.id, saved,
                )
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


def _saved_run_id(ckpt: object) -> str | None:
    """The run id in ``nb_run_id`` beside the checkpoint ``ckpt`` (a file, or a folder for
    DeepSpeed: the folder holding it has the id), or None."""
    if isinstance(ckpt, (str, os.PathLike)) and os.path.exists(ckpt):
        return _common.read_run_id(os.path.dirname(os.path.normpath(os.fspath(ckpt))))
    return None


def _restored_checkpoint(logger: NbLogger) -> object:
    """The checkpoint the trainer running ``logger`` restores in this call, or None.

    Lightning resolves ``fit(ckpt_path="last")`` (and ``"best"``, ``"hpc"``, a path)
    before it calls ``Trainer._run(model, ckpt_path=...)``, but keeps the result to
    itself until it loads the file, after the ``setup`` hooks: the value is read from
    that frame on the call stack. Outside a trainer's ``_run`` (or a Lightning whose
    ``_run`` has no such argument): ``trainer.ckpt_path`` of no trainer, so None.
    """
    if _RUN_CODE is None:
        return None
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is _RUN_CODE:
            local = frame.f_locals
            trainer = local.get("self")
            if any(lg is logger for lg in getattr(trainer, "loggers", ())):
                return local.get("ckpt_path")
        frame = frame.f_back  # type: ignore[assignment]
    return None


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
