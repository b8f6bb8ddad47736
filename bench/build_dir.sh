# Sourced by bench/scale.sh and bench/scale_curator.sh, from the project's root: sets `build`,
# the build directory they use ($BUILD_DIR, default build-rel), set up as a release build with
# the benchmarks (after installing what is missing) when it has no build.ninja yet.
build=${BUILD_DIR:-build-rel}
if [[ ! -f "$build/build.ninja" ]]; then
    bash scripts/install-deps.sh
    meson setup "$build" --buildtype=release -Dbench=true
fi
