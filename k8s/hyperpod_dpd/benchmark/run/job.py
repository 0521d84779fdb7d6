"""The benchmark Job and its ServiceAccount, as a cdk8s-plus chart.

One pod, in order: ``fetch-tokenizer`` (aws-cli) copies the tokenizer files from S3, so no Hugging Face
access is needed; ``benchmark`` runs the scenario's client against the router once per level (aiperf per
concurrency level or request rate, or genai-bench per concurrency level when asked) and always exits 0,
writing the client's exit code next to the results. Before the first level and after each one it prints
a ``quiet=<levels done>`` marker and sends nothing for ``quiet_seconds``, so ``bench``, polling its log,
can snapshot the router's and decoder's counters between levels; ``publish`` prints every result file
between markers (so ``bench`` can read them from the pod's log), uploads them to S3 when asked, and
exits with the client's code, so the Job fails when the client did. ``backoffLimit: 0`` (a retried
benchmark measures a different run), a deadline sized from the scenario, a TTL, non-root with a
read-only root filesystem, resources requested, and never a HyperPod GPU node; any other node unless a
selector is given (an existing cluster's nodes carry none of the stack's labels).

The default image is ``public.ecr.aws/docker/library/python`` (Docker's official image mirrored on
ECR Public: pullable without credentials or Docker Hub rate limits), into which the container
pip-installs the client and every dependency at the exact versions and sha256 hashes of the lock
shipped in ``hyperpod_dpd/data/<client>_lock.json`` (the set the test suite runs;
``scripts/client_lock.py`` writes it), wheels only, so each run uses the same client; it needs
PyPI egress or ``pip_index_url``, a mirror serving the same files. Pass an image that has the client
on its PATH as ``image`` and the container runs it instead of installing one (genai-bench publishes
``ghcr.io/moirai-internal/genai-bench:<version>``, whose public availability could not be verified).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import cdk8s
from constructs import Construct

from hyperpod_dpd._kplus import kplus
from hyperpod_dpd.benchmark.run.aiperf_results import file_prefix
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.results import PLAN_FILE, plan_document
from hyperpod_dpd.benchmark.run.scenario import Scenario
from hyperpod_dpd.benchmark.run.target import BenchmarkTarget, S3Location
from hyperpod_dpd.contracts.bench_job import (
    DEFAULT_IMAGE,
    DEFAULT_SERVICE_ACCOUNT,
    MANAGED_BY,
    ROLE_ARN_ANNOTATION,
    RUN_USER,
)
from hyperpod_dpd.contracts.operator import INSTANCE_GROUP_LABEL
from hyperpod_dpd.contracts.tokenizer import TOKENIZER_FILES
from hyperpod_dpd.errors import Problem, raise_if_any
from hyperpod_dpd.validation.naming import DNS_LABEL

GENAI_BENCH_VERSION = "0.0.5"
AIPERF_VERSION = "0.13.0"
DEFAULT_AWS_CLI_IMAGE = "public.ecr.aws/aws-cli/aws-cli:2.27.0"
RESULTS_MARK = "### hyperpod-dpd-bench"
SETUP_SECONDS = 900  # image pulls, pip install and the tokenizer copy
LEVEL_SLACK_SECONDS = 60  # genai-bench's stop check runs once a second, plus report writing
TTL_SECONDS = 3600
QUIET_SECONDS = 40  # two default polls (15 s) and some slack: bench sees every quiet window
PUBLISH_CONTAINER = "publish"
UPLOAD_MANIFEST = "hyperpod-dpd-upload.txt"  # the names of the files one run uploaded, one a line
UPLOAD_FAILED = 96  # the publish container's exit code when its upload failed (its script's `code=96`)
BENCHMARK_CONTAINER = "benchmark"


@dataclass(frozen=True, kw_only=True)
class JobOptions:
    """How the benchmark pod runs.

    :param run_id: names the Job and the results folder (lower-case letters, digits, '-').
    :param image: runs the client (pip-installed when absent). :default: python 3.11 slim from ECR Public
    :param genai_bench_version: another version is installed unpinned (no lock). :default: 0.0.5, from the lock
    :param aiperf_version: the default client; another version is installed unpinned. :default: 0.13.0, locked
    :param pip_index_url: the index the pod installs from. :default: - PyPI
    :param aws_cli_image: copies the tokenizer and the results. :default: aws-cli 2.27.0 from ECR Public
    :param service_account: :default: hyperpod-dpd-bench
    :param role_arn: annotated on the ServiceAccount for IRSA. :default: - none (Pod Identity or the node role)
    :param results: upload the result files under ``<results>/<endpoint>/<run_id>/``. :default: - only the log
    :param node_selector: where the pod may run, besides never on a HyperPod node. :default: - any node
    :param cpu: :default: 2 (request; the limit is twice). :param memory_gib: :default: 4 (the limit is twice)
    :param ttl_seconds: how long the finished Job stays. :default: 3600
    :param quiet_seconds: the pause before the first level and after each, for counter snapshots. :default: 40
    """

    run_id: str
    image: str = DEFAULT_IMAGE
    genai_bench_version: str = GENAI_BENCH_VERSION
    aiperf_version: str = AIPERF_VERSION
    pip_index_url: str | None = None
    aws_cli_image: str = DEFAULT_AWS_CLI_IMAGE
    service_account: str = DEFAULT_SERVICE_ACCOUNT
    role_arn: str | None = None
    results: S3Location | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    cpu: float = 2
    memory_gib: int = 4
    ttl_seconds: int = TTL_SECONDS
    quiet_seconds: int = QUIET_SECONDS


def is_dns_label(value: str) -> bool:
    return len(value) <= 63 and DNS_LABEL.match(value) is not None


def job_name(target: BenchmarkTarget, options: JobOptions) -> str:
    return f"bench-{target.name}-{options.run_id}"


def deadline_seconds(scenario: Scenario, quiet_seconds: int = QUIET_SECONDS) -> int:
    """Setup, every level at its time bound and the quiet windows: past it the Job is stopped, not left
    loading the endpoint."""
    levels = len(scenario.loads)
    return SETUP_SECONDS + levels * (scenario.max_seconds + LEVEL_SLACK_SECONDS) + (levels + 1) * quiet_seconds


def option_problems(target: BenchmarkTarget, options: JobOptions) -> list[Problem]:
    problems = []
    name = job_name(target, options)
    if not is_dns_label(options.run_id) or not is_dns_label(name):
        problems.append(Problem(field="run_id", value=options.run_id, message=f"makes the Job name {name!r}, which "
                                "must be a DNS label of at most 63 characters (it becomes the pods' job-name label)",
                                fix="use a short id of lower-case letters, digits and '-', e.g. 20261201-0300"))
    if not is_dns_label(options.service_account):
        problems.append(Problem(field="service_account", value=options.service_account,
                                message="is not a DNS label", fix=f"use e.g. {DEFAULT_SERVICE_ACCOUNT}"))
    if options.cpu <= 0 or options.memory_gib < 1:
        problems.append(Problem(field="resources", value=(options.cpu, options.memory_gib),
                                message="need a positive CPU and at least 1 GiB", fix="use cpu=2, memory_gib=4"))
    return problems


# The tokenizer is a local folder: nothing needs the Hub. genai-bench is told so; aiperf 0.13 is not, because
# in offline mode it looks a tokenizer name up in the Hub cache only (aiperf/common/tokenizer.py,
# Tokenizer._from_pretrained_local: snapshot_download(local_files_only=True)) and refuses a local folder.
OFFLINE_ENV = (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"))
CLIENT_LOGS = {Client.GENAI_BENCH: "/results/logs/genai_bench.log", Client.AIPERF: "/results/logs/aiperf.log"}


@cache
def client_lock(client: Client = Client.GENAI_BENCH) -> tuple[str, tuple[str, ...]]:
    """The client's locked version and one ``name==version --hash=sha256:...`` line per wheel."""
    lock = resources.files("hyperpod_dpd.data").joinpath(f"{client.module}_lock.json")
    data = json.loads(lock.read_text(encoding="utf-8"))
    wheels = data["wheels"]
    version = next(w["version"] for w in wheels if w["name"] == client.value)
    return version, tuple(f"{w['name']}=={w['version']} --hash=sha256:{w['sha256']}" for w in wheels)


