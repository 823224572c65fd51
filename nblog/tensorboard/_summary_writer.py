"""``SummaryWriter``: nb in place of ``torch.utils.tensorboard.SummaryWriter``.

``from nblog.tensorboard import SummaryWriter`` instead of
``from torch.utils.tensorboard import SummaryWriter`` is the whole change: the same calls
(``add_scalar``, ``add_scalars``, ``add_text``, ``add_image``/``add_images`` with
``dataformats``, ``add_histogram``, ``add_figure``, ``add_audio``, ``add_hparams``,
``flush``, ``close``, ``with``) write into an nb run under ``<root>/<project>/<run id>``
(root: ``root=``, ``$NB_DIR`` or ``./nb_runs``; project ``"tensorboard"`` unless given).
nb's rank rules apply: rank 0 writes scalars, text and media, the others do nothing.

Which run (every writer of a job must find the same one, with no communication):

- ``run_id=`` or ``$NB_RUN_ID``: that run;
- the run name is the last part of ``log_dir`` with a rank part removed
  (``tb/exp1/rank_3`` → ``exp1``, ``tb/exp1_rank3`` → ``exp1``), else ``comment``;
  so one writer per rank with rank-specific folders (torchtitan's pattern) lands in
  one run — the rest of ``log_dir`` must be equal on every rank;
- a job id that survives a restart (Slurm's ``SLURM_JOB_ID``, torchrun's ``--rdzv-id``)
  with the project and run name gives the id, as ``nblog.init`` does: a requeued job
  continues the run in a new session;
- otherwise, with a ``log_dir``, the id comes from that folder (rank part removed):
  opening the same ``log_dir`` again — e.g. with ``purge_step`` after a restart —
  continues that run in a new session, whose first step hides what earlier sessions
  logged from there on (TensorBoard's purge, applied by nb's readers);
- without ``log_dir`` or a job id: nb's own rule (a fresh run per writer), or on one
  machine under a static rendezvous (``accelerate launch``) the launcher process's id.

Differences from TensorBoard: ``walltime`` is ignored (nb stamps its own wall time);
``global_step=None`` means nb's current step (the last one given, plus one for
``add_scalar``), not 0; ``add_scalars`` logs tags ``main_tag/key`` in the run itself
rather than one folder per key; ``add_histogram``'s default ``bins="tensorflow"`` is
nb's 64 equal bins. Calls nb does not implement (``add_graph``, ``add_embedding``,
``add_pr_curve``, ``add_mesh``, ``add_video``, ``add_custom_scalars``...) warn once
each and are counted in ``writer.unsupported``; they never raise.

Imports nothing heavy: numpy, Pillow and matplotlib only when media is logged.
"""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import time
import typing
from collections.abc import Iterator, Mapping
from typing import Any

from .. import _log as log
from ..write._init import init
from ..write._run import Run
from ..write._runid import derive_run_id, shared_job_id

__all__ = ["UNSUPPORTED", "SummaryWriter", "export_tfevents", "run_folder_of"]

if typing.TYPE_CHECKING:  # (typing.: no TYPE_CHECKING name among the module's public ones)
    from ..reader._views.reader import RunReader

# a rank part of a log_dir: a whole last folder "rank_3"/"rank3"/"rank-3", or a suffix
# "_rank3"/"-rank_3"/".rank3" of the last folder's name
_RANK_FOLDER = re.compile(r"^rank[_-]?\d+$", re.IGNORECASE)
_RANK_SUFFIX = re.compile(r"[_.-]rank[_-]?\d+$", re.IGNORECASE)
_STABLE_JOB_SOURCES = ("torchelastic", "slurm")  # job ids a relaunch or requeue keeps

UNSUPPORTED = (
    "add_graph", "add_embedding", "add_pr_curve", "add_pr_curve_raw", "add_mesh", "add_video",
    "add_custom_scalars", "add_custom_scalars_multilinechart", "add_custom_scalars_marginchart",
    "add_onnx_graph", "add_histogram_raw", "add_image_with_boxes", "add_tensor",
)


def run_folder_of(log_dir: str | os.PathLike) -> str:
    """``log_dir`` as an absolute path without its rank part (see the module docstring)."""
    path = os.path.normpath(os.path.abspath(os.fspath(log_dir)))
    head, tail = os.path.split(path)
    if _RANK_FOLDER.match(tail) and head != path:
        return head
    stripped = _RANK_SUFFIX.sub("", tail)
    return os.path.join(head, stripped) if stripped else path


