"""Reading runs: finding runs and their rank files, decoding event logs, live following,
media, console logs, summaries, export, diff and import. Private for now.
"""
