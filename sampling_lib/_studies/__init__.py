"""The notebook studies, by topic; the public names are re-exported by :mod:`sampling_lib.studies`."""