def _install_script(client: Client) -> str:
    """Install the client unless the image has it: the lock with hashes required, else the version unpinned."""
    lock = f"/tmp/{client.value}.lock"
    install = ('pip install --quiet --no-cache-dir --target /tmp/pkgs --require-hashes --no-deps '
               f'--only-binary=:all: -r {lock}')
    return (
        f"if ! command -v {client.value} >/dev/null 2>&1; then\n"
        '  if [ -n "$CLIENT_LOCK" ]; then\n'
        f'    echo "installing the locked {client.value}==$CLIENT_VERSION"\n'
        f'    printf "%s\\n" "$CLIENT_LOCK" > {lock}\n'
        f"    {install} || {{ echo 97 > /results/exit-code; exit 0; }}\n"
        "  else\n"
        f'    echo "installing {client.value}==$CLIENT_VERSION (not locked)"\n'
        f'    pip install --quiet --no-cache-dir --target /tmp/pkgs "{client.value}==$CLIENT_VERSION" || '
        "{ echo 97 > /results/exit-code; exit 0; }\n"
        "  fi\n"
        '  export PYTHONPATH=/tmp/pkgs PATH="/tmp/pkgs/bin:$PATH"\n'
        "fi\n")


def _run_level(client: Client, *, closed_loop: bool = False) -> str:
    """One level of the pod's loop: ``$plan`` is one item of :meth:`Scenario.level_plan`."""
    if client is Client.GENAI_BENCH:
        return ('  genai-bench "$@" --num-concurrency "$level" --spawn-rate "${plan##*:}"\n'
                "  code=$?\n")
    # aiperf writes its artifacts per run; keep the summary and the per-request records under names
    # that carry the level as Scenario.level_plan prints it (%g, which aiperf_results.AIPERF_FILE reads
    # back), and its log for the publish step.
    flag, prefix = ("--concurrency", file_prefix(True)) if closed_loop else ("--request-rate", file_prefix(False))
    # One dataset entry per request, warm-up included, taken in order: aiperf 0.13 otherwise makes --request-count
    # entries and its warm-up re-sends some of the measured prompts (a prefix-cache hit timed as a prefill).
    return ('  rest="${plan#*:}"; count="${rest%%:*}"; rest="${rest#*:}"; warm="${rest%%:*}"; '
            'out="/results/aiperf/$level"\n'
            f'  aiperf "$@" {flag} "$level" --request-count "$count" '
            '--warmup-request-count "$warm" --num-dataset-entries "$((count + warm))" '
            '--dataset-sampling-strategy sequential --random-seed "${rest##*:}" --artifact-dir "$out"\n'
            "  code=$?\n"
            f'  cp "$out/profile_export_aiperf.json" "/results/$RUN_ID/{prefix}$level.json" 2>/dev/null\n'
            f'  cp "$out/profile_export.jsonl" "/results/$RUN_ID/{prefix}$level.jsonl" 2>/dev/null\n'
            '  mkdir -p /results/logs; cat "$out/logs/aiperf.log" >> /results/logs/aiperf.log 2>/dev/null\n')


