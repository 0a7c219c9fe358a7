#!/bin/sh
# Install the deepbench harness, in the build stage of a platform's image (see its Dockerfile):
#   install-harness.sh deps [INDEX_URL]   # 1: the locked packages into /opt/deepbench
#   install-harness.sh package            # 2: deepbench itself into /opt/deepbench-harness
# /opt/deepbench is a virtual environment that sees the base image's own packages
# (--system-site-packages): a vendor image's PyTorch, built against its CUDA or ROCm, is used as
# it is. Step 1 installs /tmp/requirements.lock with --require-hashes: every file must be one the
# lock names, from the wheelhouse in /tmp/wheelhouse when it holds wheels (pip --no-index: no
# network, for air-gapped sites and the tests), else from the package index (+ INDEX_URL).
# Step 2 puts deepbench apart, in its own folder found through a .pth file, so that the final
# stage copies the dependencies and the harness as two layers: a change to the source leaves
# the dependency layer as it was.
set -eu
VENV=/opt/deepbench
HARNESS=/opt/deepbench-harness
LOCK=/tmp/requirements.lock
pip_venv() { python3 -m pip --python "$VENV/bin/python" --disable-pip-version-check "$@"; }
offline() { ls /tmp/wheelhouse/*.whl >/dev/null 2>&1; }

case "${1:-}" in
deps)
  INDEX="${2:-}"
  python3 -m venv --system-site-packages --without-pip "$VENV"
  # The system's pip installs into the venv (pip --python, pip >= 22.3): the venv needs no pip of its own.
  if offline; then
    echo "install-harness: the lock's packages from $(ls /tmp/wheelhouse/*.whl | wc -l) wheels, offline"
    pip_venv install --no-cache-dir --no-index --find-links /tmp/wheelhouse --require-hashes -r "$LOCK"
  else
    echo "install-harness: the lock's packages from the index${INDEX:+ and $INDEX}"
    pip_venv install --no-cache-dir ${INDEX:+--extra-index-url "$INDEX"} --require-hashes -r "$LOCK"
  fi
  echo "$HARNESS" > "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/deepbench-harness.pth"
  ;;
package)
  # Without dependencies (they are the lock's) and without network: built with the locked setuptools.
  pip_venv install --no-cache-dir --no-index --no-deps --no-build-isolation --target "$HARNESS" /tmp/deepbench-src
  "$VENV/bin/python" -c "import deepbench.kernels.harness, deepbench.kernels.catalog as c; print('install-harness: ok,', len(c.catalog()), 'kernels')"
  # setuptools only builds deepbench: it stays in the build stage (this leaves /opt/deepbench the
  # same whatever the source, so the final stage's copy of it is still the cached layer).
  pip_venv uninstall --yes setuptools
  ;;
*) echo "usage: install-harness.sh deps [INDEX_URL] | package" >&2; exit 2 ;;
esac
