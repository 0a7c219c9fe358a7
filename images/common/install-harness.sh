#!/bin/sh
# Install the deepbench harness into /opt/deepbench, a virtual environment that sees the base
# image's own packages (--system-site-packages): a vendor image's PyTorch, built against its
# CUDA or ROCm, is used as it is, and only the extras named are added.
# With wheels in /tmp/wheelhouse nothing is fetched from the network (pip --no-index): the way
# to build where no registry can be reached (air-gapped sites, the tests here).
#   install-harness.sh wheels                      # step 1: the wheelhouse (a layer cached apart)
#   install-harness.sh package EXTRAS [INDEX_URL]  # step 2: deepbench from /tmp/deepbench-src
set -eu
VENV=/opt/deepbench
[ -x "$VENV/bin/python" ] || python3 -m venv --system-site-packages --without-pip "$VENV"
# The system's pip installs into the venv (pip --python, pip >= 22.3): the venv needs no pip of its own.
pip_venv() { python3 -m pip --python "$VENV/bin/python" install --no-cache-dir --disable-pip-version-check "$@"; }
offline() { ls /tmp/wheelhouse/*.whl >/dev/null 2>&1; }

case "$1" in
wheels)
  if offline; then
    echo "install-harness: $(ls /tmp/wheelhouse/*.whl | wc -l) wheels from the wheelhouse, offline"
    pip_venv --no-index --find-links /tmp/wheelhouse /tmp/wheelhouse/*.whl
  fi ;;
package)
  EXTRAS="${2:-}"; INDEX="${3:-}"
  if offline; then
    SOURCE="--no-index --find-links /tmp/wheelhouse"
  else
    echo "install-harness: online${INDEX:+ (extra index $INDEX)}"
    SOURCE="${INDEX:+--extra-index-url $INDEX}"
  fi
  # The harness's own requirements and its extras' (requirements/*.txt, written by the runner
  # without the host-only libraries: terminal, Docker, workbooks, charts), then deepbench itself
  # without dependencies, so an image holds the harness and only what its platform uses.
  REQS=/tmp/deepbench-src/requirements
  set -- -r "$REQS/base.txt"
  for extra in $(echo "$EXTRAS" | tr ',' ' '); do
    [ -f "$REQS/$extra.txt" ] || { echo "install-harness: no extra '$extra' in $REQS" >&2; exit 2; }
    set -- "$@" -r "$REQS/$extra.txt"
  done
  pip_venv $SOURCE "$@"
  pip_venv $SOURCE --no-deps /tmp/deepbench-src
  "$VENV/bin/python" -c "import deepbench.kernels.harness, deepbench.kernels.catalog as c; print('install-harness: ok,', len(c.catalog()), 'kernels')"
  rm -rf /tmp/wheelhouse /tmp/deepbench-src ;;
*) echo "usage: install-harness.sh wheels | package EXTRAS [INDEX_URL]" >&2; exit 2 ;;
esac