def _benchmark_script(client: Client, *, closed_loop: bool = False) -> str:
    return (
        "set -u\n"
        f"{_install_script(client)}"
        "code=0 done=0\n"
        'mkdir -p "/results/$RUN_ID"\n'
        f"printf '%s' \"$LEVELS_JSON\" > \"/results/$RUN_ID/{PLAN_FILE}\"\n"
        f'echo "{RESULTS_MARK} quiet=0"; sleep "$QUIET_SECONDS"\n'
        "for plan in $LEVELS; do\n"
        '  level="${plan%%:*}"\n'
        f'  echo "{RESULTS_MARK} level=$level"\n'
        f"{_run_level(client, closed_loop=closed_loop)}"
        "  done=$((done + 1))\n"
        f'  echo "{RESULTS_MARK} quiet=$done"; sleep "$QUIET_SECONDS"\n'
        '  [ "$code" = 0 ] || break  # the client failed the level (genai-bench: every request failed)\n'
        "done\n"
        "echo $code > /results/exit-code\n")


def results_folder(results: S3Location, endpoint: str, run_id: str) -> S3Location:
    """Where the publish container uploads one run's result files: ``<results>/<endpoint>/<run_id>/``
    (tests/benchmark/test_uploaded.py holds the script to it)."""
    return dataclasses.replace(results, prefix="/".join(filter(None, (results.prefix.strip("/"), endpoint, run_id))))


