"""``NbCallback``: nb in a Hugging Face ``Trainer``, ``Trainer(..., callbacks=[NbCallback("proj")])``.

Every process of a ``torchrun`` launch constructs it; the run opens when training starts
(``on_train_begin``) with the ``TrainingArguments`` and the model's config as config, and
nb's rank rules apply: rank 0 writes the scalars, every rank may time itself through
``callback.run``. ``on_log`` logs at ``state.global_step`` under the tags Transformers'
own TensorBoard callback uses (``loss`` → ``train/loss``, ``eval_loss`` → ``eval/loss``,
``test_*`` → ``test/*``). Every rank times its own optimizer steps, from ``on_step_begin``
(the first micro-batch's forward) to ``on_step_end`` (after ``optimizer.step()``), as the
timer ``time/step`` at the step that ends (``state.global_step``), into its own event
log: ``nb timers`` shows the slowest rank and stragglers with no code of yours.
Each checkpoint folder gets a file ``nb_run_id``, so that
``trainer.train(resume_from_checkpoint=...)`` continues that run in a new session, even
in a new launch that shares no job id with the first.

Set ``report_to="none"`` (or a list without ``"tensorboard"``) to log only through nb.
Imports ``transformers`` when this module is imported; ``import nblog`` does not.
"""

from __future__ import annotations

import os
from typing import Any

from . import missing_extra

try:
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
except ImportError as err:
    raise missing_extra("transformers", "transformers", err) from err

from .. import _log as log
from ..write._init import init
from ..write._run import Run
from . import _common

_CHECKPOINT_PREFIX = "checkpoint"  # Trainer's checkpoint folders: <output_dir>/checkpoint-<step>


def rewrite_tag(key: str) -> str:
    """Transformers' log key as a TensorBoard-style tag: ``eval_loss`` → ``eval/loss``,
    ``test_acc`` → ``test/acc``, anything else ``k`` → ``train/k``."""
    for prefix in ("eval", "test"):
        if key.startswith(prefix + "_"):
            return f"{prefix}/{key[len(prefix) + 1:]}"
    return "train/" + key


class NbCallback(TrainerCallback):
    """A ``TrainerCallback`` writing the Trainer's logs into an nb run.

    Args:
        project, run_name, run_id, resume, config, root, timing_all_ranks, system: as
            :func:`nblog.init`; ``config`` is merged over the TrainingArguments
            (``args.to_dict()``) and the model config (under ``"model"``).
        step_timer: the tag of the per-step timer every rank logs (seconds from
            ``on_step_begin`` to ``on_step_end``, at ``state.global_step``); None: none.
        **init_kwargs: other :func:`nblog.init` arguments.

    Attributes:
        run: the :class:`nblog.Run` of the current ``train()`` (None before it starts).
    """

    def __init__(
        self,
        project: str = "huggingface",
        *,
        run_name: str | None = None,
        run_id: str | None = None,
        resume: str | None = None,
        config: object = None,
        root: str | os.PathLike | None = None,
        timing_all_ranks: bool = False,
        system: bool | list[str] | tuple[str, ...] = True,
        step_timer: str | None = "time/step",
        **init_kwargs: Any,
    ) -> None:
        if step_timer is not None and (not isinstance(step_timer, str) or not step_timer):
            raise ValueError(f"step_timer must be a non-empty str or None, got {step_timer!r}")
        self._kw = _common.init_kwargs(project, run_name, run_id, resume, root, timing_all_ranks, system)
        self._kw.update(init_kwargs)
        self._config = _common.as_config(config)
        self._step_timer = step_timer
        self._timing: Any = None  # the timer of the step under way (its __exit__ logs it)
        self.run: Run | None = None

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       model: Any = None, **kwargs: Any) -> None:
        """Open the run (continuing the checkpoint's run when training resumes)."""
        if self.run is not None and not self.run._finished:
            return
        config: dict[str, Any] = {}
        try:
            config.update(args.to_dict())
        except Exception as err:  # arguments of an unexpected kind: keep going without them
            log.warning("nblog: TrainingArguments.to_dict() failed (%r); the run's config leaves them out", err)
        model_config = getattr(model, "config", None)
        if model_config is not None and callable(getattr(model_config, "to_dict", None)):
            config["model"] = model_config.to_dict()
        config.update(self._config)
        kw = dict(self._kw)
        if kw["run_name"] is None and getattr(args, "run_name", None) and args.run_name != args.output_dir:
            kw["run_name"] = str(args.run_name)
        if state.global_step > 0:  # resumed from a checkpoint: the run that wrote it
            # output_dir: str | None in TrainingArguments, always set once a Trainer runs
            folder = os.path.join(args.output_dir, f"{_CHECKPOINT_PREFIX}-{state.global_step}")  # type: ignore[arg-type]
            saved = _common.read_run_id(folder)
            if saved is not None and kw["run_id"] is None:
                kw["run_id"], kw["resume"] = saved, "auto"
        if kw["run_id"] is None:
            agent = _common.agent_run_id(kw["project"], kw["run_name"], os.environ)
            if agent is not None:  # accelerate launch / torchrun --master-port: no job id
                kw["run_id"], kw["resume"] = agent, kw["resume"] or "auto"
        self.run = init(config=config, **kw)

    def on_step_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                      **kwargs: Any) -> None:
        """Start this rank's timer of the optimizer step that ends at ``global_step + 1``."""
        if self.run is None or self._step_timer is None:
            return
        self._timing = self.run.timer(self._step_timer, step=state.global_step + 1, all_ranks=True)
        self._timing.__enter__()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        """Log this rank's step time (``optimizer.step()`` done, ``global_step`` counted)."""
        timing, self._timing = self._timing, None
        if timing is not None:
            timing.__exit__(None, None, None)

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Log the numbers in ``logs`` at ``state.global_step`` (rank 0 writes)."""
        if self.run is None or not logs:
            return
        values = {
            rewrite_tag(k): v for k, v in logs.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        if values:
            self.run.add_scalar(values, step=state.global_step)

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                **kwargs: Any) -> None:
        """Write the run id into the checkpoint folder just saved."""
        folder = os.path.join(args.output_dir, f"{_CHECKPOINT_PREFIX}-{state.global_step}")  # type: ignore[arg-type]
        if os.path.isdir(folder):
            _common.write_run_id(folder, self.run)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        """Finish the run's session."""
        self._timing = None
        if self.run is not None:
            self.run.finish()
