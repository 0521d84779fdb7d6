"""What a benchmark points at: the endpoint's router Service and where its tokenizer files are."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE, ROUTER_PORT, router_service
from hyperpod_dpd.contracts.tokenizer import vocabulary_choices
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.spec import DpdSpec, S3Source

if TYPE_CHECKING:
    from hyperpod_dpd.contracts.stack_outputs import DeployedEndpoint


@dataclass(frozen=True, kw_only=True)
class S3Location:
    """``s3://bucket/prefix/`` and the bucket's region."""

    bucket: str
    prefix: str
    region: str | None = None

    @property
    def uri(self) -> str:
        prefix = self.prefix.strip("/")
        return f"s3://{self.bucket}/{prefix}/" if prefix else f"s3://{self.bucket}/"

    @classmethod
    def parse(cls, uri: str, *, field: str, region: str | None = None) -> S3Location:
        """``s3://bucket[/prefix]``; anything else is a :class:`SpecError` naming ``field``."""
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        if not uri.startswith("s3://") or not bucket:
            raise SpecError([Problem(field=field, value=uri, message="is not an S3 URI",
                                     fix="write it as s3://BUCKET/PREFIX")])
        return cls(bucket=bucket, prefix=prefix.strip("/"), region=region)


@dataclass(frozen=True, kw_only=True)
class BenchmarkTarget:
    """One endpoint as genai-bench sees it.

    :param name: the endpoint (``metadata.name``), which names the Job.
    :param namespace: where the Job runs. :param api_base: the router, without ``/v1``.
    :param served_model: the request's ``model`` (vLLM serves the mount path).
    :param model_label: genai-bench's ``--model`` label. :param tokenizer: the tokenizer files' S3 prefix.
    :param gpu_model: the GPUs serving it (``H100``), for genai-bench's ``--server-gpu-type``. :default: - unknown
    :param gpus: how many serve it (every role's pods at their replicas), for ``--server-gpu-count``.
        :default: - unknown
    """

    name: str
    namespace: str
    api_base: str
    served_model: str
    model_label: str
    tokenizer: S3Location
    gpu_model: str | None = None
    gpus: int | None = None

    @classmethod
    def for_spec(cls, spec: DpdSpec, *, namespace: str | None = None, tokenizer: S3Location | None = None,
                 region: str | None = None, twin: bool = False) -> BenchmarkTarget:
        """The spec's router Service (plain HTTP on 443, as the operator's docs call it) and model prefix.

        :param tokenizer: where the tokenizer files are. :default: - the spec's S3 model prefix (required
            for FSx, Hugging Face and volume sources)
        :param region: the bucket's region when the spec leaves it out. :default: - the spec's
        :param twin: ``spec`` is an aggregated twin's (charts.aggregated.aggregated_spec), served by one pod
        """
        source = spec.model.source
        if tokenizer is None:
            if not isinstance(source, S3Source):
                raise _no_s3_prefix(spec)
            tokenizer = S3Location(bucket=source.bucket, prefix=source.prefix, region=source.region or region)
        return cls(name=spec.name, namespace=namespace or spec.namespace,
                   api_base=router_url(router_service(spec), OPERATOR_NAMESPACE),
                   served_model=spec.model.mount_path, model_label=spec.model.name, tokenizer=tokenizer,
                   **_hardware(spec, twin=twin))

    @classmethod
    def for_deployed(cls, spec: DpdSpec, endpoint: DeployedEndpoint, *, twin: bool = False,
                     namespace: str | None = None, tokenizer: S3Location | None = None) -> BenchmarkTarget:
        """The endpoint as the stack deployed it: its router Service, namespace and model prefix from the outputs.

        :param twin: the endpoint's aggregated twin instead (a :class:`SpecError` when the stack has none).
        :param tokenizer: where the tokenizer files are. :default: - the deployed model prefix
        """
        if tokenizer is None:
            if endpoint.model is None:
                raise _no_s3_prefix(spec)
            model = endpoint.model
            tokenizer = S3Location(bucket=model.bucket, prefix=model.prefix, region=model.region)
        name, service, hardware = endpoint.name, endpoint.router_service, _hardware(spec, twin=twin)
        if twin:
            if endpoint.aggregated is None:
                raise SpecError([Problem(field="--aggregated", value=True, message=f"the stack hosts no aggregated "
                                         f"twin of {endpoint.name!r}", fix="deploy with -c aggregated_baseline=true")])
            name, service = endpoint.aggregated.name, endpoint.aggregated.router_service
        return cls(name=name, namespace=namespace or endpoint.namespace,
                   api_base=router_url(service, endpoint.router_namespace),
                   served_model=spec.model.mount_path, model_label=spec.model.name, tokenizer=tokenizer, **hardware)


def _hardware(spec: DpdSpec, *, twin: bool) -> dict[str, Any]:
    """The spec's GPU model and the GPUs its roles' pods use at their replicas (not at the autoscaler's limit); the
    aggregated twin's one pod uses the spec's TP (charts.aggregated renders it with ``replicas: 1``, no pdSpec)."""
    return {"gpu_model": spec.instance_type.facts.gpu_model,
            "gpus": spec.tensor_parallel_size if twin else spec.node_usage(at_scale_limit=False).gpus_used}


def _no_s3_prefix(spec: DpdSpec) -> SpecError:
    return SpecError([Problem(
        field="model.source", value=type(spec.model.source).__name__, message="is not S3, so the benchmark cannot "
        "copy the tokenizer files from the model's prefix", fix=f"copy the tokenizer ({vocabulary_choices()}) and "
        "tokenizer_config.json to S3 and pass --tokenizer-s3 s3://BUCKET/PREFIX")])


def router_url(service: str, namespace: str) -> str:
    """The router Service's in-cluster URL: plain HTTP on port 443, as the operator's docs call it.

    The host is absolute (a trailing dot): a pod's resolver (``ndots:5`` in the kubelet's resolv.conf) would
    otherwise try each search domain first, ``<host>.<namespace>.svc.cluster.local`` and on, before the name
    itself, on every lookup. Both clients take it: aiperf's aiohttp and genai-bench's requests (locust
    ``HttpUser``) resolve the absolute name and send ``Host`` without the dot (aiohttp 3.14, urllib3 2.8 strip it),
    and the URL is plain HTTP, so no TLS hostname or SNI check can trip on it."""
    return f"http://{service}.{namespace}.svc.cluster.local.:{ROUTER_PORT}"
