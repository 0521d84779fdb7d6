#!/bin/bash
# HyperPod on-create lifecycle script for DPD worker nodes (EKS orchestrator), run as root once per
# node. It moves container images and kubelet data to the EBS volume HyperPod mounts at
# /opt/sagemaker: the vLLM worker image alone is tens of GB and the root volume is small.
# Output goes to /var/log/provision/provisioning.log, which HyperPod ships to CloudWatch.
set -euo pipefail

LOG=/var/log/provision/provisioning.log
mkdir -p "$(dirname "$LOG")"
exec > >(tee -a "$LOG") 2>&1

DATA_DISK=/opt/sagemaker

fail() {
  echo "[on_create] ERROR: $*"
  sleep 60  # let the log reach CloudWatch before HyperPod marks the node failed
  exit 1
}

echo "[on_create] start $(date -u +%FT%TZ)"

for _ in $(seq 1 60); do
  mountpoint -q "$DATA_DISK" && break
  sleep 1
done
if ! mountpoint -q "$DATA_DISK"; then
  echo "[on_create] $DATA_DISK is not mounted; keeping containerd and kubelet on the root volume"
  exit 0
fi

CONTAINERD_ROOT="$DATA_DISK/containerd/data-root"
mkdir -p "$CONTAINERD_ROOT"

# Amazon Linux 2 EKS AMIs template containerd's config here; Amazon Linux 2023 uses the plain path.
for config in /etc/eks/containerd/containerd-config.toml /etc/containerd/config.toml; do
  if [ -f "$config" ]; then
    if grep -q '^root = ' "$config"; then
      sed -i "s|^root = .*|root = \"$CONTAINERD_ROOT\"|" "$config"
    else
      sed -i "1i root = \"$CONTAINERD_ROOT\"" "$config"
    fi
    echo "[on_create] containerd root -> $CONTAINERD_ROOT in $config"
  fi
done

KUBELET_DIR="$DATA_DISK/kubelet"
if [ -d /var/lib/kubelet ] && [ ! -L /var/lib/kubelet ]; then
  mkdir -p "$KUBELET_DIR"
  cp -a /var/lib/kubelet/. "$KUBELET_DIR"/ || fail "copying /var/lib/kubelet"
  rm -rf /var/lib/kubelet
  ln -s "$KUBELET_DIR" /var/lib/kubelet
  echo "[on_create] /var/lib/kubelet -> $KUBELET_DIR"
fi

systemctl daemon-reload || true
if systemctl is-active --quiet containerd; then
  systemctl restart containerd || fail "restarting containerd"
fi

echo "[on_create] done $(date -u +%FT%TZ)"