def _publish_script(results: S3Location | None, endpoint: str, client: Client) -> str:
    upload = ""
    if results is not None:
        # The manifest names this run's files: an earlier run's objects left under the same run id are not its.
        upload = (f'(cd "$dir" && ls -1 -- *.json *.jsonl *.xlsx 2>/dev/null) > "$dir/{UPLOAD_MANIFEST}"\n'
                  f'aws s3 cp "$dir/" "{results.uri}{endpoint}/$RUN_ID/" --recursive --only-show-errors '
                  '--exclude "*" --include "*.json" --include "*.jsonl" --include "*.xlsx" '
                  f'--include "{UPLOAD_MANIFEST}" || code=96\n')
    return (
        "set -u\n"
        'dir="/results/$RUN_ID"\n'
        'for f in "$dir"/*.json "$dir"/*.jsonl; do\n'
        '  [ -e "$f" ] || continue\n'
        f'  echo "{RESULTS_MARK} file=${{f##*/}}"; cat "$f"; echo; echo "{RESULTS_MARK} end"\n'
        "done\n"
        "code=$(cat /results/exit-code 2>/dev/null || echo 98)\n"
        'if [ "$code" != 0 ]; then\n'
        f'  echo "{RESULTS_MARK} log"; tail -n 40 {CLIENT_LOGS[client]} 2>/dev/null; '
        f'echo "{RESULTS_MARK} end"\n'
        "fi\n"
        f"{upload}"
        f'echo "{RESULTS_MARK} exit=$code"\n'
        'exit "$code"\n')


def _lock_text(client: Client, version: str) -> str:
    """The lock's lines when it is for ``version``; '' (an unpinned install) for any other version."""
    locked, lines = client_lock(client)
    return "\n".join(lines) if version == locked else ""


# genai-bench 0.0.5's --server-gpu-type choices (genai_bench/cli/option_groups.py, server_options): a GPU outside
# them (B300) is left out rather than refused by its click.Choice
GENAI_BENCH_GPU_TYPES = frozenset({"H100", "A100-80G", "A100-40G", "MI300", "A10", "H200", "B200", "RTX-PRO-6000"})


def server_gpu_args(target: BenchmarkTarget) -> list[str]:
    """genai-bench's ``--server-gpu-type`` and ``--server-gpu-count`` (its experiment metadata and Excel report's
    ``<count>x<type>``), from the spec's instance type and the GPUs the endpoint's pods use."""
    found = []
    if target.gpu_model in GENAI_BENCH_GPU_TYPES:
        found += ["--server-gpu-type", str(target.gpu_model)]
    if target.gpus:
        found += ["--server-gpu-count", str(target.gpus)]
    return found


def genai_bench_args(target: BenchmarkTarget, scenario: Scenario, options: JobOptions) -> list[str]:
    return ["benchmark", "--api-backend", "vllm", "--api-base", target.api_base, "--api-key", "unused",
            "--api-model-name", target.served_model, "--model-tokenizer", "/tokenizer", "--model", target.model_label,
            *scenario.genai_bench_args(), "--server-engine", "vLLM", *server_gpu_args(target),
            "--experiment-base-dir", "/results", "--experiment-folder-name", options.run_id,
            "--log-dir", "/results/logs"]


