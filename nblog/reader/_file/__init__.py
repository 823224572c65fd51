"""One event log: its frames read incrementally and decoded (standard library, numpy, Arrow).

Also the bottom of the reader, so every package above may use them: which tags a read
keeps (select: exact names, shell-style globs) and how a count reads in a message (words).

Private: the public names are nblog.reader's and nblog.reader.lowlevel's."""
