#!/usr/bin/env bash
# Installs everything dtx needs on a fresh Debian machine and builds it. Idempotent: a second
# run installs nothing and only rebuilds what changed.
#   deploy/setup.sh            Debian packages, the project's virtual environment, the build
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libcpp-httplib-dev nlohmann-json3-dev libsqlite3-dev sqlite3 libspdlog-dev libyaml-cpp-dev
  libboost-dev libboost-filesystem-dev libgtest-dev libgmock-dev libcli11-dev prometheus-cpp-dev
  python3-venv python3-dev clang-format wrk curl
  libjs-chart.js libjs-highlight.js chromium chromium-driver
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The project's own Python environment (torch CPU build and triton come from wheels on disk).
PYTHON="${DTX_PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.requirements.sha
want="$(sha256sum requirements.txt | cut -d' ' -f1)"
if [[ ! -f $stamp || "$(cat $stamp)" != "$want" ]]; then
  echo "setup: installing Python packages"
  .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
  echo "$want" > "$stamp"
fi
# The dtx package (pyproject.toml, src/dtx), editable: the source tree is what .venv imports. No
# build isolation: the build tools come from .venv, which installs offline.
if ! .venv/bin/python -c "import dtx" 2>/dev/null; then
  echo "setup: installing the dtx package"
  .venv/bin/pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
fi

# Build (warnings are errors in CI).
werror=OFF; [[ "${CI:-}" == "true" ]] && werror=ON
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTX_WERROR=$werror >/dev/null
cmake --build build -j "$(nproc)"
