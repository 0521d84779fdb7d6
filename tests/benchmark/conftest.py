"""Real genai-bench and aiperf runs against a local streaming server, shared by every test of this folder.

Each run executes the rendered Job's own ``benchmark`` container (its script, arguments and
environment; only the paths, the router URL and the quiet pause are mapped to this machine), is
bounded (8 requests per concurrency level, 24 per request rate, one minute at most) and takes
seconds; the result folders are what the client really wrote. The stub's router and decoder
counters are read in every quiet window the script announces, as ``bench`` reads them on a
cluster. The tokenizer is a word-level one of the Llama 3 vocabulary size (128,256), built here
from genai-bench's sonnet and aiperf's Shakespeare corpus, so nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import boto3
import pytest
from benchmark import fake_openai, kube_fakes
from moto import mock_aws
from support import write_spec

from hyperpod_dpd.benchmark import BenchmarkTarget, Scenario
from hyperpod_dpd.benchmark.proof.disaggregation import DpdCounters, LevelDisaggregation, LevelSnapshots
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.job import BENCHMARK_CONTAINER, RESULTS_MARK, JobOptions, render_benchmark_job
from hyperpod_dpd.benchmark.run.levels import LevelResult
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.spec.defaults import default_spec

HERE = Path(__file__).resolve().parent
LEVELS = (2, 4)
RATES = (8.0, 16.0)  # requests per second, open loop
RATE_REQUESTS = 24
ISL, OSL = 64, 16
REQUESTS = 8
RUN_ID = "20261201-0300"
VOCABULARY = 128_256  # Llama 3's
QUIET = re.compile(rf"^{re.escape(RESULTS_MARK)} quiet=(\d+)$")


Behaviour = fake_openai.Behaviour


@pytest.fixture
def stub_spec(tmp_path: Path) -> str:
    """The default spec with the stub router's threshold (32), so D(64,16) is a DPD scenario."""
    return write_spec(tmp_path, ("threshold: 4096", "threshold: 32"))


@pytest.fixture
def fakes() -> ModuleType:
    """The recorded-Kubernetes builders (test modules cannot import a sibling module)."""
    return kube_fakes


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto's S3 in us-west-2 (the default spec's model bucket region) with fake credentials, no bucket yet."""
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-west-2")):
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield boto3.client("s3", region_name="us-west-2")


CORPORA = {"genai_bench": ("data", "sonnet.txt"), "aiperf": ("dataset", "generator", "assets", "shakespeare.txt")}


def _corpus_words() -> list[str]:
    """Every word and mark of the texts the two clients build their prompts from."""
    words: set[str] = set()
    for module, parts in CORPORA.items():
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            pytest.skip("the bench extra is not installed: pip install '.[bench]'")
        text = Path(next(iter(spec.submodule_search_locations)), *parts).read_text(encoding="utf-8")
        words.update(re.findall(r"\w+|[^\w\s]", text))
    return sorted(words)


def build_tokenizer(folder: Path) -> Path:
    """Write into ``folder`` a word-level tokenizer of every word and mark of the clients' corpora, padded to the
    Llama 3 vocabulary size (bench/client_overhead.py uses it too)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    words = ["[UNK]", *_corpus_words()]
    words += [f"[unused{i}]" for i in range(VOCABULARY - len(words))]
    tokenizer = Tokenizer(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 100000}))
    return folder


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every word and mark of the clients' corpora, padded to the Llama 3 vocabulary size."""
    return build_tokenizer(tmp_path_factory.mktemp("tokenizer"))