def aiperf_args(target: BenchmarkTarget, scenario: Scenario, options: JobOptions) -> list[str]:
    """``aiperf profile`` against the router's streaming chat endpoint. ``max_tokens`` rather than
    ``max_completion_tokens`` (``--use-legacy-max-tokens``), as genai-bench sends it: the router caps
    the prefill request's length, and vLLM prefers ``max_completion_tokens`` when both are set. No
    readiness probe (its canned short request would be counted by the router as a direct one), no UI,
    per-request records (for goodput and the client's mean TTFT), and workers that fit the pod's CPU."""
    return ["profile", "--model", target.served_model, "--url", target.api_base, "--endpoint-type", "chat",
            "--streaming", "--use-legacy-max-tokens", "--tokenizer", "/tokenizer", *scenario.aiperf_args(),
            "--wait-for-model-timeout", "0", "--ui-type", "none", "--export-level", "records", "--no-auto-plot",
            "--workers-max", str(max(1, math.ceil(2 * options.cpu) - 1))]


def client_args(target: BenchmarkTarget, scenario: Scenario, options: JobOptions) -> list[str]:
    """The benchmark container's arguments: the scenario's client, against ``target``."""
    if scenario.client is Client.AIPERF:
        return aiperf_args(target, scenario, options)
    return genai_bench_args(target, scenario, options)


def client_version(scenario: Scenario, options: JobOptions) -> str:
    return options.aiperf_version if scenario.client is Client.AIPERF else options.genai_bench_version


