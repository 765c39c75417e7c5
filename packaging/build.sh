#!/usr/bin/env bash
# Build both artefacts (`make dist`):
#   dist/ragd-<version>-linux-<arch>.tar.gz        the one-directory program (the installer's payload)
#   dist/ragd-installer-<version>-linux-<arch>     the single-file installer that carries it
# Needs the build extra: .venv/bin/pip install -e '.[build]'. Takes about 1-2 minutes on 2 cores.
# The build's glibc is the oldest glibc the result runs on (recorded in the payload manifest): build on the
# oldest distribution you support.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY="$VENV/bin/python"
PYI="$VENV/bin/pyinstaller"
BUILD=build
[ -x "$PYI" ] || { echo "build.sh: $PYI missing: $VENV/bin/pip install -e '.[build]'" >&2; exit 2; }

start=$(date +%s)
rm -rf "$BUILD/dist" "$BUILD/payload"
# The OCR's cv2 from opencv-python-headless (packaging/opencv-headless.txt: hash-pinned), apart from the venv, whose
# opencv-python stays what rapidocr asks for by name (pip check); ragd.spec puts this folder first on the path.
OPENCV="$BUILD/opencv-headless"
if ! cmp -s packaging/opencv-headless.txt "$OPENCV/requirements.txt"; then
    echo "== opencv-python-headless"
    rm -rf "$OPENCV"
    "$PY" -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps --target "$OPENCV" \
        -r packaging/opencv-headless.txt
    cp packaging/opencv-headless.txt "$OPENCV/requirements.txt"
fi
echo "== program (one directory: ragd + ragctl)"
RAGD_OPENCV_DIR="$OPENCV" "$PYI" --noconfirm --log-level WARN --distpath "$BUILD/dist" --workpath "$BUILD/pyinstaller" packaging/ragd.spec

echo "== payload"
manifest=$("$PY" packaging/make_payload.py "$BUILD/dist/ragd" "$BUILD/payload" "$BUILD/ragd-payload.tar.gz")
echo "$manifest"
version=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["version"])' "$manifest")
plat=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["platform"])' "$manifest")

echo "== installer (one file)"
RAGD_PAYLOAD="$BUILD/ragd-payload.tar.gz" "$PYI" --noconfirm --log-level WARN --distpath "$BUILD/dist" \
    --workpath "$BUILD/pyinstaller" packaging/installer.spec

mkdir -p dist
installer="dist/ragd-installer-$version-$plat"
cp "$BUILD/dist/ragd-installer" "$installer"
cp "$BUILD/ragd-payload.tar.gz" "dist/ragd-$version-$plat.tar.gz"
echo "== done in $(( $(date +%s) - start )) s"
ls -l "$installer" "dist/ragd-$version-$plat.tar.gz"
du -sh "$BUILD/payload"