@dataclass(frozen=True)
class Run:
    """One benchmark run: its exit code, the folder it wrote, the requests the server saw, the
    stub's router and decoder metrics in each quiet window (by the number of levels done), and the
    levels it was asked to run."""

    returncode: int
    folder: Path
    served: int
    stderr: str
    metrics: dict[int, tuple[str, str]] = field(default_factory=dict)
    stdout: str = ""
    loads: tuple[Load, ...] = ()
    prompts: tuple[str, ...] = ()  # every prompt the stub was sent, in order
    prompts_seen: dict[int, int] = field(default_factory=dict)  # how many, in each quiet window
    server_ttfts: tuple[float, ...] = ()  # the stub's own TTFT of every answered request, in order
    router_log: str = ""  # the stub router's routing lines, one per routed request
    estimates: tuple[int, ...] = ()  # the stub router's length estimate of every routed prompt, in order
    intruded: int = 0  # requests a second client sent during the first level
    prefiller_metrics: dict[int, str] = field(default_factory=dict)  # the stub's prefiller, when it serves one
    behaviour: Any = None  # how the stub answered (its Behaviour): the truth a test compares with
    # per prompt of ``prompts``: (read, last token streamed, tokens streamed) on the stub's clock, None if it streamed
    # none
    spans: tuple[tuple[float, float, int] | None, ...] = ()
    scratch: tuple[str, ...] = ()  # what the client left in its temporary folder (removed after the run)

    def server_ttfts_by_level(self) -> list[tuple[float, ...]]:
        """The stub's TTFTs of each level's requests (a request's first token comes before the quiet window)."""
        marks = [self.prompts_seen[window] for window in sorted(self.prompts_seen)]
        return [self.server_ttfts[start:end] for start, end in itertools.pairwise(marks)]

    def prompts_by_level(self) -> list[tuple[str, ...]]:
        """The prompts of each level: those sent between its two quiet windows."""
        marks = [self.prompts_seen[window] for window in sorted(self.prompts_seen)]
        return [self.prompts[start:end] for start, end in itertools.pairwise(marks)]

    def streamed_per_s(self, level: int, *, skip: int) -> float:
        """The stub's own output tokens per second over the ``level``-th level's requests (in run order) after its
        first ``skip`` (a warm-up): the tokens they streamed over the time from the first one's arrival to the last
        token of any, on the stub's clock."""
        marks = [self.prompts_seen[window] for window in sorted(self.prompts_seen)]
        spans = [span for span in self.spans[marks[level] + skip:marks[level + 1]] if span is not None]
        return sum(tokens for _, _, tokens in spans) / (max(end for _, end, _ in spans) - min(s for s, _, _ in spans))

    def server_rates(self, *, skip: int) -> list[tuple[LevelResult, float | None, float]]:
        """Each level of the run's folder, bench's SRV tok/s for it and what the stub streamed per second over its
        requests after the first ``skip`` (:meth:`streamed_per_s`)."""
        from hyperpod_dpd.benchmark.report.report import server_output_tokens_per_s
        from hyperpod_dpd.benchmark.run.results import read_directory

        routing = self.routing()
        return [(level, server_output_tokens_per_s(level, routing[level.load]), self.streamed_per_s(index, skip=skip))
                for index, level in enumerate(read_directory(self.folder).levels)]

    def files(self) -> dict[str, str]:
        return {path.name: path.read_text(encoding="utf-8") for path in sorted(self.folder.iterdir())
                if path.suffix in (".json", ".jsonl")}

    def routing(self) -> dict[Load, LevelDisaggregation]:
        """What the stub's router and decoder counted per level, by bench's own windowing of the snapshots."""
        taken = {window: DpdCounters.parse([router], [decoder], prefiller=[self.prefiller_metrics[window]]
                                           if self.prefiller_metrics.get(window) else [])
                 for window, (router, decoder) in self.metrics.items()}

        def unread() -> DpdCounters:
            raise AssertionError("every window was read during the run")

        return LevelSnapshots(read=unread, taken=taken).levels(self.loads)


def _client_dir(client: Client) -> Path:
    # find_spec, not import: importing genai-bench monkey-patches threading with gevent.
    if importlib.util.find_spec(client.module) is None:
        pytest.skip("the bench extra is not installed: pip install '.[bench]'")
    script = Path(sys.executable).parent / client.value
    if not script.exists():
        pytest.skip(f"no {client.value} command beside the interpreter")
    return script.parent


