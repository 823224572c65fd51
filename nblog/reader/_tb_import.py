"""Importing TensorBoard event files as nb runs (``nb import tensorboard``).

Reading is TensorBoard's own: records come from
``tensorboard.backend.event_processing.event_file_loader.RawEventFileLoader`` and are
parsed as ``event_pb2.Event``; nothing here parses the record framing. Writing is nb's
own writer (:class:`nblog.write._writer.Writer`) fed records whose milliseconds are computed
from each event's original wall time, so wall times read back within 1 ms.

Layout: every folder under LOGDIR holding ``*tfevents*`` files becomes one run of rank 0
(run name: the folder's path relative to LOGDIR, ``/`` written ``.``; the path itself is
kept in the config as ``tensorboard_logdir``). Its files are read in name order, as
TensorBoard loads them. A ``SessionLog.START`` event (what ``SummaryWriter(purge_step=)``
writes after its ``file_version`` event) after the first data starts a new nb session,
so nb's hiding (a later session's first step hides earlier points from there on) shows
the curve TensorBoard shows after its purge. Another file without such a marker goes on
in the same session: TensorBoard purges nothing there either.

Kept: scalars (``simple_value`` and scalar tensors of the scalars plugin), text (the text
plugin; the ``/text_summary`` suffix torch adds is removed), images (PNG/JPEG as they
are; the first of a batch) and histograms (edges and counts; statistics from the proto
where it has them). Other summaries (audio, graphs, hparams, custom plugins) are counted
and named in one warning.

Damage: the loader stops at a truncated or corrupt record; the bytes consumed are
compared with the file's size, and a file that was not read to its end gets one warning
naming it and the offset. What came before is imported.

Re-import: the run id is derived from the project and the folder's absolute path, so
importing again finds the run and refuses (:class:`AlreadyImported`), unless ``update``:
then the records after those imported before (counted per file in ``run.json``'s
``import`` key) go into new sessions.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import __version__
from .. import _log as log
from ..format import _format as F
from ..format._runfile import RunFile, event_file_name, next_session, read_run_json
from ..write._runid import derive_run_id

if TYPE_CHECKING:
    import numpy as np

_RECORD_OVERHEAD = 16  # u64 length, u32 length crc, u32 data crc around each record


class AlreadyImported(FileExistsError):
    """The folder was imported before (``run_dir``); pass ``update`` to add new points."""

    def __init__(self, source: str, run_dir: str):
        super().__init__(f"{source} was imported before as {run_dir}; pass --update to add new points")
        self.source = source
        self.run_dir = run_dir


@dataclass
class _Session:
    """The records of one nb session, in the order read."""

    scalars: list = field(default_factory=list)  # (wall, step, tag, value)
    texts: list = field(default_factory=list)  # (wall, step, tag, text)
    media: list = field(default_factory=list)  # (wall, step, tag, blob kind, payload, meta)

    def empty(self) -> bool:
        return not (self.scalars or self.texts or self.media)


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


def import_folder(folder: str, name: str, project: str, root: str, *, update: bool = False) -> dict:
    """Import the event files of one folder as one nb run (see the module docstring).

    Args:
        folder: a folder holding ``*tfevents*`` files.
        name: the run name (one path component).
        project: the nb project.
        root: the nb root folder (created if missing).
        update: add the records not imported before as new sessions, instead of
            refusing a folder imported before.

    Returns:
        ``{"run_dir", "run_id", "sessions", "scalars", "texts", "media", "skipped"}``:
        sessions written now, records of each kind, and summaries not imported by kind.

    Raises:
        AlreadyImported: the folder was imported before and ``update`` is False.
        ImportError: the ``tensorboard`` package is missing.
        OSError: the root cannot be written.
    """
    source = os.path.abspath(folder)
    rid = derive_run_id(project, name, "tensorboard:" + source)
    run_dir = os.path.join(root, project, rid)
    old = read_run_json(run_dir) if os.path.isdir(run_dir) else None
    if old is not None and not update:
        raise AlreadyImported(source, run_dir)
    done: dict[str, int] = dict(((old or {}).get("import") or {}).get("records") or {})
    sessions, counts, skipped = _read(source, done)
    sessions = [s for s in sessions if not s.empty()]
    result = {"run_dir": run_dir, "run_id": rid, "sessions": len(sessions), "skipped": skipped,
              "scalars": sum(len(s.scalars) for s in sessions), "texts": sum(len(s.texts) for s in sessions),
              "media": sum(len(s.media) for s in sessions)}
    if not sessions:  # nothing new, or nothing nb has a kind for: no run is made
        return result
    os.makedirs(run_dir, exist_ok=True)
    data = old or _new_run_json(project, name, rid, source)
    if not data.get("sessions"):
        data["created"] = min(min(_walls(s)) for s in sessions)
    if socket.gethostname() not in data.setdefault("hosts", []):
        data["hosts"].append(socket.gethostname())
    first = next_session(run_dir, 0, at_least=max((s.get("session", -1) for s in data.get("sessions", [])),
                                                  default=-1) + 1)
    for i, sess in enumerate(sessions):
        data["sessions"].append(_write_session(run_dir, project, rid, first + i, sess))
    data["import"] = {"source": "tensorboard", "path": source, "records": counts, "imported": time.time()}
    data["status"] = "finished"
    RunFile(run_dir, data).save()
    return result


def _new_run_json(project: str, name: str, rid: str, source: str) -> dict:
    now = time.time()
    return {
        "format_version": F.FORMAT_VERSION, "nblog_version": __version__, "project": project,
        "id": rid, "name": name, "config": {"tensorboard_logdir": source}, "created": now,
        "world_size": 1, "launcher": "tensorboard", "job_id": None, "job_id_source": None,
        "run_id_source": "tensorboard", "hosts": [], "status": "finished", "sessions": [],
    }


# -- reading (TensorBoard's loader) ----------------------------------------------------------


def _read(source: str, done: dict[str, int]) -> tuple[list[_Session], dict[str, int], dict[str, int]]:
    """Sessions of the records not in ``done`` (records per file imported before);
    returns them, the new records-per-file counts and the skipped summaries by kind."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2

    names = sorted(n for n in os.listdir(source) if "tfevents" in n and os.path.isfile(os.path.join(source, n)))
    sessions = [_Session()]
    counts = dict(done)
    skipped: dict[str, int] = {}
    plugins: dict[str, str] = {}  # tag -> plugin name (TF2 writes the metadata only once)
    for fname in names:
        path = os.path.join(source, fname)
        size = os.path.getsize(path)
        consumed = n = 0
        skip = done.get(fname, 0)
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
                        if value.metadata.plugin_data.plugin_name:
                            plugins[value.tag] = value.metadata.plugin_data.plugin_name
                    continue
                _take(event, sessions, plugins, skipped)
        except Exception as err:  # an unreadable file: what came before stays
            log.warning("nblog: %s: cannot read on after record %d (%s); imported up to there", path, n, err)
            consumed = size
        if 0 <= consumed < size or consumed < 0:
            log.warning("nblog: %s is truncated or corrupt after %d records (byte %d of %d); imported up to there",
                        path, n, max(consumed, 0), size)
        counts[fname] = max(n, skip)
    if skipped:
        log.warning("nblog: not imported (nb has no such kind): %s",
                    ", ".join(f"{k} x{v}" for k, v in sorted(skipped.items())))
    return sessions, counts, skipped