class BenchmarkJobChart(cdk8s.Chart):
    """The Job and ServiceAccount that benchmark one endpoint (see the module docstring for the pod).

    :param target: the endpoint. :param scenario: the traffic. :param options: the pod; see :class:`JobOptions`.
    """

    def __init__(self, scope: Construct, id: str, *, target: BenchmarkTarget, scenario: Scenario,
                 options: JobOptions) -> None:
        raise_if_any(option_problems(target, options))
        super().__init__(scope, id, disable_resource_name_hashes=True, namespace=target.namespace)
        self.name = job_name(target, options)
        labels = {**MANAGED_BY, "hyperpod-dpd/endpoint": target.name, "hyperpod-dpd/run": options.run_id}
        annotations = {ROLE_ARN_ANNOTATION: options.role_arn} if options.role_arn else None
        self.service_account = kplus.ServiceAccount(
            self, "ServiceAccount", automount_token=False,
            metadata=cdk8s.ApiObjectMetadata(name=options.service_account, labels=dict(MANAGED_BY),
                                             annotations=annotations))
        volumes = {name: kplus.Volume.from_empty_dir(self, f"{name}-volume", name)
                   for name in ("tokenizer", "results", "tmp")}
        self.job = kplus.Job(
            self, "Job", metadata=cdk8s.ApiObjectMetadata(name=self.name, labels=labels),
            pod_metadata=cdk8s.ApiObjectMetadata(labels=labels), select=False,
            backoff_limit=0, active_deadline=cdk8s.Duration.seconds(deadline_seconds(scenario, options.quiet_seconds)),
            ttl_after_finished=cdk8s.Duration.seconds(options.ttl_seconds),
            restart_policy=kplus.RestartPolicy.NEVER, service_account=self.service_account,
            automount_service_account_token=False,
            security_context=kplus.PodSecurityContextProps(ensure_non_root=True, user=RUN_USER, group=RUN_USER,
                                                           fs_group=RUN_USER))
        region = {"AWS_REGION": kplus.EnvValue.from_value(target.tokenizer.region)} if target.tokenizer.region else {}
        home = {"HOME": kplus.EnvValue.from_value("/tmp")}
        includes = [arg for name in TOKENIZER_FILES for arg in ("--include", name)]
        self.job.add_init_container(**self._container(
            name="fetch-tokenizer", image=options.aws_cli_image, cpu=0.25, memory_gib=0.25,
            command=["aws"], args=["s3", "cp", target.tokenizer.uri, "/tokenizer/", "--recursive",
                                   "--only-show-errors", "--exclude", "*", *includes],
            env={**home, **region}, mounts={"/tokenizer": volumes["tokenizer"], "/tmp": volumes["tmp"]}))
        self.job.add_init_container(**self._container(
            name=BENCHMARK_CONTAINER, image=options.image, cpu=options.cpu, memory_gib=options.memory_gib,
            command=["sh", "-c", _benchmark_script(scenario.client, closed_loop=not scenario.request_rates),
                     scenario.client.value],
            args=client_args(target, scenario, options),
            env={**home, "CLIENT_VERSION": kplus.EnvValue.from_value(client_version(scenario, options)),
                 "LEVELS": kplus.EnvValue.from_value(scenario.level_plan(options.run_id)),
                 "LEVELS_JSON": kplus.EnvValue.from_value(json.dumps(plan_document(scenario.loads))),
                 "RUN_ID": kplus.EnvValue.from_value(options.run_id),
                 "CLIENT_LOCK": kplus.EnvValue.from_value(_lock_text(scenario.client,
                                                                     client_version(scenario, options))),
                 **({"PIP_INDEX_URL": kplus.EnvValue.from_value(options.pip_index_url)} if options.pip_index_url
                    else {}),
                 "QUIET_SECONDS": kplus.EnvValue.from_value(str(options.quiet_seconds)),
                 **{key: kplus.EnvValue.from_value(value) for key, value in (
                     *(OFFLINE_ENV if scenario.client is Client.GENAI_BENCH else ()),
                     ("HF_HUB_DISABLE_TELEMETRY", "1"), ("HF_HOME", "/tmp/hf"), ("MPLCONFIGDIR", "/tmp/mpl"),
                     ("TRANSFORMERS_VERBOSITY", "error"), ("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
                     ("ENABLE_UI", "false"))}},
            mounts={"/tokenizer": volumes["tokenizer"], "/results": volumes["results"], "/tmp": volumes["tmp"]}))
        self.job.add_container(**self._container(
            name=PUBLISH_CONTAINER, image=options.aws_cli_image, cpu=0.25, memory_gib=0.25,
            command=["sh", "-c", _publish_script(options.results, target.name, scenario.client)], args=[],
            env={**home, **region, "RUN_ID": kplus.EnvValue.from_value(options.run_id)},
            mounts={"/results": volumes["results"], "/tmp": volumes["tmp"]}))
        if options.node_selector:
            queries = [kplus.NodeLabelQuery.is_(key, value) for key, value in sorted(options.node_selector.items())]
        else:
            queries = []
        self.job.scheduling.attract(kplus.Node.labeled(*queries, kplus.NodeLabelQuery.does_not_exist(
            INSTANCE_GROUP_LABEL)))

    @staticmethod
    def _container(*, name: str, image: str, cpu: float, memory_gib: float, command: list[str], args: list[str],
                   env: Mapping[str, Any], mounts: Mapping[str, Any]) -> dict[str, Any]:
        mebibytes = int(memory_gib * 1024)
        return dict(
            name=name, image=image, command=command, args=args or None, env_variables=dict(env),
            image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT,
            resources=kplus.ContainerResources(
                cpu=kplus.CpuResources(request=kplus.Cpu.millis(int(cpu * 1000)),
                                       limit=kplus.Cpu.millis(int(cpu * 2000))),
                memory=kplus.MemoryResources(request=cdk8s.Size.mebibytes(mebibytes),
                                             limit=cdk8s.Size.mebibytes(2 * mebibytes))),
            security_context=kplus.ContainerSecurityContextProps(
                ensure_non_root=True, user=RUN_USER, group=RUN_USER, privileged=False,
                allow_privilege_escalation=False, read_only_root_filesystem=True,
                # what Pod Security "restricted" requires, so such a namespace admits the pod
                seccomp_profile=kplus.SeccompProfile(type=kplus.SeccompProfileType.RUNTIME_DEFAULT),
                capabilities=kplus.ContainerSecutiryContextCapabilities(drop=[kplus.Capability.ALL])),
            volume_mounts=[kplus.VolumeMount(path=path, volume=volume) for path, volume in sorted(mounts.items())])


def render_benchmark_job(target: BenchmarkTarget, scenario: Scenario, options: JobOptions) -> list[dict[str, Any]]:
    """The ServiceAccount and Job as Kubernetes objects (raises :class:`SpecError` for bad options)."""
    chart = BenchmarkJobChart(cdk8s.App(), "benchmark", target=target, scenario=scenario, options=options)
    objects: list[dict[str, Any]] = chart.to_json()
    return objects
