#!/usr/bin/env bash
# Make a local Debian base image for building the deepbench images where no container registry
# can be reached (`FROM` an official vendor image cannot be pulled there). Needs root, debootstrap
# and a Debian mirror (apt's own). Built once: an image already present under NAME is kept.
#
#   images/tools/local-base.sh [NAME] [ARCH]      # defaults: deepbench-local/debian:bookworm amd64
#
# For ARM64 under emulation (qemu-user-static, binfmt-support): the second argument arm64, e.g.
#   images/tools/local-base.sh deepbench-local/debian:bookworm-arm64 arm64
# (the architecture is read from the arguments only: an ARCH variable in the environment is not used).
#
# The new root is removed on every exit, but never while anything is mounted inside it: debootstrap
# mounts proc and sys there, and when it fails (a fork limit under load, say) it can leave them
# mounted; a recursive delete would then walk into the host's /proc, or through a bind mount into
# host files. So every mount under the root is unmounted first (deepest first), the delete stays
# on the root's own filesystem (rm --one-file-system), and if a mount cannot be undone the root is
# left in place with a line saying so.
set -euo pipefail
NAME="${1:-deepbench-local/debian:bookworm}"
ARCH="${2:-amd64}"
SUITE=bookworm
PACKAGES=python3,python3-venv,python3-pip

if docker image inspect "$NAME" >/dev/null 2>&1; then
  echo "$NAME is already here"; exit 0
fi

# Mount points at or under $1, deepest first (from /proc/self/mountinfo; octal escapes such as \040 decoded).
mounts_under() {
  awk -v root="$1" '{ p = $5; gsub(/\\040/, " ", p); gsub(/\\011/, "\t", p); gsub(/\\012/, "\n", p); gsub(/\\134/, "\\", p)
                      if (p == root || index(p, root "/") == 1) print length(p) "\t" p }' /proc/self/mountinfo \
    | sort -rn | cut -f2-
}

cleanup() {
  local status=$? mount left
  trap - EXIT INT TERM
  if [ -n "${ROOT:-}" ] && [ -d "$ROOT" ]; then
    while IFS= read -r mount; do
      [ -n "$mount" ] && { umount "$mount" 2>/dev/null || umount --lazy "$mount" 2>/dev/null || true; }
    done < <(mounts_under "$ROOT")
    left="$(mounts_under "$ROOT")"
    if [ -n "$left" ]; then
      echo "local-base.sh: not deleting $ROOT: still mounted there: $(echo "$left" | tr '\n' ' ')(unmount them, then rm -r --one-file-system $ROOT)" >&2
      [ "$status" -ne 0 ] || status=1
    else
      rm -rf --one-file-system "$ROOT"
    fi
  fi
  [ -z "${ROOT:-}" ] || rm -f "$ROOT.log"
  exit "$status"
}

ROOT="$(realpath "$(mktemp -d /tmp/deepbench-rootfs.XXXXXX)")"  # as /proc/self/mountinfo names it
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
debootstrap --variant=minbase --arch="$ARCH" --include="$PACKAGES" "$SUITE" "$ROOT" >"$ROOT.log" 2>&1 \
  || { tail -20 "$ROOT.log"; exit 1; }
# Nothing may stay mounted in the root that becomes the image (tar would read the host's /proc).
[ -z "$(mounts_under "$ROOT")" ] || { echo "local-base.sh: debootstrap left mounts in $ROOT" >&2; exit 1; }
# Leave the apt lists and caches out of the image: they only add size.
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/*
tar -C "$ROOT" --one-file-system -c . | docker import --platform "linux/$ARCH" \
  --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$NAME" >/dev/null
# Docker 20.10 ignores import --platform: give the image its contents' architecture (set-image-arch.py says why).
[ "$ARCH" = amd64 ] || python3 "$(dirname "$0")/set-image-arch.py" "$NAME" "$ARCH" >/dev/null
echo "built $NAME"
