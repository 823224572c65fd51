"""Many runs: finding and listing them, querying, the listing cache, export and diff.

Private: the public names are nblog.reader's and nblog.reader.lowlevel's."""