class SummaryWriter:
    """Writes into an nb run what ``torch.utils.tensorboard.SummaryWriter`` would write.

    Args:
        log_dir: TensorBoard's folder: names the run (see the module docstring);
            nothing is written into it.
        comment: the run name when there is no ``log_dir`` (leading ``_``/``-`` removed).
        purge_step: accepted for compatibility: reopening a ``log_dir`` always continues
            its run in a new session, and the new session's first step hides the
            earlier points from there on.
        max_queue, flush_secs, filename_suffix: accepted and ignored (nb's writer
            thread writes every flush interval, 1 s by default).
        project, run_name, run_id, resume, config, root, timing_all_ranks, system:
            as :func:`nblog.init`; ``run_name`` overrides the name from ``log_dir``.
        **init_kwargs: other :func:`nblog.init` arguments.

    Attributes:
        run: the :class:`nblog.Run`. log_dir: as given, or TensorBoard's default
            ``runs/<date>_<host><comment>``. unsupported: call name → count.

    Raises:
        ValueError, OSError: as :func:`nblog.init` (a bad name, an unwritable root).
    """

    def __init__(
        self,
        log_dir: str | os.PathLike | None = None,
        comment: str = "",
        purge_step: int | None = None,
        max_queue: int = 10,
        flush_secs: int = 120,
        filename_suffix: str = "",
        *,
        project: str = "tensorboard",
        run_name: str | None = None,
        run_id: str | None = None,
        resume: str | None = None,
        config: object = None,
        root: str | os.PathLike | None = None,
        timing_all_ranks: bool = False,
        system: bool | list[str] | tuple[str, ...] = True,
        **init_kwargs: Any,
    ) -> None:
        self.unsupported: dict[str, int] = {}
        self.purge_step = purge_step
        if log_dir is None:
            stamp = time.strftime("%b%d_%H-%M-%S")
            self.log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
            name = run_name or (comment.lstrip("_-") or None)
        else:
            self.log_dir = os.fspath(log_dir)
            folder = run_folder_of(log_dir)
            name = run_name or os.path.basename(folder) or None
        kw: dict[str, Any] = dict(
            project=project, run_name=name, run_id=run_id, resume=resume, root=root,
            timing_all_ranks=timing_all_ranks, system=system, config=config,
        )
        kw.update(init_kwargs)
        env = os.environ
        if run_id is None and not env.get("NB_RUN_ID"):
            _job, source = shared_job_id(env)
            if log_dir is not None and source not in _STABLE_JOB_SOURCES:  # the folder names the run
                kw["run_id"] = derive_run_id(project, name, "logdir\0" + folder)
                kw["resume"] = resume or "auto"
            elif log_dir is None:
                from ..integrations._common import agent_run_id

                agent = agent_run_id(project, name, env)
                if agent is not None:  # accelerate launch / torchrun --master-port: no job id
                    kw["run_id"], kw["resume"] = agent, resume or "auto"
        self.run: Run = init(**kw)

    # -- what TensorBoard's writer offers -------------------------------------------

    def add_scalar(self, tag: str, scalar_value: Any, global_step: int | None = None,
                   walltime: float | None = None, new_style: bool = False,
                   double_precision: bool = False) -> None:
        """Log one number (float, int, numpy or one-element torch value) at ``global_step``."""
        self.run.add_scalar(tag, scalar_value, step=global_step)

    def add_scalars(self, main_tag: str, tag_scalar_dict: Mapping[str, Any],
                    global_step: int | None = None, walltime: float | None = None) -> None:
        """Log several numbers at once, as tags ``main_tag/key``."""
        self.run.add_scalar({f"{main_tag}/{k}": v for k, v in tag_scalar_dict.items()}, step=global_step)

    def add_text(self, tag: str, text_string: str, global_step: int | None = None,
                 walltime: float | None = None) -> None:
        """Log a text."""
        self.run.add_text(tag, text_string, step=global_step)

    def add_image(self, tag: str, img_tensor: Any, global_step: int | None = None,
                  walltime: float | None = None, dataformats: str = "CHW") -> None:
        """Log one image (array or tensor; uint8 0-255 or float 0-1; CHW by default, as
        TensorBoard)."""
        self.run.add_image(tag, img_tensor, step=global_step, dataformats=dataformats)

    def add_images(self, tag: str, img_tensor: Any, global_step: int | None = None,
                   walltime: float | None = None, dataformats: str = "NCHW") -> None:
        """Log a batch of images as one grid (NCHW by default, as TensorBoard)."""
        self.run.add_images(tag, img_tensor, step=global_step, dataformats=dataformats)

    def add_histogram(self, tag: str, values: Any, global_step: int | None = None,
                      bins: Any = "tensorflow", walltime: float | None = None,
                      max_bins: int | None = None) -> None:
        """Log the distribution of ``values`` (``bins="tensorflow"``: nb's 64 bins)."""
        if isinstance(bins, str) and bins == "tensorflow":
            bins = 64 if max_bins is None else max_bins
        self.run.add_histogram(tag, values, step=global_step, bins=bins)

    def add_figure(self, tag: str, figure: Any, global_step: int | None = None,
                   close: bool = True, walltime: float | None = None) -> None:
        """Log a matplotlib figure (or a list of them, as one grid) as an image."""
        self.run.add_figure(tag, figure, step=global_step, close=close)

    def add_audio(self, tag: str, snd_tensor: Any, global_step: int | None = None,
                  sample_rate: int = 44100, walltime: float | None = None) -> None:
        """Log a sound clip (floats in [-1, 1], shape (L,) or (1, L))."""
        self.run.add_audio(tag, snd_tensor, step=global_step, sample_rate=sample_rate)

    def add_hparams(self, hparam_dict: Mapping[str, Any], metric_dict: Mapping[str, Any],
                    hparam_domain_discrete: Mapping | None = None, run_name: str | None = None,
                    global_step: int | None = None) -> None:
        """Record ``hparam_dict`` in the run's config (under ``"hparams"``) and log
        ``metric_dict`` as scalars at ``global_step``."""
        from ..integrations import _common

        _common.merge_config(self.run, {"hparams": dict(hparam_dict)})
        if metric_dict:
            self.run.add_scalar(dict(metric_dict), step=global_step)

    def get_logdir(self) -> str:
        """The ``log_dir`` given (or TensorBoard's default one); nb writes elsewhere."""
        return self.log_dir

    def flush(self) -> None:
        """Write everything logged so far to disk before returning."""
        self.run.flush()

    def close(self) -> None:
        """Finish the run's session (idempotent)."""
        self.run.finish()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        if name in UNSUPPORTED or name.startswith("add_"):
            def unsupported(*args: Any, **kwargs: Any) -> None:
                self.unsupported[name] = self.unsupported.get(name, 0) + 1
                if self.unsupported[name] == 1:
                    log.warning("nblog: SummaryWriter.%s is not supported by nb; the call is "
                                "skipped (counted in writer.unsupported)", name)
            return unsupported
        raise AttributeError(f"'SummaryWriter' object has no attribute {name!r}")


