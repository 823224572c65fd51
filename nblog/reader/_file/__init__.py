"""One event log: its frames read incrementally and decoded (standard library, numpy, Arrow).

Private: the public names are nblog.reader's and nblog.reader.lowlevel's."""