def rendered_benchmark_container(scenario: Scenario) -> dict[str, Any]:
    """The ``benchmark`` container of the Job ``bench`` renders for the default spec."""
    objects = render_benchmark_job(BenchmarkTarget.for_spec(default_spec()), scenario, JobOptions(run_id=RUN_ID))
    pod = next(o for o in objects if o["kind"] == "Job")["spec"]["template"]["spec"]
    found: dict[str, Any] = next(c for c in pod["initContainers"] if c["name"] == BENCHMARK_CONTAINER)
    return found


def run_client(behaviour: Any, tokenizer: Path, base: Path, scenario: Scenario | None = None, *,
               container: dict[str, Any] | None = None, mounts: dict[str, str] | None = None,
               client: Client | None = None) -> Run:
    """The rendered Job's benchmark container (genai-bench by default here, else the scenario's client), run here
    against the stub; ``container`` (with ``client``) runs another rendering of it, such as a trace replay's, with
    ``mounts`` (pod path to local folder) beside the Job's own volumes."""
    scenario = scenario or Scenario(isl=ISL, osl=OSL, concurrency=LEVELS, requests=REQUESTS, max_seconds=60,
                                    client=Client.GENAI_BENCH)
    container = container or rendered_benchmark_container(scenario)
    client = client or scenario.client
    results = base / "results"
    results.mkdir()
    local = {"/results": str(results), "/tokenizer": str(tokenizer), "/tmp": str(base / "tmp"), **(mounts or {})}
    pod_paths = re.compile("|".join(re.escape(path) for path in local))

    def mapped(text: str) -> str:
        return pod_paths.sub(lambda m: local[m[0]], text)

    # The client's own temporary folder, removed after the run: aiperf memory-maps its dataset there and makes a
    # folder for its IPC sockets, and leaves both behind. It sits in the system's /tmp, not under pytest's folder:
    # a Unix socket's path must stay under 108 bytes.
    with fake_openai.serving(behaviour) as server, \
            _removed(Path(tempfile.mkdtemp(prefix="dpd-bench-", dir=SOCKET_TMP))) as scratch:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        args = [mapped(a) for a in container["args"]]
        args[args.index("--api-base" if "--api-base" in args else "--url") + 1] = url
        env = {e["name"]: mapped(e["value"]) for e in container["env"]}
        env.update({"PATH": f"{_client_dir(client)}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                    "QUIET_SECONDS": "1",
                    "HOME": str(base),
                    "TMPDIR": str(scratch)})
        command = [*container["command"][:2], mapped(container["command"][2]), *container["command"][3:]]
        metrics: dict[int, tuple[str, str]] = {}
        prefiller: dict[int, str] = {}
        seen: dict[int, int] = {}
        lines: list[str] = []
        with subprocess.Popen([*command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                              cwd=base) as process:
            assert process.stdout is not None and process.stderr is not None
            for line in process.stdout:
                lines.append(line)
                quiet = QUIET.match(line.strip())
                if quiet:  # the script now sleeps: nothing is in flight
                    metrics[int(quiet[1])] = (server.metrics("/router/metrics") or "",
                                              server.metrics("/decoder/metrics") or "")
                    seen[int(quiet[1])] = len(server.prompts)
                    server.quiet(int(quiet[1]))
                    prefiller[int(quiet[1])] = server.metrics("/prefiller/metrics") or ""
            stderr = process.stderr.read()
            process.wait(timeout=240)
        served, prompts, ttfts = server.requests, tuple(server.prompts), tuple(server.ttfts)
        router_log, estimates = "".join(f"{line}\n" for line in server.router_log), tuple(server.estimates)
        spans = tuple(server.spans.get(index) for index in range(len(prompts)))
        left = tuple(sorted(path.name for path in scratch.iterdir()))
    code = int((results / "exit-code").read_text().strip())
    return Run(code, results / RUN_ID, served, stderr[-4000:], metrics, "".join(lines), scenario.loads, prompts, seen,
               ttfts, router_log, estimates,
               prefiller_metrics={window: text for window, text in prefiller.items() if text}, behaviour=behaviour,
               spans=spans, scratch=left)


SOCKET_TMP = "/tmp" if Path("/tmp").is_dir() else None  # the clients run on Linux; elsewhere the system's default


@contextmanager
def _removed(folder: Path) -> Iterator[Path]:
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def stub_runner() -> SimpleNamespace:
    """:func:`run_client`, the stub's :class:`Behaviour` and :data:`ROUTER_BUCKETS`, for a module's own session run
    (test modules cannot import this one), and the runs derived from another run's counters, by name, with the
    stub's server to check them against."""
    return SimpleNamespace(run_client=run_client, Behaviour=Behaviour, router_buckets=ROUTER_BUCKETS, Run=Run,
                           Server=fake_openai._Server, derived={
                               "direct": lambda run: routed_direct(run, DIRECT_THRESHOLD),
                               "partial-kv": lambda run: kv_failed_every(run, KV_FAIL_EVERY),
                               "cached": cache_hits_booked,
                               "short-estimate": lambda run: estimated_short(run, SHORT_ESTIMATE)})


def _run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path, name: str, behaviour: Any,
         scenario: Scenario | None = None) -> Iterator[Run]:
    base = tmp_path_factory.mktemp(name)
    yield run_client(behaviour, tokenizer_dir, base, scenario)
    shutil.rmtree(base, ignore_errors=True)


