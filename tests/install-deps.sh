#!/usr/bin/env bash
# Installs the Debian packages layerstream builds and tests with, when missing.
# Used by tests/run.sh and examples/demo.sh. Needs root (or sudo) to install.
set -euo pipefail
PACKAGES=(cmake ninja-build g++ clang libclang-rt-dev pkg-config ccache liburing-dev libspdlog-dev libfmt-dev
          libcli11-dev nlohmann-json3-dev libcpp-httplib-dev python3-venv libgtest-dev libgmock-dev libbenchmark-dev fio)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# tests/run.sh builds the Python package in a virtual environment: venv and the headers.
python3 -c 'import ensurepip, os, sysconfig; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' \
  2>/dev/null || missing+=(python3-venv python3-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing missing packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
