"""Where the model's weights come from, and which model it is."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from hyperpod_dpd.spec._frozen import Frozen
from hyperpod_dpd.spec.architecture import CONFIG_JSON, ModelArchitecture
from hyperpod_dpd.spec.fields import FILE_REFERENCE

DEFAULT_MOUNT_PATH = "/opt/ml/model"


@dataclass(frozen=True, kw_only=True)
class S3Source(Frozen):
    """Weights under ``s3://bucket/prefix``, mounted read-only through the Mountpoint for S3 CSI driver.

    :param region: the bucket's region. :default: - the region the endpoint is deployed to
        (required when rendering manifests outside a CDK stack)
    """

    KIND: ClassVar[str] = "s3"
    bucket: str
    prefix: str
    region: str | None = None


@dataclass(frozen=True, kw_only=True)
class FsxSource(Frozen):
    """Weights on an FSx for Lustre file system, under ``path`` (relative to the file system's root)."""

    KIND: ClassVar[str] = "fsx"
    file_system_id: str
    path: str
    dns_name: str | None = None
    mount_name: str | None = None


@dataclass(frozen=True, kw_only=True)
class HuggingFaceSource(Frozen):
    """Weights from the Hugging Face Hub.

    Deployed by the CDK stack, the revision is staged once into the stack's model bucket and the endpoint
    reads S3 (``hyperpod_dpd_cdk.weights_staging``); rendered on its own, the manifest uses the operator's
    ``huggingface`` source, which downloads in every pod's init container.

    :param revision: a 40-character commit SHA to pin (required by the stack). :default: - the main branch
    :param token_secret: ``name/key`` of a Kubernetes Secret holding ``HF_TOKEN`` for gated models (the
        operator's own download only). :default: - none
    :param token_secret_arn: a Secrets Manager secret holding the token (the string, or ``{"token": ...}``),
        which only the stack's staging Job may read. :default: - the stack creates an empty one to fill
    """

    KIND: ClassVar[str] = "huggingface"
    model_id: str
    revision: str | None = None
    token_secret: str | None = None
    token_secret_arn: str | None = None


@dataclass(frozen=True, kw_only=True)
class VolumeSource(Frozen):
    """Weights on an existing PersistentVolumeClaim in the endpoint's namespace, under ``path``."""

    KIND: ClassVar[str] = "volume"
    claim_name: str
    path: str = ""


ModelSource = S3Source | FsxSource | HuggingFaceSource | VolumeSource


@dataclass(frozen=True, kw_only=True)
class ModelSpec(Frozen):
    """The model served by both roles.

    :param name: the model name (``spec.modelName``); with an ``endpoint_name`` the manifest carries it
        as a valid SageMaker model name (other characters become ``-``: ``Llama-3.3-70B`` -> ``Llama-3-3-70B``).
    :param architecture: a preset name (see ``hyperpod_dpd.spec.architecture.PRESETS``), an explicit
        architecture, or ``{config_json: PATH}`` (the model's config.json, relative to the spec file), used to
        check tensor parallelism and size the KV transfer.
        :default: - the preset matching ``name``, if there is one
    :param mount_path: where the weights appear inside the worker. :default: /opt/ml/model
    """

    name: str
    source: ModelSource
    architecture: str | ModelArchitecture | None = field(default=None, metadata={FILE_REFERENCE: CONFIG_JSON})
    mount_path: str = DEFAULT_MOUNT_PATH