def open_loop(rates: tuple[float, ...] = RATES) -> Scenario:
    return Scenario(isl=ISL, osl=OSL, request_rates=rates, requests=RATE_REQUESTS, max_seconds=60)


@pytest.fixture(scope="session")
def open_loop_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """aiperf at 8 and 16 requests per second against a stub with a 500 ms TTFT, 5 ms per token."""
    yield from _run(tmp_path_factory, tokenizer_dir, "open-loop", Behaviour(first_token_s=0.5, per_token_s=0.005),
                    open_loop())


@pytest.fixture(scope="session")
def open_loop_direct_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """aiperf at 8 per second, healthy answers, but the router's threshold is above the prompts."""
    yield from _run(tmp_path_factory, tokenizer_dir, "open-loop-direct",
                    Behaviour(first_token_s=0.02, per_token_s=0.005, routing_threshold=100_000), open_loop((8.0,)))


@pytest.fixture(scope="session")
def open_loop_failing_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """aiperf at 8 per second, every request answered HTTP 404, as from a wrong served model name."""
    yield from _run(tmp_path_factory, tokenizer_dir, "open-loop-failing", Behaviour(fail_all=True, fail_status=404),
                    open_loop((8.0, 16.0)))


@pytest.fixture(scope="session")
def healthy_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """Every request answered: 20 ms to the first token, then 5 ms per token."""
    yield from _run(tmp_path_factory, tokenizer_dir, "healthy", Behaviour(first_token_s=0.02, per_token_s=0.005))


@pytest.fixture(scope="session")
def erroring_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """Every third request gets HTTP 500."""
    yield from _run(tmp_path_factory, tokenizer_dir, "erroring",
                    Behaviour(first_token_s=0.02, per_token_s=0.005, fail_every=3, fail_status=500))


@pytest.fixture(scope="session")
def failing_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """Every request gets HTTP 404, as from a wrong router URL."""
    yield from _run(tmp_path_factory, tokenizer_dir, "failing", Behaviour(fail_all=True, fail_status=404))


@pytest.fixture(scope="session")
def short_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """The server stops after 4 tokens, as a router that drops ignore_eos would let it."""
    yield from _run(tmp_path_factory, tokenizer_dir, "short",
                    Behaviour(first_token_s=0.02, per_token_s=0.005, max_output_tokens=4))


DIRECT_THRESHOLD = 100_000  # direct_run's router threshold: above every prompt
SHORT_ESTIMATE = 0.3  # short_estimate_run's router estimate, of a prompt's length
KV_FAIL_EVERY = 2  # partial_kv_run: every second disaggregated request's transfer fails, half the prompts recomputed
INTRUDER_REQUESTS = 12  # a second client's requests in the first level: more than its 8, past any cut-off slack
ENGINE = 'engine="0",model_name="/opt/ml/model"'  # the stub's vLLM labels
SAMPLE_LINE = r"^{name}(?P<labels>\{{[^}}]*\}})? (?P<value>\S+)$"