def _take(event: Any, sessions: list[_Session], plugins: dict[str, str], skipped: dict[str, int]) -> None:
    """Add one event's summaries to the current session; a restart marker opens a new one."""
    if event.HasField("session_log"):
        if event.session_log.status == event.session_log.START and not sessions[-1].empty():
            sessions.append(_Session())
        return
    if not event.HasField("summary"):
        return
    sess = sessions[-1]
    wall, step = float(event.wall_time), int(event.step)
    for value in event.summary.value:
        if value.metadata.plugin_data.plugin_name:
            plugins[value.tag] = value.metadata.plugin_data.plugin_name
        kind = value.WhichOneof("value")
        try:
            if kind == "simple_value":
                sess.scalars.append((wall, step, value.tag, float(value.simple_value)))
            elif kind == "histo":
                sess.media.append((wall, step, value.tag, *_histogram_of_proto(value.histo)))
            elif kind == "image":
                sess.media.append((wall, step, value.tag, *_image(value.image.encoded_image_string)))
            elif kind == "tensor":
                _take_tensor(sess, wall, step, value, plugins.get(value.tag, ""), skipped)
            else:
                skipped[kind or "empty"] = skipped.get(kind or "empty", 0) + 1
        except Exception:  # one bad summary: counted, the others still go in
            skipped["unreadable " + (kind or "value")] = skipped.get("unreadable " + (kind or "value"), 0) + 1


