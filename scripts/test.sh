#!/usr/bin/env bash
# Runs every test of the workspace on a fresh Debian machine: installs what is missing
# (the file-system tools bob drives, xmllint for the JUnit schema test, Debian's chromium
# and chromedriver for the tests of the HTML site in a real browser, podman, runc and
# mmdebstrap for the tests of bob's container image, and the virtual-machine tools of
# scripts/setup-vm.sh), then `cargo test --workspace`. Needs root, because the tests bind
# loop devices and mount real images.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
# PROGRAM:PACKAGE, a program on PATH or an absolute path. runc is named so that apt does
# not bring crun with podman (docs/container.md); catatonit is the pause process of the
# pods `podman kube play` makes.
for pair in mke2fs:e2fsprogs mkfs.xfs:xfsprogs mkfs.btrfs:btrfs-progs fusermount3:fuse3 \
  sqlite3:sqlite3 xmllint:libxml2-utils chromium:chromium chromedriver:chromium-driver \
  podman:podman buildah:buildah runc:runc mmdebstrap:mmdebstrap \
  /usr/libexec/podman/catatonit:catatonit; do
  program=${pair%%:*}
  if [ "${program:0:1}" = / ]; then
    [ -e "$program" ] || need+=("${pair#*:}")
  else
    command -v "$program" >/dev/null 2>&1 || need+=("${pair#*:}")
  fi
done
# scripts/container.sh installs the Kubernetes schema validator in a venv.
python3 -c 'import ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: the tests mount real images and need root; run it with sudo" >&2
  exit 2
fi
# Other kernels in a virtual machine (qemu, virtme-ng, the tools of f2fs, nilfs2, jfs and
# reiserfs); bob fetches Debian's kernels into its cache on first use.
bash scripts/setup-vm.sh
exec cargo test --workspace "$@"
