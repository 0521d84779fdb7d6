"""What the benchmark Job and the stack that grants it access must agree on, each with its source.

``hyperpod-dpd bench`` renders the Job (``benchmark/job.py``); the stack creates the ServiceAccount's
role, may create the ServiceAccount itself and lets the role write under the results prefix
(``hyperpod_dpd_cdk/benchmark_access.py``); the weights staging Job runs the same pinned image as the
same user (``hyperpod_dpd_cdk/weights_staging.py``). Kept here, below both, so ``cdk synth`` does not
import the benchmark package for a handful of names, and neither side can drift from the other.
"""

from __future__ import annotations

# Pinned by digest, so a re-pushed tag cannot change what the bench and the staging Job run: the
# multi-platform index of python:3.11-slim-bookworm (CPython 3.11.16, built 2026-08-25), docker-library/repo-info
# repos/python/remote/3.11-slim-bookworm.md at 33a22f41; ECR Public's Docker Official Images copy Docker Hub's
# manifests, digests included. The tag stays for the reader; the digest decides.
DEFAULT_IMAGE = (
    "public.ecr.aws/docker/library/python:3.11-slim-bookworm"
    "@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b"
)
# The uid and gid both Jobs run as: not root, with a read-only root filesystem.
RUN_USER = 1000
# The ServiceAccount annotation that IRSA's pod identity webhook reads (EKS user guide, "IAM roles for
# service accounts": eks.amazonaws.com/role-arn).
ROLE_ARN_ANNOTATION = "eks.amazonaws.com/role-arn"
# The bench Job's ServiceAccount: the role's trust names it, so both sides must use one name.
DEFAULT_SERVICE_ACCOUNT = "hyperpod-dpd-bench"
RESULTS_PREFIX = "benchmarks"  # where the stack's benchmark role may write in the model bucket
# The bench's labels (Kubernetes recommended labels, app.kubernetes.io/*), on the Job and its ServiceAccount.
MANAGED_BY = {"app.kubernetes.io/managed-by": "hyperpod-dpd", "app.kubernetes.io/name": "hyperpod-dpd-bench"}