def add_to_sample(text: str, name: str, delta: float, *, labels: str = "") -> str:
    """``text`` with ``delta`` added to the sample of series ``name`` whose labels hold ``labels``."""
    def added(match: re.Match[str]) -> str:
        if labels not in (match["labels"] or ""):
            return match[0]
        return f"{match[0].rsplit(' ', 1)[0]} {float(match['value']) + delta!r}"
    return re.sub(SAMPLE_LINE.format(name=re.escape(name)), added, text, flags=re.M)


def sample(text: str, name: str, *, labels: str = "") -> float:
    found = [float(m["value"]) for m in re.finditer(SAMPLE_LINE.format(name=re.escape(name)), text, flags=re.M)
             if labels in (m["labels"] or "")]
    return sum(found)


def with_intruder(run: Run, requests: int) -> Run:
    """``run`` as if a second client had sent ``requests`` of its own prompts (ISL words each, disaggregated, TTFT the
    stub's ``first_token_s``) right after window 0 was read, and its engine served vLLM's own TTFT histogram: every
    snapshot from window 1 on counts them, as the stub counted a live second client. The benchmark client's files are
    unchanged: they are what it sent."""
    ttft, words = run.behaviour.first_token_s, ISL
    metrics = {}
    for window, texts in sorted(run.metrics.items()):
        router, decoder = texts
        extra = requests if window else 0
        router = add_to_sample(router, "dpd_routing_disaggregated_total", extra)
        for bound in re.findall(r'^dpd_e2e_ttft_seconds_bucket\{le="([^"]+)"\}', router, flags=re.M):
            if float(bound) >= ttft:  # a histogram's buckets are cumulative: each at or above the TTFT holds them
                router = add_to_sample(router, "dpd_e2e_ttft_seconds_bucket", extra, labels=f'le="{bound}"')
        for part, delta in (("_count", extra), ("_sum", extra * ttft)):
            router = add_to_sample(router, f"dpd_e2e_ttft_seconds{part}", delta)
        decoder = add_to_sample(decoder, "vllm:request_success_total", extra, labels='finished_reason="length"')
        for name, labels, delta in (("vllm:prompt_tokens_by_source_total", "external_kv_transfer", extra * words),
                                    ("vllm:prompt_tokens_total", "", extra * words),
                                    ("vllm:generation_tokens_total", "", extra * OSL)):
            decoder = add_to_sample(decoder, name, delta, labels=labels)
        # the engine's clock: the stub's router and engine time a request alike (Behaviour.engine_ttft)
        engine = "".join(line.replace("dpd_e2e_ttft_seconds", "vllm:time_to_first_token_seconds").replace(
            "{le=", f"{{{ENGINE},le=").replace("_sum ", f"_sum{{{ENGINE}}} ").replace("_count ", f"_count{{{ENGINE}}} ")
            + "\n" for line in router.splitlines() if "dpd_e2e_ttft" in line)
        metrics[window] = (router, decoder + engine)
    at = run.prompts_seen[0]
    intruders = tuple(" ".join(f"other{n}" for _ in range(words)) for n in range(requests))
    return dataclasses.replace(
        run, metrics=metrics, prompts=run.prompts[:at] + intruders + run.prompts[at:],
        prompts_seen={w: seen + (requests if w else 0) for w, seen in run.prompts_seen.items()},
        server_ttfts=run.server_ttfts[:at] + (ttft,) * requests + run.server_ttfts[at:], intruded=requests,
        behaviour=dataclasses.replace(run.behaviour, engine_ttft=True))


BY_SOURCE = "vllm:prompt_tokens_by_source_total"


def _external_booked_as(run: Run, source: str, tokens: Callable[[int, str], float]) -> dict[int, tuple[str, str]]:
    """``run``'s snapshots with ``tokens(window, decoder text)`` of the decoder's external KV prompt tokens booked
    under ``source`` instead."""
    metrics = {}
    for window, (router, text) in run.metrics.items():
        moved = tokens(window, text)
        decoder = add_to_sample(text, BY_SOURCE, -moved, labels="external_kv_transfer")
        metrics[window] = (router, add_to_sample(decoder, BY_SOURCE, moved, labels=source))
    return metrics


