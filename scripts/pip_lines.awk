# The lines of `pip install` that `make synth` and `make test` show: one per package downloaded, then, where pip
# unpacks them without a word for a minute or more, how many it is unpacking, then pip's summary.
# VENV is the folder being installed into (awk -v VENV=.venv).
/^(Collecting|Successfully)/ { print; fflush() }
/^Installing collected packages: / {
  n = split(substr($0, 32), names, ", ")
  print ">>> unpacking " n " packages into " VENV "; pip prints nothing more until it is done (about a second each)"
  fflush()
}
