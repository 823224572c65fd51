"""Importing TensorBoard event files as nb runs (``nb import tensorboard``).

Reading is TensorBoard's own: records come from
``tensorboard.backend.event_processing.event_file_loader.RawEventFileLoader`` and are
parsed as ``event_pb2.Event``; nothing here parses the record framing. Writing is nb's
own writer (:class:`nblog.write._writer.Writer`) fed records whose milliseconds are computed
from each event's original wall time, so wall times read back within 1 ms.

Layout (:func:`import_sources`): every folder under LOGDIR holding ``*tfevents*`` files
becomes one run of rank 0 (run name: the folder's path relative to LOGDIR, ``/``
written ``.``; the path itself is kept in the config as ``tensorboard_logdir``) — unless
its files are nb's own export (below). Its files are read in name order, as
TensorBoard loads them. A ``SessionLog.START`` event (what ``SummaryWriter(purge_step=)``
writes after its ``file_version`` event) after the first data starts a new nb session,
so nb's hiding (a later session's first step hides earlier points from there on) shows
the curve TensorBoard shows after its purge. Another file without such a marker goes on
in the same session: TensorBoard purges nothing there either.

nb's own export (``nb export --format tfevents``, :func:`nblog.tensorboard.export_tfevents`)
comes back whole: one folder per rank (``rank_<k>``), and in each event file, in
TensorBoard's own terms (which TensorBoard tolerates: it shows no plugin it does not
know):

- first, a string tensor ``nblog/run`` of plugin ``nblog`` (:data:`EXPORT_PLUGIN`): the
  run as JSON — project, id, name, config, world size, ..., and the file's ``rank``;
- before each session's records, a string tensor ``nblog/session`` of the same plugin:
  the session as JSON (number, host, pid, wall start, first step, local rank);
- scalars and timers as float64 tensors of the scalars plugin (exact values, as
  ``SummaryWriter.add_scalar(new_style=True, double_precision=True)`` writes them); a
  timer's metadata carries the description :data:`TIMER_DESCRIPTION`, which
  TensorBoard's scalars dashboard shows beside the chart.

The folders of one export under one parent (same project and run id in their ``nblog/run``)
are imported as ONE run with each folder's points in its rank's event logs, sessions
numbered as in the original, timers as timers: project, name, config and world size
are the export's (the project unless ``--project`` is given); the run id is the
original one unless a run of that id already exists under the root that is not this
import (then one derived from the project and the export folder's path). Should the
imported first steps hide a point the export holds (steps that went back within a
session), that rank's sessions are imported as one, with a warning.

Kept: scalars (``simple_value`` and scalar tensors of the scalars plugin), text (the text
plugin; the ``/text_summary`` suffix torch adds is removed), images (PNG/JPEG as they
are; the first of a batch) and histograms (edges and counts; statistics from the proto
where it has them); timers of nb's own export. Other summaries (audio, graphs, hparams,
custom plugins) are counted and named in one warning.

Damage: the loader stops at a truncated or corrupt record; the bytes consumed are
compared with the file's size, and a file that was not read to its end gets one warning
naming it and the offset. What came before is imported.

Re-import: the run id is derived from the project and the folder's absolute path (nb's
export: see above), so importing again finds the run and refuses (:class:`AlreadyImported`),
unless ``update``: then the records after those imported before (counted per file in
``run.json``'s ``import`` key) go into new sessions.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import _log as log
from .._version import __version__
from ..format import _format as F
from ..format._filenames import event_file_name, pack_file_name, session_pack_file_name
from ..format._names import check_name
from ..format._runfile import RunFile, next_session, read_run_json
from ..write._runid import derive_run_id

if TYPE_CHECKING:
    import numpy as np

_RECORD_OVERHEAD = 16  # u64 length, u32 length crc, u32 data crc around each record

#: The plugin name of nb's marks in the event files of its own export (TensorBoard
#: lists no plugin it does not know, and shows nothing of them).
EXPORT_PLUGIN = "nblog"
#: The tag of the mark that opens each event file of nb's export: the run, as JSON.
EXPORT_RUN_TAG = "nblog/run"
#: The tag of the mark before each session's records: the session, as JSON.
EXPORT_SESSION_TAG = "nblog/session"
#: The version of the marks' JSON (the plugin data's content); a newer one is read as
#: far as it is known.
EXPORT_VERSION = 1
#: The summary description of a timer's values in nb's export (TensorBoard's scalars
#: dashboard shows it): what tells a timer from a scalar of the same shape.
TIMER_DESCRIPTION = "nb timer: seconds of one occurrence"
_MARK_PEEK = 4  # records read from a folder's first file to find nb's run mark

_KIND_CODE = {"scalar": F.KIND_SCALAR, "timer": F.KIND_TIMER, "text": F.KIND_TEXT, "media": F.KIND_MEDIA}


class AlreadyImported(FileExistsError):
    """The folder was imported before (``run_dir``); pass ``update`` to add new points."""

    def __init__(self, source: str, run_dir: str):
        super().__init__(f"{source} was imported before as {run_dir}; pass --update to add new points")
        self.source = source
        self.run_dir = run_dir


@dataclass(frozen=True)
class ImportSource:
    """What becomes one nb run.

    Attributes:
        path: the folder the run comes from (absolute): a folder of event files, or the
            folder of nb's export that holds its ``rank_<k>`` folders.
        name: the run name (None: nb's export of a run without one).
        folders: ``(rank, folder)`` pairs, ascending by rank: the event files of each rank.
        export: the ``nblog/run`` mark of nb's export (project, id, name, config, ...),
            or None for event files of another writer.
    """

    path: str
    name: str | None
    folders: tuple[tuple[int, str], ...]
    export: dict | None = None

    @property
    def project(self) -> str | None:
        """The project of nb's export (a valid name), else None."""
        return _valid((self.export or {}).get("project"))


@dataclass
class _Session:
    """The records of one nb session, in the order read: ``(kind, wall, step, tag, ...)``
    with kind "scalar"/"timer" (+ value), "text" (+ text) or "media" (+ blob kind,
    payload, meta); ``info``: nb's session mark, for nb's own export."""

    records: list = field(default_factory=list)
    info: dict | None = None

    def empty(self) -> bool:
        return not self.records

    def count(self, kind: str) -> int:
        return sum(1 for r in self.records if r[0] == kind)


def _valid(value: object) -> str | None:
    try:
        return check_name(value, "name")
    except ValueError:
        return None


def event_folders(logdir: str) -> list[str]:
    """Folders under ``logdir`` (itself included) holding TensorBoard event files, sorted."""
    out = []
    for folder, dirs, files in os.walk(logdir):
        dirs.sort()
        if any("tfevents" in name for name in files):
            out.append(folder)
    return sorted(out)


def run_name_for(logdir: str, folder: str) -> str:
    """The nb run name of ``folder``: its path relative to ``logdir`` with ``/`` as ``.``
    (``logdir``'s own name when the events are in ``logdir`` itself)."""
    rel = os.path.relpath(folder, logdir)
    if rel == ".":
        rel = os.path.basename(os.path.abspath(logdir)) or "tensorboard"
    name = rel.replace(os.sep, ".").replace("\\", ".")
    while ".." in name:
        name = name.replace("..", ".")
    return name.strip(".")[:200] or "tensorboard"


def import_sources(logdir: str) -> list[ImportSource]:
    """What ``nb import tensorboard LOGDIR`` makes runs of, in the order of their folders:
    each folder of event files on its own, except the ``rank_<k>`` folders of one nb
    export (same parent, project and run id), which make one source together. A second
    folder claiming a rank already found for that export is imported as a run of its own,
    with a warning.

    Raises:
        ImportError: the ``tensorboard`` package is missing.
    """
    out: list[ImportSource] = []
    groups: dict[tuple[str, str, str], list[tuple[int, str, dict]]] = {}
    order: list[tuple[str, str, str] | ImportSource] = []
    for folder in event_folders(logdir):
        mark = export_mark(folder)
        if mark is not None:
            parent = os.path.dirname(os.path.abspath(folder))
            key = (parent, mark["project"], mark["id"])
            group = groups.get(key)
            if group is None:
                groups[key] = group = []
                order.append(key)
            if all(rank != mark["rank"] for rank, _f, _m in group):
                group.append((mark["rank"], os.path.abspath(folder), mark))
                continue
            log.warning("nblog: %s holds rank %d of %s/%s again; imported as a run of its own", folder,
                        mark["rank"], mark["project"], mark["id"])
        order.append(ImportSource(os.path.abspath(folder), run_name_for(logdir, folder),
                                  ((0, os.path.abspath(folder)),)))
    for item in order:
        if isinstance(item, ImportSource):
            out.append(item)
            continue
        group = sorted(groups[item])
        mark = group[0][2]
        name = _valid(mark.get("name"))
        out.append(ImportSource(item[0], name, tuple((r, f) for r, f, _m in group), mark))
    return out


def export_mark(folder: str) -> dict | None:
    """The ``nblog/run`` mark at the start of ``folder``'s first event file (by name), or
    None when nb did not write it. Its ``project`` and ``id`` are valid names and its
    ``rank`` an int >= 0, or it is not taken as nb's.

    Raises:
        ImportError: the ``tensorboard`` package is missing.
    """
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2

    names = sorted(n for n in os.listdir(folder) if "tfevents" in n and os.path.isfile(os.path.join(folder, n)))
    if not names:
        return None
    try:
        for i, record in enumerate(RawEventFileLoader(os.path.join(folder, names[0])).Load()):
            if i >= _MARK_PEEK:
                break
            for value in event_pb2.Event.FromString(record).summary.value:
                if value.tag == EXPORT_RUN_TAG and value.metadata.plugin_data.plugin_name == EXPORT_PLUGIN:
                    mark = _mark_json(value)
                    ok = (mark is not None and _valid(mark.get("project")) and _valid(mark.get("id"))
                          and type(mark.get("rank")) is int and mark["rank"] >= 0)
                    return mark if ok else None
    except Exception:  # damage at the very start: read as another writer's files (and warned there)
        return None
    return None


def _mark_json(value: Any) -> dict | None:
    """The JSON object in one of nb's marks (a string tensor), or None."""
    strings = value.tensor.string_val
    if len(strings) != 1:
        return None
    try:
        obj = json.loads(strings[0].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def import_folder(folder: str, name: str, project: str, root: str, *, update: bool = False) -> dict:
    """Import the event files of one folder as one nb run of rank 0, whoever wrote them
    (:func:`import_source` of that folder alone).

    Raises:
        AlreadyImported, ImportError, OSError: as :func:`import_source`.
    """
    path = os.path.abspath(folder)
    return import_source(ImportSource(path, name, ((0, path),)), project, root, update=update)


def import_source(source: ImportSource, project: str, root: str, *, update: bool = False) -> dict:
    """Import one source (:func:`import_sources`) as one nb run (see the module docstring).

    Args:
        source: the folders, rank by rank, and nb's mark if nb's export wrote them.
        project: the nb project.
        root: the nb root folder (created if missing).
        update: add the records not imported before as new sessions, instead of
            refusing a source imported before.

    Returns:
        ``{"run_dir", "run_id", "ranks", "sessions", "scalars", "timers", "texts", "media",
        "skipped"}``: ranks and session numbers written now (0 sessions: nothing new),
        records of each kind (every rank), and summaries not imported by kind.

    Raises:
        AlreadyImported: the source was imported before and ``update`` is False.
        ImportError: the ``tensorboard`` package is missing.
        OSError: the root cannot be written.
    """
    path = os.path.abspath(source.path)
    rid = _run_id(source, project, root, path)
    run_dir = os.path.join(root, project, rid)
    old = read_run_json(run_dir) if os.path.isdir(run_dir) else None
    if old is not None and not update:
        raise AlreadyImported(path, run_dir)
    done: dict[str, int] = dict(((old or {}).get("import") or {}).get("records") or {})
    nb = source.export is not None
    counts = dict(done)
    skipped: dict[str, int] = {}
    per_rank: list[tuple[int, list[_Session]]] = []
    for rank, folder in source.folders:
        prefix = "" if folder == path else os.path.relpath(folder, path) + "/"
        sessions = _read(folder, done, counts, skipped, prefix, nb)
        if nb:
            sessions = [s for s in sessions if s.info is not None or not s.empty()]
            sessions = _keep_visible(sessions, folder, rank)
        else:
            sessions = [s for s in sessions if not s.empty()]
        if sessions:
            per_rank.append((rank, sessions))
    if skipped:
        log.warning("nblog: not imported (nb has no such kind): %s",
                    ", ".join(f"{k} x{v}" for k, v in sorted(skipped.items())))
    every = [s for _r, sessions in per_rank for s in sessions]
    result = {"run_dir": run_dir, "run_id": rid, "ranks": len(per_rank), "sessions": len(every),
              "skipped": skipped, **{k: sum(s.count(kind) for s in every) for k, kind in
                                     (("scalars", "scalar"), ("timers", "timer"), ("texts", "text"),
                                      ("media", "media"))}}
    if not every:  # nothing new, or nothing nb has a kind for: no run is made
        return result
    os.makedirs(run_dir, exist_ok=True)
    data = old or _new_run_json(project, source.name, rid, path, source.export)
    if not nb:
        walls = [w for s in every for w in _walls(s)]
        if not data.get("sessions") and walls:
            data["created"] = min(walls)
        if socket.gethostname() not in data.setdefault("hosts", []):
            data["hosts"].append(socket.gethostname())
    world = int(data.get("world_size") or 1)
    later = max((s.get("session", -1) for s in data.get("sessions", [])), default=-1) + 1
    entries: dict[int, dict] = {}
    for rank, sessions in per_rank:
        numbers = _numbers(sessions, run_dir, rank, later)
        for number, sess in zip(numbers, sessions, strict=True):
            entry = _write_session(run_dir, project, rid, rank, world, number, sess)
            entries.setdefault(number, entry)  # run.json lists the lowest rank's sessions (rank 0 logs)
    known = {s.get("session") for s in data.get("sessions", [])}
    data["sessions"] = sorted([*data.get("sessions", []), *(e for n, e in entries.items() if n not in known)],
                              key=lambda e: e.get("session", -1))
    result["sessions"] = len(entries)
    data["import"] = {"source": "tensorboard", "path": path, "records": counts, "imported": time.time()}
    if source.export is not None:
        data["import"]["nb_export"] = {"project": source.export.get("project"), "id": source.export.get("id")}
    RunFile(run_dir, data).save()
    return result


def _run_id(source: ImportSource, project: str, root: str, path: str) -> str:
    """The run id of ``source``: nb's export keeps the original id unless a run of that id
    exists under ``root`` that is not an import of ``path``; otherwise one derived from
    the project, the name and ``path``."""
    derived = derive_run_id(project, source.name, "tensorboard:" + path)
    original = _valid((source.export or {}).get("id"))
    if original is None:
        return derived
    there = os.path.join(root, project, original)
    if not os.path.lexists(there):
        return original
    old = read_run_json(there) if os.path.isdir(there) else None
    return original if ((old or {}).get("import") or {}).get("path") == path else derived


def _new_run_json(project: str, name: str | None, rid: str, source: str, export: dict | None) -> dict:
    now = time.time()
    data = {
        "format_version": F.FORMAT_VERSION, "nblog_version": __version__, "project": project,
        "id": rid, "name": name, "config": {"tensorboard_logdir": source}, "created": now,
        "world_size": 1, "launcher": "tensorboard", "job_id": None, "job_id_source": None,
        "run_id_source": "tensorboard", "hosts": [], "status": "finished", "sessions": [],
    }
    if export is not None:  # nb's own export: the run as it was
        config = export.get("config")
        world = export.get("world_size")
        hosts = export.get("hosts")
        data.update(
            config=config if isinstance(config, dict) else {},
            world_size=world if type(world) is int and world >= 1 else 1,
            created=export["created"] if isinstance(export.get("created"), (int, float)) else now,
            launcher=export.get("launcher") if isinstance(export.get("launcher"), str) else "tensorboard",
            job_id=export.get("job_id") if isinstance(export.get("job_id"), str) else None,
            job_id_source=export.get("job_id_source") if isinstance(export.get("job_id_source"), str) else None,
            hosts=[h for h in hosts if isinstance(h, str)] if isinstance(hosts, list) else [],
            status="failed" if export.get("status") == "failed" else "finished",
        )
    return data


def _numbers(sessions: list[_Session], run_dir: str, rank: int, later: int) -> list[int]:
    """Session numbers for one rank's sessions: nb's export keeps the original ones
    (ascending, distinct) where the rank has no such event logs yet; otherwise they
    follow what the run holds."""
    given = [n for n in (s.info.get("session") if s.info else None for s in sessions) if type(n) is int and n >= 0]
    if (len(given) == len(sessions) and given == sorted(set(given))
            and not any(os.path.lexists(os.path.join(run_dir, event_file_name(rank, n))) for n in given)):
        return given
    first = next_session(run_dir, rank, at_least=later)
    return list(range(first, first + len(sessions)))


def _keep_visible(sessions: list[_Session], folder: str, rank: int) -> list[_Session]:
    """``sessions`` as they are when the imported first steps hide none of their records
    (the export holds only points nb showed); else merged into one session, with a
    warning (steps that went back within a session, so that its first record in the
    export is not its first step)."""
    best: int | None = None
    for sess in reversed(sessions):
        if best is not None and any(r[2] >= best for r in sess.records):
            log.warning("nblog: %s: rank %d's sessions are imported as one (their first steps would hide "
                        "points the export shows)", folder, rank)
            merged = _Session(info=sessions[0].info)
            for s in sessions:
                merged.records.extend(s.records)
            return [merged]
        if sess.records:
            first = sess.records[0][2]
            best = first if best is None else min(best, first)
    return sessions


# -- reading (TensorBoard's loader) ----------------------------------------------------------


def _read(folder: str, done: dict[str, int], counts: dict[str, int], skipped: dict[str, int], prefix: str,
          nb: bool) -> list[_Session]:
    """Sessions of the records of ``folder``'s event files not in ``done`` (records per file,
    keyed ``prefix + file name``, imported before); ``counts`` gets the new counts and
    ``skipped`` the summaries not imported, by kind. ``nb``: the files are nb's export."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2

    names = sorted(n for n in os.listdir(folder) if "tfevents" in n and os.path.isfile(os.path.join(folder, n)))
    sessions = [_Session()]
    plugins: dict[str, tuple[str, str]] = {}  # tag -> (plugin name, description): TF2 and nb's export
    # write the metadata with a tag's first value only
    for fname in names:
        path = os.path.join(folder, fname)
        size = os.path.getsize(path)
        consumed = n = 0
        skip = done.get(prefix + fname, 0)
        try:
            for record in RawEventFileLoader(path).Load():
                consumed += len(record) + _RECORD_OVERHEAD
                n += 1
                try:
                    event = event_pb2.Event.FromString(record)
                except Exception:
                    consumed = -1
                    break
                if n <= skip:  # imported before; its tags' plugins still tell later records' kinds
                    for value in event.summary.value:
                        _remember(value, plugins)
                    continue
                _take(event, sessions, plugins, skipped, nb)
        except Exception as err:  # an unreadable file: what came before stays
            log.warning("nblog: %s: cannot read on after record %d (%s); imported up to there", path, n, err)
            consumed = size
        if 0 <= consumed < size or consumed < 0:
            log.warning("nblog: %s is truncated or corrupt after %d records (byte %d of %d); imported up to there",
                        path, n, max(consumed, 0), size)
        counts[prefix + fname] = max(n, skip)
    return sessions


def _remember(value: Any, plugins: dict[str, tuple[str, str]]) -> None:
    """Keep the plugin name and description of ``value``'s tag when it carries metadata."""
    if value.metadata.plugin_data.plugin_name:
        plugins[value.tag] = (value.metadata.plugin_data.plugin_name, value.metadata.summary_description)


def _take(event: Any, sessions: list[_Session], plugins: dict[str, tuple[str, str]], skipped: dict[str, int],
          nb: bool) -> None:
    """Add one event's summaries to the current session; a restart marker (or nb's
    session mark, in nb's export) opens a new one."""
    if event.HasField("session_log"):
        if event.session_log.status == event.session_log.START and not sessions[-1].empty():
            sessions.append(_Session())
        return
    if not event.HasField("summary"):
        return
    sess = sessions[-1]
    wall, step = float(event.wall_time), int(event.step)
    for value in event.summary.value:
        _remember(value, plugins)
        plugin, description = plugins.get(value.tag, ("", ""))
        kind = value.WhichOneof("value")
        try:
            if nb and plugin == EXPORT_PLUGIN:
                if value.tag == EXPORT_SESSION_TAG:
                    info = _mark_json(value) or {}
                    if sess.empty() and sess.info is None:
                        sess.info = info
                    else:
                        sessions.append(_Session(info=info))
                        sess = sessions[-1]
            elif kind == "simple_value":
                sess.records.append(("scalar", wall, step, value.tag, float(value.simple_value)))
            elif kind == "histo":
                sess.records.append(("media", wall, step, value.tag, *_histogram_of_proto(value.histo)))
            elif kind == "image":
                sess.records.append(("media", wall, step, value.tag, *_image(value.image.encoded_image_string)))
            elif kind == "tensor":
                timer = nb and description == TIMER_DESCRIPTION
                _take_tensor(sess, wall, step, value, plugin, skipped, timer)
            else:
                skipped[kind or "empty"] = skipped.get(kind or "empty", 0) + 1
        except Exception:  # one bad summary: counted, the others still go in
            skipped["unreadable " + (kind or "value")] = skipped.get("unreadable " + (kind or "value"), 0) + 1


def _take_tensor(sess: _Session, wall: float, step: int, value: Any, plugin: str, skipped: dict[str, int],
                 timer: bool) -> None:
    from tensorboard.util import tensor_util

    one = _one_number(value.tensor) if plugin == "scalars" else None
    if one is not None:  # the common case read straight from the proto (make_ndarray: 20 us a value)
        sess.records.append(("timer" if timer else "scalar", wall, step, value.tag, one))
        return
    arr = tensor_util.make_ndarray(value.tensor)
    if plugin == "scalars" and arr.size == 1:
        sess.records.append(("timer" if timer else "scalar", wall, step, value.tag, float(arr.reshape(-1)[0])))
    elif plugin == "text":
        items = arr.reshape(-1)
        text = "\n".join(x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x) for x in items)
        tag = value.tag[: -len("/text_summary")] if value.tag.endswith("/text_summary") else value.tag
        sess.records.append(("text", wall, step, tag, text))
    elif plugin == "images" and arr.size >= 3:
        sess.records.append(("media", wall, step, value.tag, *_image(bytes(arr.reshape(-1)[2]))))
    elif plugin == "histograms" and arr.ndim == 2 and arr.shape[1] == 3:
        sess.records.append(("media", wall, step, value.tag, *_histogram_of_buckets(arr)))
    else:
        skipped[plugin or "tensor"] = skipped.get(plugin or "tensor", 0) + 1


@functools.cache
def _float_dtypes() -> tuple[int, int]:
    from tensorboard.compat.proto import types_pb2

    return types_pb2.DT_DOUBLE, types_pb2.DT_FLOAT


def _one_number(tensor: Any) -> float | None:
    """The value of a float64 or float32 tensor of one element whose values are in
    ``double_val``/``float_val`` (not packed in ``tensor_content``), else None."""
    if tensor.tensor_content or any(d.size != 1 for d in tensor.tensor_shape.dim):
        return None
    double, single = _float_dtypes()
    if tensor.dtype == double and len(tensor.double_val) == 1:
        return float(tensor.double_val[0])
    if tensor.dtype == single and len(tensor.float_val) == 1:
        return float(tensor.float_val[0])
    return None


def _image(blob: bytes) -> tuple[int, bytes, dict]:
    from ..format._pack import BLOB_JPEG, BLOB_PNG
    from ..media._media_encode import png_size

    if blob[:8] == b"\x89PNG\r\n\x1a\n":
        width, height, channels = png_size(blob) or (None, None, None)
        return BLOB_PNG, blob, {"kind": "image", "format": "png", "width": width, "height": height,
                                "channels": channels}
    if blob[:2] == b"\xff\xd8":
        import io

        from PIL import Image

        with Image.open(io.BytesIO(blob)) as img:
            (width, height), channels = img.size, len(img.getbands())
        return BLOB_JPEG, blob, {"kind": "image", "format": "jpeg", "width": width, "height": height,
                                 "channels": channels}
    raise ValueError("an image that is neither PNG nor JPEG")


def _histogram_blob(edges: Sequence[float] | np.ndarray, counts: Sequence[float] | np.ndarray, stats: dict) -> tuple[int, bytes, dict]:
    import numpy as np

    from ..format._pack import BLOB_HISTOGRAM

    e = np.asarray(edges, dtype="<f8")
    c = np.rint(np.asarray(counts, dtype=np.float64)).astype("<i8")
    meta = {"kind": "histogram", "format": "histogram", "bins": int(len(c)),
            "nan": 0, "pos_inf": 0, "neg_inf": 0, **stats}
    return BLOB_HISTOGRAM, e.tobytes() + c.tobytes(), meta


def _histogram_of_proto(h: Any) -> tuple[int, bytes, dict]:
    """As TensorBoard's data_compat reads a HistogramProto: empty buckets at both ends
    dropped, the outer edges replaced by min and max; statistics kept."""
    counts = list(h.bucket)
    nz = [i for i, c in enumerate(counts) if c > 0]
    stats = {"num": int(round(h.num)), "min": float(h.min), "max": float(h.max), "sum": float(h.sum),
             "sum_squares": float(h.sum_squares)}
    if not nz:
        return _histogram_blob([h.min, h.max], [0], stats)
    lo, hi = nz[0], nz[-1]
    inner = list(h.bucket_limit[lo:hi])
    return _histogram_blob([h.min, *inner, h.max], counts[lo : hi + 1], stats)


def _histogram_of_buckets(arr: np.ndarray) -> tuple[int, bytes, dict]:
    """A histograms-plugin tensor of (left, right, count) rows."""
    if not len(arr):
        return _histogram_blob([0.0, 0.0], [0], {"num": 0, "min": None, "max": None, "sum": 0.0,
                                                 "sum_squares": 0.0})
    edges = [float(arr[0, 0]), *(float(r) for r in arr[:, 1])]
    num = float(arr[:, 2].sum())
    return _histogram_blob(edges, arr[:, 2], {"num": int(round(num)), "min": edges[0], "max": edges[-1],
                                              "sum": None, "sum_squares": None})


# -- writing (nb's writer, original wall times) ------------------------------------------------


def _walls(sess: _Session) -> list[float]:
    return [r[1] for r in sess.records]


def _write_session(run_dir: str, project: str, rid: str, rank: int, world: int, session: int,
                   sess: _Session) -> dict:
    """Write one session's event log of ``rank`` (and media pack); return its run.json
    entry. The session's first record goes to the file first, so that the first step
    readers find (the first record of the log) is the one read first."""
    from ..format._pack import PackWriter
    from ..write._writer import Writer

    info = sess.info or {}
    walls = _walls(sess)
    start = info.get("wall_start")
    wall0 = float(start) if isinstance(start, (int, float)) else min(walls, default=time.time())
    wall1 = max(walls, default=wall0)
    host = info.get("host") if isinstance(info.get("host"), str) else socket.gethostname()
    pid = info.get("pid") if type(info.get("pid")) is int else os.getpid()
    local = info.get("local_rank")
    header: dict[str, Any] = {
        "format_version": F.FORMAT_VERSION, "nblog_version": __version__, "project": project,
        "run_id": rid, "rank": rank, "local_rank": local if type(local) is int else rank, "world_size": world,
        "session": session, "host": host, "pid": pid, "wall_start": wall0,
        "monotonic_start_ns": time.monotonic_ns(), "launcher": "tensorboard", "job_id": None,
        "job_id_source": None, "restart_counts": {}, "imported_from": "tensorboard",
    }
    writer = Writer(os.path.join(run_dir, event_file_name(rank, session)), header, flush_interval=3600.0,
                    heartbeat_interval=1e9)
    tids: dict[tuple[int, str], int] = {}

    def tid_of(kind: int, tag: str) -> int:
        key = (kind, tag)
        if key not in tids:
            tids[key] = len(tids)
            writer.tag_defs.append((tids[key], kind, tag))
        return tids[key]

    def ms_of(wall: float) -> int:
        return max(0, round((wall - wall0) * 1000.0)) & 0xFFFFFFFF

    steps = []
    batch = None
    try:
        for i, rec in enumerate(sess.records):
            kind, wall, step, tag = rec[:4]
            tid = tid_of(_KIND_CODE[kind], tag)
            if kind in ("scalar", "timer"):
                writer.points += F.POINT.pack(step, rec[4], tid, ms_of(wall))
            elif kind == "text":
                writer.texts.append((step, tid, ms_of(wall), rec[4]))
            else:
                if batch is None:
                    batch = PackWriter(os.path.join(run_dir, pack_file_name(rank)),
                                       os.path.join(run_dir, session_pack_file_name(rank, session))).open()
                blob_kind, payload, meta = rec[4:]
                writer.media.append((step, tid, ms_of(wall), batch.append(blob_kind, payload), len(payload), meta))
            steps.append(step)
            if i == 0:
                writer.flush()
    finally:
        if batch is not None:
            batch.close()
        writer.flush()
        writer.close({"status": "finished", "reason": "imported"})
    return {"session": session, "start": wall0, "host": host, "pid": pid,
            "first_step": steps[0] if steps else None, "last_step": max(steps) if steps else None,
            "end": wall1, "end_reason": None, "status": "finished", "world_size": world, "restart_counts": {},
            "launch": {}, "step_start": 0, "duration_s": round(wall1 - wall0, 3)}


__all__ = ["AlreadyImported", "ImportSource", "event_folders", "export_mark", "import_folder", "import_source",
           "import_sources", "run_name_for"]
