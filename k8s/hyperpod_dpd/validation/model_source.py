"""Where the weights come from: the S3, FSx, Hugging Face or volume source, the mount path and the preset.

See ``docs/checks.md`` for what is checked and why.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_dpd.contracts.aws_names import (
    LONGEST_MODEL_FILE,
    REGION_NAME,
    S3_KEY_MAX_BYTES,
    bucket_name_error,
    longest_key_bytes,
)
from hyperpod_dpd.errors import Problem, SpecWarning
from hyperpod_dpd.spec import FsxSource, HuggingFaceSource, S3Source, VolumeSource
from hyperpod_dpd.spec.architecture import PRESETS
from hyperpod_dpd.validation.context import Finding, RuleContext, is_token, problem
from hyperpod_dpd.validation.naming import DNS_LABEL

HF_MODEL_ID = re.compile(r"^[a-zA-Z0-9_.-]+/[a-zA-Z0-9_.-]+$")
COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")
FSX_ID = re.compile(r"^fs-[0-9a-f]{8,21}$")

# The pseudo file systems every container gets (runc's default mounts, the OCI runtime spec's Linux defaults).
KERNEL_MOUNTS = ("/proc", "/sys", "/dev")


def sub_path_problem(field: str, path: str, *, what: str) -> Problem | None:
    """A path inside a volume or bucket: relative, and never climbing out of it with '..'.

    The operator mounts FSx and PVC locations as a sub-path, and Kubernetes refuses a ``subPath`` that is
    absolute or has a '..' element (k8s.io/kubernetes pkg/apis/core/validation/validation.go,
    validateLocalDescendingPath: "must not contain '..'", "must be a relative path"); in S3, '..' is
    part of the key, not a parent, so such a prefix names objects nobody uploaded.
    """
    if ".." in path.split("/"):
        return problem(field, path, f"must stay inside the {what}: a '..' element is refused (Kubernetes "
                       "refuses sub-paths that climb out of their volume; in S3 it is a literal key part)",
                       f"write the path from the {what}'s root, e.g. 'Llama-3.3-70B-Instruct'")
    return None


def model_source(ctx: RuleContext) -> Iterator[Finding]:
    model = ctx.spec.model
    source = model.source
    if isinstance(source, S3Source):
        error = None if is_token(source.bucket) else bucket_name_error(source.bucket)
        if error is not None:
            yield problem("model.source.s3.bucket", source.bucket, f"is not a valid S3 bucket name: it {error} "
                          "(S3 bucket naming rules)", "give the bare bucket name (3-63 lower-case letters, digits, "
                          "'.' and '-'), without s3://")
        # An empty prefix is weights at the bucket's root (modelLocation is a plain string in the CRD).
        if source.prefix.startswith(("/", "s3://")):
            yield problem("model.source.s3.prefix", source.prefix, "must be the key prefix of the weights inside the "
                          "bucket, without a leading '/' or s3://; leave it empty for weights at the bucket's root",
                          "write e.g. 'Llama-3.3-70B-Instruct'")
        elif (climbs := sub_path_problem("model.source.s3.prefix", source.prefix, what="bucket")) is not None:
            yield climbs
        elif not is_token(source.prefix) and longest_key_bytes(source.prefix) > S3_KEY_MAX_BYTES:
            yield problem("model.source.s3.prefix", source.prefix, f"makes the key of a checkpoint shard "
                          f"('<prefix>/{LONGEST_MODEL_FILE}') {longest_key_bytes(source.prefix)} bytes of UTF-8; S3 "
                          f"keys are at most {S3_KEY_MAX_BYTES}", "use a shorter prefix")
        if source.region is not None and not is_token(source.region) and not REGION_NAME.match(source.region):
            yield problem("model.source.s3.region", source.region, "is not an AWS region name",
                          "write e.g. 'us-west-2'")
        if source.region is None:
            yield SpecWarning(code="BucketRegionUnset", field="model.source.s3.region",
                          message="is not set: a CDK stack fills in its own region, but `hyperpod-dpd synth` needs "
                                  "it (or --region) to render the manifest. Fix: set region, e.g. 'us-west-2'")
    elif isinstance(source, FsxSource):
        if not FSX_ID.match(source.file_system_id):
            yield problem("model.source.fsx.file_system_id", source.file_system_id, "is not an FSx file system id",
                          "write e.g. 'fs-0123456789abcdef0'")
        if not source.path.strip("/") or source.path.startswith("/"):
            yield problem("model.source.fsx.path", source.path, "must be the folder of the weights relative to the "
                          "file system's root, without a leading '/' (every AWS example uses a relative "
                          "modelLocation; the operator mounts it as a sub-path)",
                          f"write e.g. {source.path.strip('/') or 'Llama-3.3-70B-Instruct'!r}")
        elif (climbs := sub_path_problem("model.source.fsx.path", source.path, what="file system")) is not None:
            yield climbs
    elif isinstance(source, HuggingFaceSource):
        if not HF_MODEL_ID.match(source.model_id):
            yield problem("model.source.huggingface.model_id", source.model_id, "must be 'owner/name'",
                          "write e.g. 'meta-llama/Llama-3.3-70B-Instruct'")
        if source.revision is not None and not COMMIT_SHA.match(source.revision):
            yield problem("model.source.huggingface.revision", source.revision, "must be a full 40-character "
                          "commit SHA (the operator pins by commit, not by branch or tag)",
                          "copy the commit SHA from the model repository's history")
        if source.token_secret is not None:
            secret = source.token_secret.split("/")
            if len(secret) != 2 or not DNS_LABEL.match(secret[0]) or not secret[1]:
                yield problem("model.source.huggingface.token_secret", source.token_secret,
                              "must be 'secret-name/key'", "write e.g. 'hf-token/token'")
    elif isinstance(source, VolumeSource):
        if not DNS_LABEL.match(source.claim_name):
            yield problem("model.source.volume.claim_name", source.claim_name, "must be the name of a "
                          "PersistentVolumeClaim (a DNS label)", "use the claim's name, e.g. 'llama-weights'")
        if source.path.startswith("/"):
            yield problem("model.source.volume.path", source.path, "must be relative to the volume's root: the "
                          "operator mounts it as a sub-path, and Kubernetes refuses an absolute subPath",
                          f"write {source.path.strip('/')!r}, or leave it empty for the volume's root")
        elif (climbs := sub_path_problem("model.source.volume.path", source.path, what="volume")) is not None:
            yield climbs
    if not model.mount_path.startswith("/"):
        yield problem("model.mount_path", model.mount_path, "must be an absolute path", "write e.g. '/opt/ml/model'")
    elif any(model.mount_path.rstrip("/") == top or model.mount_path.startswith(top + "/") for top in KERNEL_MOUNTS):
        yield problem("model.mount_path", model.mount_path, "is under a file system the container runtime mounts "
                      "itself (/proc, /sys, /dev): runc refuses a volume mounted there, or the weights hide the "
                      "kernel's files vLLM and NCCL read", "use a path of its own, e.g. '/opt/ml/model'")
    if isinstance(model.architecture, str) and model.architecture not in PRESETS:
        yield problem("model.architecture", model.architecture, "is not a known preset",
                      f"use one of {', '.join(PRESETS)} or give the architecture's numbers")
