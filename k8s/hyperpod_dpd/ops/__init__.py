"""Operations on a live account and cluster: ``preflight`` before a deploy, ``verify`` after it.

Every AWS and Kubernetes client is passed in, so each check runs offline against moto, botocore's
Stubber or a recorded Kubernetes API in the tests.
"""

from hyperpod_dpd.clients.checks import Check, Status, exit_status
from hyperpod_dpd.ops.table import render_json, render_table

__all__ = ["Check", "Status", "exit_status", "render_json", "render_table"]
