#!/usr/bin/env bash
# Prepare the SageMaker HyperPod dependency Helm chart for the CDK app, on your own machine.
#
# The chart (aws/sagemaker-hyperpod-cli, helm_chart/HyperPodHelmChart) is not published to a chart
# repository, and the CDK kubectl provider runs only `helm upgrade --install`, never
# `helm dependency update`. This script checks out the pinned revision and vendors every
# dependency into charts/*.tgz, so the folder can be uploaded as a CDK asset as is.
#
#   scripts/prepare_hyperpod_chart.sh [DEST]        # default DEST: build/sagemaker-hyperpod-cli
#   cdk synth -c dependency_chart=DEST/helm_chart/HyperPodHelmChart
#
# Needs git and helm >= 3.8 (OCI registries: cert-manager comes from oci://quay.io/jetstack/charts),
# and network access to github.com, nvidia.github.io, aws.github.io and quay.io.
# HYPERPOD_CLI_REVISION overrides the pinned commit (constructs/hyperpod_dpd_cdk/versions.py).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
versions="$here/constructs/hyperpod_dpd_cdk/versions.py"
pinned="$(sed -n 's/^HYPERPOD_CLI_REVISION = "\([0-9a-f]*\)"$/\1/p' "$versions")"
repository="$(sed -n 's/^HYPERPOD_CLI_REPOSITORY = "\(.*\)"$/\1/p' "$versions")"
revision="${HYPERPOD_CLI_REVISION:-$pinned}"
dest="${1:-$here/build/sagemaker-hyperpod-cli}"

command -v git >/dev/null || { echo "error: git is not installed; install git, then rerun this script" >&2; exit 1; }
helm_help="install helm 3.8 or newer (it pulls cert-manager from an OCI registry): https://helm.sh/docs/intro/install/"
command -v helm >/dev/null || { echo "error: helm is not installed; $helm_help" >&2; exit 1; }
helm_version="$(helm version --template '{{.Version}}' 2>/dev/null || true)"
case "$helm_version" in
  v3.[0-7].*|v3.[0-7]|v2.*|v1.*) echo "error: helm is $helm_version; $helm_help" >&2; exit 1 ;;
esac
[ -n "$revision" ] || { echo "error: no revision found in $versions" >&2; exit 1; }

if [ ! -d "$dest/.git" ]; then
  git init --quiet "$dest"
  git -C "$dest" remote add origin "$repository"
fi
git -C "$dest" fetch --quiet --depth 1 origin "$revision"
git -C "$dest" checkout --quiet --force FETCH_HEAD
echo "checked out $repository at $(git -C "$dest" rev-parse HEAD)" >&2

chart="$dest/helm_chart/HyperPodHelmChart"
# Sub-charts first (deepest first), so each file:// dependency is packaged with its own dependencies.
while IFS= read -r chart_yaml; do
  dir="$(dirname "$chart_yaml")"
  if grep -q '^dependencies:' "$chart_yaml"; then
    echo "helm dependency build $dir" >&2
    helm dependency build "$dir" >&2
  fi
done < <(find "$chart/charts" -mindepth 2 -name Chart.yaml | awk -F/ '{print NF, $0}' | sort -rn | cut -d' ' -f2-)
echo "helm dependency build $chart" >&2
helm dependency build "$chart" >&2

ls "$chart"/charts/*.tgz >/dev/null 2>&1 || { echo "error: no charts/*.tgz after helm dependency build" >&2; exit 1; }
echo "$chart"
