"""Media: images, histograms, audio and text as the caller hands them, checked and encoded
for the media pack.
"""
