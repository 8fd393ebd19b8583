#!/usr/bin/env bash
# Installs dtx (`cmake --install`) into .gpu/dtx (ignored by git; carry it to the GPU machine),
# with the shared libraries of the Debian build that the GPU machine lacks in .gpu/dtx/lib
# (run there with LD_LIBRARY_PATH=.gpu/dtx/lib; tests/gpu/dtxd_explore.py sets it).
#   tests/gpu/prepare_dtxd.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${1:-build}"
rm -rf .gpu/dtx
cmake --install "$BUILD" --prefix .gpu/dtx --strip >/dev/null
mkdir -p .gpu/dtx/lib
for bin in .gpu/dtx/bin/dtxd .gpu/dtx/bin/dtx; do
  # Not the C and C++ runtimes: the GPU machine's are newer, and they must match its loader.
  ldd "$bin" | awk '/=> \// {print $3}' |
    grep -Ev '/lib(c|m|stdc\+\+|gcc_s|pthread|dl|rt)\.so' | xargs -r cp -Lu -t .gpu/dtx/lib
done
du -sh .gpu/dtx
