#!/usr/bin/env python
"""Coverage-guided fuzzing of nb's readers with atheris (libFuzzer for Python).

    pip install atheris
    python scripts/fuzz_reader.py --seconds 600            # every reader, 10 minutes
    python scripts/fuzz_reader.py --target logfile --seconds 60

Each input is split in two: an event log (``events.r0.s0.log``) and a media pack
(``media.r0.pack``) of one run folder, read with what users call: ``RunReader``
(sessions, scalars, timers, text, media, every blob, histograms, tags, system),
``nb show``'s overview, ``nb tail``'s Follower and the TUI's LiveRun (``--target
reader``, the default), or only the incremental event-log parser and the bulk
decoder (``--target logfile``, much faster). The corpus starts from real runs written
by nblog (scalars, timers, text, images, histograms, audio, two sessions' worth of
frames), so mutations start from valid frames with valid checksums.

A finding is any exception other than the documented ones (FormatVersionError for a
newer version; BlobError for a blob that fails its checks; ValueError from a
histogram blob that is not one), a hang (``-timeout``, 10 s) or memory past
``-rss_limit_mb`` (1024 MB: a header or tag id made a reader allocate what it
declares). libFuzzer runs in a child process and prints its statistics at the end;
this script adds one line, ``fuzz_reader: N executions in S s (E/s), T target, no
finding``, and exits 1 on a finding (libFuzzer leaves the input as ``crash-*``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import atheris  # noqa: E402

with atheris.instrument_imports(include=["nblog"]):
    import nblog as nb
    from nblog._errors import FormatVersionError
    from nblog.format import _format as F
    from nblog.format._pack import BlobError
    from nblog.reader._answers.overview import overview
    from nblog.reader._file.logfile import LogFile
    from nblog.reader._views.live import LiveRun
    from nblog.reader._views.tail import Follower

SPLIT = struct.Struct("<I")  # input: u32 length of the event log, the log, then the pack
STATE = {"target": "reader", "dir": ""}


def seed_corpus(corpus: str) -> None:
    """Real runs written by nblog, as inputs."""
    import numpy as np

    tmp = tempfile.mkdtemp(prefix="nbfuzzseed")
    try:
        for k, steps in enumerate((3, 40)):
            run = nb.init("seed", run_id=f"seed-{k:08x}", root=tmp, system=False, flush_interval=60, _environ={})
            for step in range(steps):
                run.add_scalar({"loss": 1.0 / (step + 1), "lr": 0.1}, step=step)
                with run.timer("step"):
                    pass
                if step % 10 == 0:
                    run.add_text("notes", f"step {step} ✓", step=step)
                    run.add_image("img", np.full((2, 3, 3), step, np.uint8), step=step)
                    run.add_histogram("h", np.arange(step + 5, dtype=float), step=step, bins=3)
                    run.add_audio("snd", np.zeros(16), step=step, sample_rate=8000)
                if step % 7 == 6:
                    run.flush()
            run._log_system({"system/cpu_percent": 12.5})
            run.finish()
            d = run.dir
            log = open(os.path.join(d, "events.r0.s0.log"), "rb").read()
            pack = open(os.path.join(d, "media.r0.pack"), "rb").read()
            with open(os.path.join(corpus, f"seed{k}"), "wb") as f:
                f.write(SPLIT.pack(len(log)) + log + pack)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def split(data: bytes) -> tuple[bytes, bytes]:
    if len(data) < 4:
        return data, b""
    n = SPLIT.unpack_from(data)[0]
    return data[4 : 4 + n], data[4 + n :]


def read_logfile(path: str) -> None:
    lf = LogFile(path)
    lf.poll()
    lf.points()
    lf.poll()  # nothing new: must be a no-op


def read_everything(run_dir: str) -> None:
    r = nb.RunReader(run_dir)
    r.sessions(0)
    r.scalars(include_hidden=True)
    r.timers(include_hidden=True)
    r.text(include_hidden=True)
    md = r.media(include_hidden=True)
    for row in md.iter_rows(named=True):
        try:
            r.media_bytes(row)
        except BlobError:
            pass
    try:
        r.histograms(include_hidden=True)
    except (BlobError, ValueError):
        pass
    r.tags(kind=None)
    r.timer_stats()
    r.system()
    overview(r)
    Follower(run_dir).poll(last=1000)
    live = LiveRun(run_dir)
    for rank in live.ranks():
        for kind in ("scalar", "timer", "system"):
            live.series(rank, live.tags(rank, kind), kind)
        live.text(rank)
        live.sessions(rank)
    live.machines()


def test_one_input(data: bytes) -> None:
    log, pack = split(data)
    d = STATE["dir"]
    with open(os.path.join(d, "events.r0.s0.log"), "wb") as f:
        f.write(log)
    with open(os.path.join(d, "media.r0.pack"), "wb") as f:
        f.write(pack)
    try:
        if STATE["target"] == "logfile":
            read_logfile(os.path.join(d, "events.r0.s0.log"))
        else:
            read_everything(d)
    except FormatVersionError:
        if len(log) < 6 or struct.unpack_from("<H", log, 4)[0] <= F.FORMAT_VERSION:
            raise


def fuzz(args: argparse.Namespace, work: str) -> None:
    """In the child process: libFuzzer takes over and exits the process at the end."""
    import logging

    logging.getLogger("nblog").setLevel(logging.ERROR)  # hostile files warn at every input
    STATE["target"] = args.target
    STATE["dir"] = os.path.join(work, "fz", "fz-00000000")
    os.makedirs(STATE["dir"], exist_ok=True)
    with open(os.path.join(STATE["dir"], "run.json"), "w") as f:
        f.write('{"id": "fz-00000000", "project": "fz", "sessions": []}')
    corpus = args.corpus or os.path.join(work, "corpus")
    os.makedirs(corpus, exist_ok=True)
    if not os.listdir(corpus):
        seed_corpus(corpus)
    flags = [f"-max_total_time={args.seconds}", "-rss_limit_mb=1024", "-timeout=10", "-print_final_stats=1",
             "-max_len=65536", *args.libfuzzer]
    atheris.Setup([sys.argv[0], *flags, corpus], test_one_input)
    atheris.Fuzz()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=60, help="fuzz for this long (libFuzzer -max_total_time)")
    ap.add_argument("--target", choices=("reader", "logfile"), default="reader")
    ap.add_argument("--corpus", help="corpus folder (default: a temporary one, seeded with real runs)")
    ap.add_argument("--work", help=argparse.SUPPRESS)  # set for the child process
    ap.add_argument("libfuzzer", nargs="*", help="more libFuzzer flags, after --")
    args = ap.parse_args()
    if args.work:
        fuzz(args, args.work)
        return 0
    # The parent: run libFuzzer in a child (it exits the process itself), pass its output
    # through, then clean up and summarise.
    import re
    import subprocess

    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    work = tempfile.mkdtemp(prefix="nbfuzz", dir=base)
    t0 = time.monotonic()
    runs = None
    try:
        cmd = [sys.executable, os.path.abspath(__file__), "--work", work, *sys.argv[1:]]
        with subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, errors="replace") as p:
            for line in p.stderr:
                sys.stderr.write(line)
                m = re.match(r"Done (\d+) runs in (\d+) second", line)
                if m:
                    runs = (int(m.group(1)), int(m.group(2)))
        rc = p.returncode
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.monotonic() - t0
    if runs is not None:
        print(f"fuzz_reader: {runs[0]} executions in {runs[1]} s ({runs[0] / max(runs[1], 1):.0f}/s), "
              f"{args.target} target, no finding", flush=True)
    else:
        print(f"fuzz_reader: stopped after {elapsed:.0f} s with status {rc}: see the finding above", flush=True)
    return 0 if rc == 0 and runs is not None else 1


if __name__ == "__main__":
    sys.exit(main())
