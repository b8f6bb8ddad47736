#!/usr/bin/env bash
# Installs the Debian 12 packages zkcoro needs to build, test and run its demo. Needs root.
# Skips apt-get entirely when everything is already installed.
set -euo pipefail
packages=(
  g++ meson ninja-build pkg-config
  libboost1.81-dev libzookeeper-st-dev libfmt-dev doctest-dev
  libcli11-dev nlohmann-json3-dev
  zookeeper default-jdk-headless libcurator-recipes-java
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