# -- nb run → TensorBoard event files ---------------------------------------------------


def export_tfevents(run: str | os.PathLike, out_dir: str | os.PathLike, *,
                    root: str | os.PathLike | None = None) -> list[str]:
    """Write a run as TensorBoard event files, one folder per rank (``rank_<k>``).

    What readers of the run see is written, with each point's own step and wall time:
    scalars and timers of every rank, and rank 0's text, images, histograms and audio;
    points a later session hid are left out (``tensorboard --logdir OUT_DIR`` shows the
    clean curve). Scalars and timers are float64 tensors of TensorBoard's scalars plugin
    (exact values; what ``SummaryWriter.add_scalar(new_style=True, double_precision=True)``
    writes); a timer's metadata says it is one (TensorBoard shows the description).

    Each file also records what ``nb import tensorboard`` needs to bring the run back
    whole (one run, its ranks, sessions and timers), as values of a plugin
    TensorBoard does not show: the run (``nblog/run``, first) and each session before its
    records (``nblog/session``); ``man nb-import``. Needs the ``tensorboard`` package (the
    ``tensorboard`` extra).

    Args:
        run: a run id, unique prefix or folder, as :class:`nblog.RunReader` takes.
        out_dir: where the ``rank_<k>`` folders are created (made if missing).
        root: where runs are looked up (default ``$NB_DIR`` or ``./nb_runs``).

    Returns:
        The folders written, rank 0 first.

    Raises:
        RunNotFoundError, AmbiguousRunError: ``run`` names no run, or several.
        ImportError: tensorboard is not installed.
        FileExistsError: a ``rank_<k>`` folder holds event files already (an earlier
            export: TensorBoard would show both); nothing is written.
        OSError: ``out_dir`` cannot be written: ``cannot write FOLDER: REASON``.
    """
    try:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as err:
        from ..integrations import missing_extra

        raise missing_extra("tensorboard", "tensorboard", err) from err

    from ..reader._runs.export import writing_to
    from ..reader._views.reader import RunReader

    reader = RunReader(run, root=root)
    ranks = reader.ranks()
    folders = [os.path.join(os.fspath(out_dir), f"rank_{rank}") for rank in ranks]
    for folder in folders:
        if os.path.isdir(folder) and any("tfevents" in name for name in os.listdir(folder)):
            raise FileExistsError(errno.EEXIST, "holds TensorBoard event files already (an earlier export?): "
                                  "TensorBoard would show both; name a new folder", folder)
    protos = _Protos()
    run_mark = _run_mark(reader, ranks)
    for rank, folder in zip(ranks, folders, strict=True):
        with writing_to(folder):  # "cannot write FOLDER: REASON", as every output of nb
            os.makedirs(folder, exist_ok=True)
            writer = EventFileWriter(folder)
        try:
            for event in _rank_events(reader, rank, {**run_mark, "rank": rank}, protos):
                writer.add_event(event)
        finally:
            writer.close()
    return folders


