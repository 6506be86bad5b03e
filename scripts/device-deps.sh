#!/usr/bin/env bash
# Unpacks lina's header-only build dependencies (Debian packages) into
# .device-deps/ at the repository root, for a machine that cannot install
# packages itself: carry .device-deps there and configure with
#   -DCMAKE_PREFIX_PATH=$PWD/.device-deps/usr
# (scripts/device-check.sh does). Idempotent: a package already unpacked is
# skipped. Needs apt-get and dpkg-deb, not root (except for apt-get update
# when the package lists are missing).
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(libeigen3-dev doctest-dev nlohmann-json3-dev libcli11-dev)
deps=.device-deps
stamps=$deps/.unpacked   # one empty file per unpacked package, named pkg_version

missing=()
for p in "${packages[@]}"; do
  compgen -G "$stamps/${p}_*" >/dev/null || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "device-deps: already unpacked in $deps ($(du -sh "$deps" | cut -f1))"
  exit 0
fi

# apt-get download needs the package lists; fetch them once if absent.
for p in "${missing[@]}"; do
  if ! apt-cache show "$p" >/dev/null 2>&1; then
    SUDO=""
    [[ $(id -u) -ne 0 ]] && SUDO="sudo"
    $SUDO apt-get update -qq
    break
  fi
done

mkdir -p "$stamps"
debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
sandbox=()
[[ $(id -u) -eq 0 ]] && sandbox=(-o APT::Sandbox::User=root)   # no _apt user into a private folder
(cd "$debs" && apt-get download -qq "${sandbox[@]}" "${missing[@]}")
for deb in "$debs"/*.deb; do
  name=$(dpkg-deb -f "$deb" Package)
  version=$(dpkg-deb -f "$deb" Version)
  dpkg-deb -x "$deb" "$deps"
  touch "$stamps/${name}_${version//[:~+]/-}"
  echo "device-deps: unpacked $name $version"
done

# Docs and man pages are not needed to build.
rm -rf "$deps/usr/share/doc" "$deps/usr/share/man" "$deps/usr/share/lintian"

# Debian's doctest config names its prefix as the absolute /usr; make it
# relative to the config file (usr/lib/cmake/doctest) so that the unpacked
# headers are the ones used, wherever the folder lies.
targets=$deps/usr/lib/cmake/doctest/doctestTargets.cmake
if grep -q 'set(_IMPORT_PREFIX "/usr")' "$targets"; then
  sed -i 's|set(_IMPORT_PREFIX "/usr")|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)|' "$targets"
fi

echo "device-deps: $deps holds $(du -sh "$deps" | cut -f1); configure with -DCMAKE_PREFIX_PATH=\$PWD/$deps/usr"
