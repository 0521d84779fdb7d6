"""In-cluster benchmarks of a deployed endpoint with genai-bench or aiperf, and how to read them.

:mod:`session` is the ``bench`` workflow and :mod:`request` what it is asked, as values; four rooms hold the
rest, each importing only the ones after it: :mod:`replay` (``bench --trace``, which builds on :mod:`session`),
:mod:`report` (the tables, the A/B, the advisor beside it, the HTML figures), :mod:`proof` (the servers'
counters, the client's overhead, when not to trust a level) and :mod:`run` (the traffic, the target, the Job,
the clients' files read back). Importing this package loads no Kubernetes client.
"""

from hyperpod_dpd.benchmark.proof.trust import Trust, TrustWarning, trust_warnings
from hyperpod_dpd.benchmark.run.levels import LevelResult, Percentiles, ResultsError
from hyperpod_dpd.benchmark.run.results import BenchmarkResults
from hyperpod_dpd.benchmark.run.scenario import Scenario
from hyperpod_dpd.benchmark.run.target import BenchmarkTarget, S3Location

__all__ = ["BenchmarkResults", "BenchmarkTarget", "LevelResult", "Percentiles", "ResultsError", "S3Location",
           "Scenario", "Trust", "TrustWarning", "trust_warnings"]
