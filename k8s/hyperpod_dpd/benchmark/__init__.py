"""In-cluster benchmarks of a deployed endpoint with genai-bench or aiperf, and how to read them.

:mod:`session` (the ``bench`` workflow), :mod:`scenario` (the traffic), :mod:`target` (the router and
tokenizer), :mod:`job` (the cdk8s-plus Job), :mod:`cluster` (run, wait, collect, clean up), :mod:`levels`
(what one level measured), :mod:`results` and :mod:`aiperf_results` (the clients' files), :mod:`trust`
(when not to believe them), :mod:`report`, :mod:`ab` (against the aggregated twin) and :mod:`prediction`
(against the advisor). Importing this package loads no Kubernetes client.
"""

from hyperpod_dpd.benchmark.proof.trust import Trust, TrustWarning, trust_warnings
from hyperpod_dpd.benchmark.run.levels import LevelResult, Percentiles, ResultsError
from hyperpod_dpd.benchmark.run.results import BenchmarkResults
from hyperpod_dpd.benchmark.run.scenario import Scenario
from hyperpod_dpd.benchmark.run.target import BenchmarkTarget, S3Location

__all__ = ["BenchmarkResults", "BenchmarkTarget", "LevelResult", "Percentiles", "ResultsError", "S3Location",
           "Scenario", "Trust", "TrustWarning", "trust_warnings"]