def _kept_local(run: Run, estimates: tuple[int, ...], behaviour: Any) -> Run:
    """``run`` as if its router had estimated its prompts at ``estimates`` against ``behaviour``'s threshold, above
    every one, and so kept all of them local: its routing counters, the decoder's prompt tokens by source and its
    routing lines, as the stub counts them (``_Server.route``); the client's files and the timings are unchanged,
    as the stub's answers do not depend on the path."""
    threshold = behaviour.routing_threshold
    assert all(estimate < threshold for estimate in estimates), (threshold, estimates)
    metrics = _external_booked_as(run, "local_compute", lambda _, decoder: sample(decoder, BY_SOURCE,
                                                                                   labels="external_kv_transfer"))
    for window, (router, decoder) in metrics.items():
        routed = sample(router, "dpd_routing_disaggregated_total")
        metrics[window] = (add_to_sample(add_to_sample(router, "dpd_routing_disaggregated_total", -routed),
                                         "dpd_routing_local_total", routed), decoder)
    log = "".join(f"INFO Conditional routing: estimated_tokens={e}, threshold={threshold}, "
                  f"disaggregate={e >= threshold}\n" for e in estimates)
    return dataclasses.replace(run, metrics=metrics, estimates=estimates, router_log=log, behaviour=behaviour)


def estimated_short(run: Run, scale: float) -> Run:
    """``run`` as if its router estimated every prompt at ``scale`` of its length (Behaviour.estimate_scale) and so
    kept all of them local."""
    return _kept_local(run, tuple(int(estimate * scale) for estimate in run.estimates),
                       dataclasses.replace(run.behaviour, estimate_scale=scale))


def routed_direct(run: Run, threshold: int) -> Run:
    """``run`` as if its router's threshold (Behaviour.routing_threshold) were ``threshold``, above every prompt."""
    return _kept_local(run, run.estimates, dataclasses.replace(run.behaviour, routing_threshold=threshold))


def kv_failed_every(run: Run, every: int) -> Run:
    """``run`` as if every ``every``-th disaggregated request's KV transfer had failed and the decoder recomputed its
    prompt (Behaviour.kv_fail_every): the decoder's prompt tokens by source in each window, as the stub counts them
    (``_Server.route``, in arrival order)."""
    assert not run.behaviour.local_cache_hits and not run.behaviour.kv_fail_every
    threshold = run.behaviour.routing_threshold
    failed, disaggregated, done = [0], 0, 0
    for prompt, estimate in zip(run.prompts, run.estimates, strict=True):  # the failed words after each prompt
        if estimate >= threshold:
            disaggregated += 1
            done += len(prompt.split()) if disaggregated % every == 0 else 0
        failed.append(done)
    return dataclasses.replace(run, metrics=_external_booked_as(run, "local_compute",
                                                                lambda window, _: failed[run.prompts_seen[window]]),
                               behaviour=dataclasses.replace(run.behaviour, kv_fail_every=every))


def cache_hits_booked(run: Run) -> Run:
    """``run`` (every prompt disaggregated, the decoder's prefix cache on) as if the decoder booked the prefix it
    already held as ``local_cache_hit`` and took only the rest as external KV (Behaviour.local_cache_hits): the stub
    counts the same hits in ``vllm:prefix_cache_hits_total``, so each window moves those tokens."""
    assert run.behaviour.prefix_block and all(e >= run.behaviour.routing_threshold for e in run.estimates)
    return dataclasses.replace(run, metrics=_external_booked_as(
        run, "local_cache_hit", lambda _, decoder: sample(decoder, "vllm:prefix_cache_hits_total")),
        behaviour=dataclasses.replace(run.behaviour, local_cache_hits=True))


@pytest.fixture(scope="session")
def shared_run(healthy_run: Run) -> Run:
    """The healthy run with a second client of the same endpoint sending its own requests during the first level
    (the second is the benchmark's alone), against an engine that serves its own TTFT histogram, as the aggregated
    twin's vLLM does."""
    return with_intruder(healthy_run, INTRUDER_REQUESTS)


