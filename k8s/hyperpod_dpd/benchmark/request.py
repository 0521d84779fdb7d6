"""What ``bench`` was asked for, as parsed values in a few groups: the traffic, the Job, the cluster, the report.

``cli/bench.py`` turns the options into a :class:`BenchRequest` (numbers, enums, tuples: no option text is parsed
below it) and :mod:`hyperpod_dpd.benchmark.session` runs it. A ``None`` field takes the default its option
documents, often one the deployed stack's outputs give: the stack is named by a
:class:`~hyperpod_dpd.contracts.stack_outputs.DeployedSource` value and read only when a Job is planned
(``--results-dir`` needs no stack).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hyperpod_dpd.benchmark.run.client import DEFAULT_CLIENT, Client
from hyperpod_dpd.benchmark.run.route import RoutePath
from hyperpod_dpd.benchmark.run.scenario import DEFAULT_CONCURRENCY, DEFAULT_MAX_SECONDS, DEFAULT_OSL, DEFAULT_POLL
from hyperpod_dpd.contracts.stack_outputs import DeployedSource
from hyperpod_dpd.spec import DpdSpec


@dataclass(frozen=True, kw_only=True)
class BenchTraffic:
    """The prompts each level sends and the loads it sends them at (``bench``'s traffic options), before the spec
    fills in ``isl`` and the session checks it into a ``Scenario`` (the advisor's ``Traffic`` is what it predicts for).

    :param isl: input tokens per request. :default: - the smallest multiple of 256 whose prompts clear the spec's
        routing threshold on ``path`` (4352 for 4096)
    :param osl: output tokens per request. :default: 256
    :param path: the route the prompts are meant to take. :default: RoutePath.DPD
    :param concurrency: closed-loop levels, one client run each. :default: (8, 16, 32)
    :param request_rates: open-loop Poisson arrivals per second, one aiperf run each, instead of ``concurrency``.
        :default: () - closed loop
    :param client: the client the pod runs. :default: Client.AIPERF
    :param requests: requests per level. :default: - 10 x the highest concurrency, or 120 s of arrivals at each
        rate; at least 155
    :param max_seconds: time bound per level, a multiple of 60. :default: 1800
    :param prefix_share: the fraction of each prompt that is one prefix shared by every prompt of a level.
        :default: 0 - none
    """

    isl: int | None = None
    osl: int = DEFAULT_OSL
    path: RoutePath = RoutePath.DPD
    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    request_rates: tuple[float, ...] = ()
    client: Client = DEFAULT_CLIENT
    requests: int | None = None
    max_seconds: int = DEFAULT_MAX_SECONDS
    prefix_share: float = 0.0


@dataclass(frozen=True, kw_only=True)
class JobRequest:
    """The benchmark Job's names and pod, as given (``bench``'s options of the same names); the stack's outputs fill
    in the service account, role and nodes not given, and ``JobOptions`` the rest.

    :param namespace: where the Job runs. :default: - the spec's namespace
    :param run_id: names the Job and the results folder. :default: - the UTC time, YYYYmmdd-HHMMSS
    :param image: runs the client. :default: - python 3.11 slim from ECR Public
    :param genai_bench_version: :default: - 0.0.5, hash-pinned
    :param aiperf_version: :default: - 0.13.0, hash-pinned
    :param pip_index_url: the package index the pod installs from. :default: - PyPI
    :param aws_cli_image: copies the tokenizer and the results. :default: - aws-cli 2.27.0 from ECR Public
    :param service_account: :default: - the stack's, else hyperpod-dpd-bench
    :param role_arn: IAM role annotated on a new ServiceAccount (IRSA). :default: - the stack's, else none
    :param tokenizer_s3: the tokenizer files' ``s3://`` URI, read in the deployed source's region.
        :default: - the model's S3 prefix
    :param results_s3: the ``s3://`` URI the result files are uploaded under. :default: - the tokenizer's bucket's
        ``benchmarks`` prefix
    :param upload: upload the result files to S3 (else they come back from the pod's log only). :default: True
    :param node_selector: the nodes the pod may use. :default: - the stack's system nodes, else any non-HyperPod node
    """

    namespace: str | None = None
    run_id: str | None = None
    image: str | None = None
    genai_bench_version: str | None = None
    aiperf_version: str | None = None
    pip_index_url: str | None = None
    aws_cli_image: str | None = None
    service_account: str | None = None
    role_arn: str | None = None
    tokenizer_s3: str | None = None
    results_s3: str | None = None
    upload: bool = True
    node_selector: Mapping[str, str] | None = None


@dataclass(frozen=True, kw_only=True)
class ClusterAccess:
    """How ``bench`` reaches the cluster and waits for its Jobs.

    :param kube_context: the kubeconfig context. :default: - the current one
    :param kubeconfig: the kubeconfig file. :default: - $KUBECONFIG or ~/.kube/config
    :param timeout: seconds to wait per Job. :default: - its deadline plus 5 minutes
    :param poll_interval: seconds between polls. :default: 15
    :param keep: leave the Job (and a replay's ConfigMap) for inspection. :default: False
    """

    kube_context: str | None = None
    kubeconfig: str | None = None
    timeout: float | None = None
    poll_interval: float = DEFAULT_POLL
    keep: bool = False


@dataclass(frozen=True, kw_only=True)
class Runs:
    """What to measure: the DPD endpoint, its aggregated twin too, or results folders instead of Jobs.

    :param aggregated: also benchmark the aggregated twin and report DPD's change. :default: False
    :param compare: the advisor's prediction beside the measurement. :default: False
    :param results_dirs: results folders to report instead of running anything: the first's levels, then each
        further folder a repeat of them. :default: () - run the Jobs
    :param aggregated_results_dirs: the twin's folders, one per ``results_dirs`` folder. :default: () - none
    """

    aggregated: bool = False
    compare: bool = False
    results_dirs: tuple[str, ...] = ()
    aggregated_results_dirs: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class BuyerOptions:
    """What a buyer reads beside the tables: the repeats behind the intervals, the prices, the report folder.

    :param repeat: runs of every level, DPD and the twin in turn. :default: 1
    :param price_per_node_hour: the rate of the A/B's cost columns, in USD. :default: - the price table's figure
    :param report_dir: also write the HTML report, its PNGs, its JSON and each live run's results there.
        :default: - none
    """

    repeat: int = 1
    price_per_node_hour: float | None = None
    report_dir: str | None = None


@dataclass(frozen=True, kw_only=True)
class BenchRequest:
    """What a run was asked for, as values, in groups (``docs/bench.md`` documents the options behind each field).

    :param spec: the checked spec.
    :param architecture: its model architecture's name, recorded with the results. :default: - unknown
    :param quiet: no progress or notes on standard error (the report is one JSON object). :default: False
    :param traffic: the prompts and the levels. :default: - every traffic default
    :param runs: which endpoints, or which results folders. :default: - the DPD endpoint, on the cluster
    :param job: the Job's names and pod. :default: - every Job default
    :param deployed: where the stack's names are read, which win over the spec's; read only when a Job is planned,
        after the traffic was checked. Its ``region`` is also the buckets', and its ``profile`` reads the uploaded
        results. :default: - no stack
    :param cluster: the cluster and the waits. :default: - the kubeconfig's current context
    :param buyer: repeats, prices and the report folder. :default: - one run, the price table, no report folder
    """

    spec: DpdSpec
    architecture: str | None = None
    quiet: bool = False
    traffic: BenchTraffic = field(default_factory=BenchTraffic)
    runs: Runs = field(default_factory=Runs)
    job: JobRequest = field(default_factory=JobRequest)
    deployed: DeployedSource = field(default_factory=DeployedSource)
    cluster: ClusterAccess = field(default_factory=ClusterAccess)
    buyer: BuyerOptions = field(default_factory=BuyerOptions)
