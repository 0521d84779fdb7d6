# The lines of `pip install` that `make synth` and `make test` show: each package pip collects, with the size of
# its download (pip draws no progress bar into a pipe, so a large wheel is silent while it downloads), then, where
# pip unpacks them without a word for a minute or more, how many it is unpacking, then pip's summary.
# VENV is the folder being installed into (awk -v VENV=.venv).
/^(Collecting|Successfully)/ || /^  Downloading / { print; fflush() }
/^Installing collected packages: / {
  n = split(substr($0, 32), names, ", ")
  print ">>> unpacking " n " packages into " VENV "; pip prints nothing more until it is done (about a second each)"
  fflush()
}
