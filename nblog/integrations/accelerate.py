"""``NbTracker``: nb as an Accelerate tracker, ``Accelerator(log_with=NbTracker("proj"))``.

``accelerator.init_trackers(name, config=...)`` stores the config, ``accelerator.log(values,
step=)`` logs (numbers as scalars, strings as text) and ``accelerator.end_training()``
finishes the session. Accelerate calls these on the main process only; the tracker is
constructed on every process, and ``tracker.run`` there opens the same run by nb's own
rules (timers of every rank with ``all_ranks=True``, system metrics per machine).

``accelerate launch`` on one machine gives its workers no shared job id
(``TORCHELASTIC_RUN_ID=none``): they derive the run id from their common parent, the
launcher process (see ``_common.agent_run_id``). Under Slurm the job id decides; set
``NB_RUN_ID`` (with ``NB_RESUME=auto``) for a new launch to continue an earlier run.
Imports ``accelerate`` when this module is imported; ``import nblog`` does not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from . import missing_extra

try:
    from accelerate.tracking import GeneralTracker
except ImportError as err:
    raise missing_extra("accelerate", "accelerate", err) from err

from ..write._init import init
from ..write._run import Run
from . import _common


class NbTracker(GeneralTracker):
    """An Accelerate ``GeneralTracker`` writing into an nb run.

    Args:
        project, run_name, run_id, resume, config, root, timing_all_ranks, system: as
            :func:`nblog.init`; ``config`` is merged with ``init_trackers(config=...)``.
        **init_kwargs: other :func:`nblog.init` arguments.

    Attributes:
        run / tracker: the :class:`nblog.Run`, opened on first use.
    """

    name = "nb"
    requires_logging_directory = False
    main_process_only = False  # nb's own rank rules decide who writes

    def __init__(
        self,
        project: str = "accelerate",
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

    @property
    def run(self) -> Run:
        """The :class:`nblog.Run`, opened on first use (with the config known so far)."""
        if self._run is None:
            kw = dict(self._kw)
            if kw["run_id"] is None:
                agent = _common.agent_run_id(kw["project"], kw["run_name"], os.environ)
                if agent is not None:  # accelerate launch's static rendezvous: no job id
                    kw["run_id"], kw["resume"] = agent, "auto"
            self._run = init(config=self._config, **kw)
        return self._run

    @property
    def tracker(self) -> Run:
        """Accelerate's name for :attr:`run` (``accelerator.get_tracker("nb", unwrap=True)``)."""
        return self.run

    def start(self) -> None:
        """Nothing yet: the run opens with the config ``store_init_configuration`` brings."""

    def store_init_configuration(self, values: Mapping) -> None:
        """Record ``values`` in the run's config (opens the run if it is not yet open)."""
        if self._run is None:
            self._config.update(_common.as_config(values))
            _ = self.run
        else:
            _common.merge_config(self._run, values)

    def log(self, values: Mapping[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Log numbers as scalars and strings as text at ``step`` (None: the next step)."""
        run = self.run
        numbers = {}
        for tag, value in values.items():
            if isinstance(value, str):
                run.add_text(tag, value, step=step)
            else:
                numbers[tag] = value
        if numbers:
            run.add_scalar(numbers, step=step)

    def finish(self) -> None:
        """Finish the run's session."""
        if self._run is not None:
            self._run.finish()