class _Protos:
    """TensorBoard's protobuf modules and the metadata every value of a kind shares."""

    def __init__(self) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2
        from tensorboard.plugins.scalar import metadata as scalar_metadata
        from tensorboard.plugins.text import metadata as text_metadata

        from ._import import EXPORT_PLUGIN, EXPORT_VERSION, TIMER_DESCRIPTION

        self.event_pb2, self.summary_pb2, self.tensor_pb2 = event_pb2, summary_pb2, tensor_pb2
        self.scalar_shape = tensor_shape_pb2.TensorShapeProto()
        self.vector_shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)])
        self.scalar = scalar_metadata.create_summary_metadata(display_name=None, description=None)
        self.timer = scalar_metadata.create_summary_metadata(display_name=None, description=TIMER_DESCRIPTION)
        self.text = text_metadata.create_summary_metadata(display_name=None, description=None)
        self.nb = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
            plugin_name=EXPORT_PLUGIN, content=json.dumps({"version": EXPORT_VERSION}).encode()))

    def value(self, kind: str, tag: str, payload: Any, with_metadata: bool) -> Any:
        """The Summary.Value of one record: a scalar or timer (float64 tensor), a text
        (string tensor of the text plugin) or media (``payload`` is the value)."""
        if kind == "media":
            return payload
        if kind == "text":
            tensor = self.tensor_pb2.TensorProto(dtype="DT_STRING", string_val=[payload.encode("utf-8")],
                                                 tensor_shape=self.vector_shape)
        else:
            tensor = self.tensor_pb2.TensorProto(dtype="DT_DOUBLE", double_val=[payload],
                                                 tensor_shape=self.scalar_shape)
        if not with_metadata:
            return self.summary_pb2.Summary.Value(tag=tag, tensor=tensor)
        metadata = {"scalar": self.scalar, "timer": self.timer, "text": self.text}[kind]
        return self.summary_pb2.Summary.Value(tag=tag, metadata=metadata, tensor=tensor)

    def mark(self, tag: str, obj: dict) -> Any:
        """One of nb's marks: ``obj`` as JSON in a string tensor of plugin ``nblog``."""
        tensor = self.tensor_pb2.TensorProto(dtype="DT_STRING", string_val=[json.dumps(obj).encode("utf-8")],
                                             tensor_shape=self.scalar_shape)
        return self.summary_pb2.Summary.Value(tag=tag, metadata=self.nb, tensor=tensor)

    def event(self, wall: float, step: int, value: Any) -> Any:
        return self.event_pb2.Event(wall_time=wall, step=step, summary=self.summary_pb2.Summary(value=[value]))


def _run_mark(reader: RunReader, ranks: list[int]) -> dict:
    """The run as the ``nblog/run`` mark records it (the rank is added per file)."""
    from ._import import EXPORT_VERSION

    meta = reader.meta
    return {"version": EXPORT_VERSION, "project": reader.project, "id": reader.id, "name": meta.get("name"),
            "config": reader.config, "created": meta.get("created"), "world_size": meta.get("world_size"),
            "status": meta.get("status"), "launcher": meta.get("launcher"), "job_id": meta.get("job_id"),
            "job_id_source": meta.get("job_id_source"), "hosts": meta.get("hosts"), "ranks": ranks}