def _take_tensor(sess: _Session, wall: float, step: int, value: Any, plugin: str, skipped: dict[str, int]) -> None:
    from tensorboard.util import tensor_util

    arr = tensor_util.make_ndarray(value.tensor)
    if plugin == "scalars" and arr.size == 1:
        sess.scalars.append((wall, step, value.tag, float(arr.reshape(-1)[0])))
    elif plugin == "text":
        items = arr.reshape(-1)
        text = "\n".join(x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x) for x in items)
        tag = value.tag[: -len("/text_summary")] if value.tag.endswith("/text_summary") else value.tag
        sess.texts.append((wall, step, tag, text))
    elif plugin == "images" and arr.size >= 3:
        sess.media.append((wall, step, value.tag, *_image(bytes(arr.reshape(-1)[2]))))
    elif plugin == "histograms" and arr.ndim == 2 and arr.shape[1] == 3:
        sess.media.append((wall, step, value.tag, *_histogram_of_buckets(arr)))
    else:
        skipped[plugin or "tensor"] = skipped.get(plugin or "tensor", 0) + 1


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
    return [r[0] for r in sess.scalars] + [r[0] for r in sess.texts] + [r[0] for r in sess.media]


def _write_session(run_dir: str, project: str, rid: str, session: int, sess: _Session) -> dict:
    """Write one session's event log (and media pack); return its run.json entry."""
    from ..format._pack import PackWriter, pack_file_name, session_pack_file_name
    from ..write._writer import Writer

    walls = _walls(sess)
    wall0, wall1 = min(walls), max(walls)
    host = socket.gethostname()
    header = {
        "format_version": F.FORMAT_VERSION, "nblog_version": __version__, "project": project,
        "run_id": rid, "rank": 0, "local_rank": 0, "world_size": 1, "session": session, "host": host,
        "pid": os.getpid(), "wall_start": wall0, "monotonic_start_ns": time.monotonic_ns(),
        "launcher": "tensorboard", "job_id": None, "job_id_source": None, "restart_counts": {},
        "imported_from": "tensorboard",
    }
    writer = Writer(os.path.join(run_dir, event_file_name(0, session)), header, flush_interval=3600.0,
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
    try:
        for wall, step, tag, value in sess.scalars:
            writer.points += F.POINT.pack(step, value, tid_of(F.KIND_SCALAR, tag), ms_of(wall))
            steps.append(step)
        for wall, step, tag, text in sess.texts:
            writer.texts.append((step, tid_of(F.KIND_TEXT, tag), ms_of(wall), text))
            steps.append(step)
        writer.flush()
        if sess.media:
            pack = PackWriter(os.path.join(run_dir, pack_file_name(0)),
                              os.path.join(run_dir, session_pack_file_name(0, session)))
            batch = pack.open()
            try:
                for wall, step, tag, blob_kind, payload, meta in sess.media:
                    offset = batch.append(blob_kind, payload)
                    writer.media.append((step, tid_of(F.KIND_MEDIA, tag), ms_of(wall), offset, len(payload), meta))
                    steps.append(step)
            finally:
                batch.close()
            writer.flush()
    finally:
        writer.close({"status": "finished", "reason": "imported"})
    return {"session": session, "start": wall0, "host": host, "pid": os.getpid(),
            "first_step": steps[0] if steps else None, "last_step": max(steps) if steps else None,
            "end": wall1, "end_reason": None, "status": "finished", "world_size": 1, "restart_counts": {},
            "launch": {}, "step_start": 0, "duration_s": round(wall1 - wall0, 3)}


__all__ = ["AlreadyImported", "event_folders", "import_folder", "run_name_for"]
