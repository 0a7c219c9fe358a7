#!/usr/bin/env bash
# Make a local Debian base image for building the deepbench images where no container registry
# can be reached (`FROM` an official vendor image cannot be pulled there). Needs root, debootstrap
# and a Debian mirror (apt's own). Built once: an image already present under NAME is kept.
#
#   images/tools/local-base.sh [NAME] [ARCH]      # defaults: deepbench-local/debian:bookworm amd64
#
# For ARM64 under emulation (qemu-user-static, binfmt-support): ARCH=arm64, NAME e.g.
# deepbench-local/debian:bookworm-arm64.
set -euo pipefail
NAME="${1:-deepbench-local/debian:bookworm}"
ARCH="${2:-amd64}"
SUITE=bookworm
PACKAGES=python3,python3-venv,python3-pip

if docker image inspect "$NAME" >/dev/null 2>&1; then
  echo "$NAME is already here"; exit 0
fi
ROOT="$(mktemp -d /tmp/deepbench-rootfs.XXXXXX)"
trap 'rm -rf "$ROOT"' EXIT
debootstrap --variant=minbase --arch="$ARCH" --include="$PACKAGES" "$SUITE" "$ROOT" >"$ROOT.log" 2>&1 \
  || { tail -20 "$ROOT.log"; exit 1; }
rm -f "$ROOT.log"
# Lock the apt lists and caches out of the image: they only add size.
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/*
tar -C "$ROOT" -c . | docker import --platform "linux/$ARCH" \
  --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$NAME" >/dev/null
# Docker 20.10 ignores import --platform: give the image its contents' architecture (set-image-arch.py says why).
[ "$ARCH" = amd64 ] || python3 "$(dirname "$0")/set-image-arch.py" "$NAME" "$ARCH" >/dev/null
echo "built $NAME"