def _rank_events(reader: RunReader, rank: int, run_mark: dict, p: _Protos) -> Iterator[Any]:
    """The events of one rank's file: the run mark, then session by session its mark and
    its records in the order logged (by wall time; scalars before timers at a tie).

    A value carries its plugin's metadata when its tag's previous value in the file was
    of another kind or there was none (TensorFlow 2 writes it with a tag's first value
    only, and TensorBoard keeps that one): a tag's first value, and a scalar and a timer
    of the same tag each time they alternate."""
    from ._import import EXPORT_RUN_TAG, EXPORT_SESSION_TAG, EXPORT_VERSION

    sessions = reader.sessions(rank)
    files = reader.files(rank)
    by_session: dict[int, list[tuple[float, int, str, str, Any]]] = {s["session"]: [] for s in sessions}
    for frame, kind in ((reader.scalars(rank=rank), "scalar"), (reader.timers(rank=rank), "timer")):
        for s, step, tag, value, wall in frame.select("session", "step", "tag", "value", "wall_time").iter_rows():
            by_session.setdefault(s, []).append((wall, step, kind, tag, value))
    if rank == 0:
        for s, step, tag, text, wall in reader.text().select("session", "step", "tag", "text", "wall_time").iter_rows():
            by_session.setdefault(s, []).append((wall, step, "text", tag + "/text_summary", text))
        for s, wall, step, value in _media_values(reader, p.summary_pb2):
            by_session.setdefault(s, []).append((wall, step, "media", value.tag, value))
    starts = [float(s["wall_start"]) for s in sessions if isinstance(s.get("wall_start"), (int, float))]
    wall0 = min(starts, default=None) or run_mark.get("created") or time.time()
    yield p.event(float(wall0), 0, p.mark(EXPORT_RUN_TAG, run_mark))
    headers = {s["session"]: lf.header for s, lf in zip(sessions, files, strict=True)}
    first_steps = {s["session"]: s["first_step"] for s in sessions}
    last_kind: dict[str, str] = {}
    for s in sorted(by_session):
        header = headers.get(s, {})
        info = {"version": EXPORT_VERSION, "session": s, "host": header.get("host"), "pid": header.get("pid"),
                "wall_start": header.get("wall_start"), "local_rank": header.get("local_rank"),
                "first_step": first_steps.get(s)}
        start = info["wall_start"] if isinstance(info["wall_start"], (int, float)) else wall0
        yield p.event(float(start), info["first_step"] or 0, p.mark(EXPORT_SESSION_TAG, info))
        records = by_session.pop(s)
        records.sort(key=lambda e: e[0])  # stable: the logged order at a tie
        for wall, step, kind, tag, payload in records:
            yield p.event(wall, step, p.value(kind, tag, payload, last_kind.get(tag) != kind))
            last_kind[tag] = kind


def _media_values(reader: RunReader, summary_pb2: Any) -> list:
    """(session, wall time, step, Summary.Value) of rank 0's images, audio and histograms."""
    out = []
    for rec in reader.media().iter_rows(named=True):
        if rec["kind"] == "image" and rec["format"] in ("png", "jpeg"):
            try:
                blob = reader.media_bytes(rec)
            except Exception as err:  # a damaged blob: the others still go out
                log.warning("nblog: image %s at step %s not exported: %s", rec["tag"], rec["step"], err)
                continue
            image = summary_pb2.Summary.Image(height=rec["height"] or 0, width=rec["width"] or 0,
                                              colorspace=rec["channels"] or 0, encoded_image_string=blob)
            out.append((rec["session"], rec["wall_time"], rec["step"], summary_pb2.Summary.Value(tag=rec["tag"], image=image)))
        elif rec["kind"] == "audio":
            try:
                blob = reader.media_bytes(rec)
            except Exception as err:
                log.warning("nblog: audio %s at step %s not exported: %s", rec["tag"], rec["step"], err)
                continue
            audio = summary_pb2.Summary.Audio(sample_rate=float(rec["sample_rate"] or 0),
                                              num_channels=rec["channels"] or 1,
                                              encoded_audio_string=blob, content_type="audio/wav")
            out.append((rec["session"], rec["wall_time"], rec["step"], summary_pb2.Summary.Value(tag=rec["tag"], audio=audio)))
    hist = reader.histograms()
    for (session, tag, step, wall), group in hist.group_by(["session", "tag", "step", "wall_time"], maintain_order=True):
        first = group.row(0, named=True)
        proto = summary_pb2.HistogramProto(
            min=first["min"] or 0.0, max=first["max"] or 0.0, num=float(first["num"]),
            sum=first["sum"] or 0.0, sum_squares=first["sum_squares"] or 0.0,
            bucket_limit=group["bin_right"].to_list(), bucket=[float(c) for c in group["count"].to_list()],
        )
        out.append((session, wall, step, summary_pb2.Summary.Value(tag=tag, histo=proto)))
    return out
