#!/usr/bin/env bash
# Runs every test of the workspace on a fresh Debian machine: installs what is missing
# (the file-system tools bob drives, Debian's chromium and chromedriver for the tests of
# the HTML site in a real browser, and the virtual-machine tools of scripts/setup-vm.sh),
# then `cargo test --workspace`. Needs root, because
# the tests bind loop devices and mount real images.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pair in mke2fs:e2fsprogs mkfs.xfs:xfsprogs mkfs.btrfs:btrfs-progs fusermount3:fuse3 sqlite3:sqlite3 chromium:chromium chromedriver:chromium-driver; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
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
