"""Answers the CLI formats: what nb show and nb timers report.

Private: the public names are nblog.reader's and nblog.reader.lowlevel's."""
