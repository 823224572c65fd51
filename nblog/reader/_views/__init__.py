"""Views of one run: frames, live series, following a rank, watching, stragglers.

Private: the public names are nblog.reader's and nblog.reader.lowlevel's."""