@pytest.fixture(scope="session")
def short_estimate_run(healthy_run: Run) -> Run:
    """The healthy run, but the router estimates each prompt at 30% of its length (a length rule that counts
    shorter than bench's shipped lengths), so it disaggregates none while the server counts every prompt clear of
    the threshold (32)."""
    return estimated_short(healthy_run, SHORT_ESTIMATE)


@pytest.fixture(scope="session")
def direct_run(healthy_run: Run) -> Run:
    """Healthy answers, but the router's threshold is above the prompts: served by the decoder alone. The healthy
    run as the stub would have counted it (the answers and their timing do not depend on the path), so a second
    genai-bench run is not started for counters alone."""
    return routed_direct(healthy_run, DIRECT_THRESHOLD)


@pytest.fixture(scope="session")
def partial_kv_run(healthy_run: Run) -> Run:
    """Every request disaggregated, but every second one's KV transfer failed and the decoder recomputed it: the
    healthy run as the stub would have counted it (a failed transfer changes only the decoder's prompt tokens by
    source, not the answers)."""
    return kv_failed_every(healthy_run, KV_FAIL_EVERY)


CLOSED_LOOP = (8, 16, 32)  # bench's default levels
CLOSED_LOOP_REQUESTS = 96  # per level: three rounds of the highest level's users
# The router's TTFT histogram around the stub's 500 ms, fine enough that p50 and p99 are bounded to 5 ms
ROUTER_BUCKETS = (0.1, 0.25, 0.5, 0.505, 0.51, 0.52, 0.55, 0.6, 0.75, 1.0, 2.5)
# The shares of its TTFT the closed-loop stub reports as the prefiller's queue, prefill step (KV put inside),
# KV put, the decoder's queue and first step: the router and network keep the rest, 15%
STAGE_SPLIT = (0.10, 0.50, 0.10, 0.05, 0.20)


def closed_loop(**options: Any) -> Scenario:
    """bench's default client (aiperf) at its default levels, with the stub's short lengths."""
    return Scenario(isl=ISL, osl=OSL, concurrency=CLOSED_LOOP, requests=CLOSED_LOOP_REQUESTS, max_seconds=60,
                    **options)


@pytest.fixture(scope="session")
def closed_loop_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """aiperf at concurrency 8, 16 and 32 against a stub with a 500 ms TTFT, 5 ms per token, whose router
    serves a TTFT histogram with finite buckets and whose prefiller and decoder serve the TTFT's stages."""
    yield from _run(tmp_path_factory, tokenizer_dir, "closed-loop",
                    Behaviour(first_token_s=0.5, per_token_s=0.005, ttft_buckets=ROUTER_BUCKETS,
                              stage_split=STAGE_SPLIT), closed_loop())


@pytest.fixture(scope="session")
def closed_loop_twin_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """The same levels against a stub standing in for the aggregated twin: 400 ms to the first token, 8 ms per
    token (docs/bench.md's figures; only asked for when they are redrawn)."""
    yield from _run(tmp_path_factory, tokenizer_dir, "closed-loop-twin",
                    Behaviour(first_token_s=0.4, per_token_s=0.008), closed_loop())


PREFIX_SHARE = 0.5


@pytest.fixture(scope="session")
def prefix_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[Run]:
    """aiperf at concurrency 4 with half of each prompt a shared prefix, against a stub whose decoder caches
    prefixes in blocks of 8 words."""
    scenario = Scenario(isl=ISL, osl=OSL, concurrency=(4,), requests=24, max_seconds=60, prefix_share=PREFIX_SHARE)
    yield from _run(tmp_path_factory, tokenizer_dir, "prefix",
                    Behaviour(first_token_s=0.02, per_token_s=0.002, prefix_block=8), scenario)


@pytest.fixture(scope="session")
def cached_run(prefix_run: Run) -> Run:
    """The prefix run against a decoder that books the prefix it already holds as local_cache_hit and takes only the
    rest from the prefiller: the stub counts the same cache hits either way, so the same aiperf run serves both."""
    return cache_hits_booked(prefix_run)
