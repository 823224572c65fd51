"""One run's files: where its folder is (locate), each rank's event logs by session, and the sidecars beside them (envelopes, console, media, failure marks, provenance, progress).

Private: the public names are nblog.reader's and nblog.reader.lowlevel's."""
