# Sourced by the H200 scripts once t0 and OUT are set: puts kda and kda-runner into build-gpu/.
# A cold build takes about 145 s of a device command's 600, so a command may hand its binaries to the
# next one: with KEEP_BIN=1 the build is also written to $OUT/kda-bin.tgz (stripped, with a digest of
# the sources it was built from); bring it back, put it in prebuilt/ (git-ignored, in .git/info/exclude)
# and carry prebuilt/ in the next command, which then unpacks it instead of building, but only when the
# digest still matches the sources there.
src_digest() { find src cmake CMakeLists.txt CMakePresets.json -type f -print0 | sort -z | xargs -0 md5sum | md5sum | cut -c1-32; }
export CC=/usr/bin/gcc CXX=/usr/bin/g++
digest=$(src_digest)
if [ -f prebuilt/kda-bin.tgz ] && [ "$(tar xzf prebuilt/kda-bin.tgz -O ./SOURCES 2> /dev/null)" = "$digest" ]; then
  mkdir -p build-gpu && tar xzf prebuilt/kda-bin.tgz -C build-gpu ./kda ./kda-runner
  echo "build: prebuilt binaries of sources $digest unpacked"
else
  [ -f prebuilt/kda-bin.tgz ] && echo "prebuilt/kda-bin.tgz was built from other sources: building"
  cmake --preset gpu -DKDA_BUILD_BENCH=OFF > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build --preset gpu -j 16 --target kda kda-runner > "$OUT/build.log" 2>&1 || { grep -m 20 -E "error" "$OUT/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s"
  if [ "${KEEP_BIN:-0}" = 1 ]; then
    bin=$(mktemp -d)
    cp build-gpu/kda build-gpu/kda-runner "$bin/" && strip "$bin/kda" "$bin/kda-runner" && echo "$digest" > "$bin/SOURCES"
    tar czf "$OUT/kda-bin.tgz" -C "$bin" ./kda ./kda-runner ./SOURCES && echo "kept: \$OUT/kda-bin.tgz ($(du -h "$OUT/kda-bin.tgz" | cut -f1))"
    rm -rf "$bin"
  fi
fi
