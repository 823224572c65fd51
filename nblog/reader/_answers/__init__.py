"""Answers the CLI formats: what nb show and nb timers report, and how counts read.

Private: the public names are nblog.reader's and nblog.reader.lowlevel's."""
