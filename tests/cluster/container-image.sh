#!/bin/bash
# The test cluster's container image, for the podman row of tests/launchers/test_matrix.py: Debian bookworm
# (mmdebstrap, Debian's python3 3.11 like the venv) with torch (the CPU wheel on this machine) and
# hpcdist's own wheel, imported into podman as localhost/hpcdist-test:KEY. KEY hashes the wheel's
# contents, the torch wheel's name and this script: a changed hpcdist rebuilds, an unchanged one
# is reused (once per machine, so once per CI run).
#
#   tests/cluster/container-image.sh OUT_DIR
#
# Prints the image's name. Also writes OUT_DIR/containers.conf, podman's settings for this
# sandbox (runc with cgroupfs: crun refuses its cgroup layout; a modest open files' limit), which the test passes to the
# job as CONTAINERS_CONF. Needs root, podman, runc and mmdebstrap (tests/cluster/cluster.sh
# installs them), and Debian's mirror.
set -euo pipefail
out=${1:?usage: container-image.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
mkdir -p "$out"
cat >"$out/containers.conf" <<'EOF'
[containers]
# Podman raises the open files and processes limits past this sandbox's (setrlimit fails): modest ones.
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
export CONTAINERS_CONF="$out/containers.conf"

torch_wheel=$(ls /opt/wheels/torch-2.13.0+cpu-*cp311*.whl 2>/dev/null | head -n 1 || true)
torch=${torch_wheel:-torch==2.13.0}
work=$(mktemp -d /tmp/hpcdist-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$python" -m pip wheel --no-deps -q -w "$work/wheel" "$root" >&2
wheel=$(ls "$work"/wheel/*.whl)
# The wheel's contents, not its bytes (which hold the files' times).
key=$("$python" - "$wheel" "$torch" "$0" <<'EOF'
import hashlib, os, sys, zipfile
h = hashlib.sha256()
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in sorted(z.namelist()):
        h.update(name.encode() + b"\0" + z.read(name))
h.update(os.path.basename(sys.argv[2]).encode() + open(sys.argv[3], "rb").read())
print(h.hexdigest()[:12])
EOF
)
image=localhost/hpcdist-test:$key
if podman image exists "$image"; then
  echo "$image"
  exit 0
fi
start=$(date +%s)
rootfs=$work/rootfs
# libstdc++6 and libgomp1: torch's libraries need them; python-is-python3: `python` as in the venv.
mmdebstrap --quiet --variant=essential --include=python3,python-is-python3,libstdc++6,libgomp1 \
  bookworm "$rootfs" http://deb.debian.org/debian >&2
# pip of this machine, into the image's /usr/local (Debian's python reads dist-packages there).
"$python" -m pip install -q --root "$rootfs" --prefix /usr/local --ignore-installed --no-warn-script-location \
  "$torch" "$wheel" 2> >(grep -v "is ignored: it is neither" >&2)
lib=$rootfs/usr/local/lib/python3.11
if [ -d "$lib/site-packages" ]; then
  rmdir "$lib/dist-packages" 2>/dev/null || true
  if [ -e "$lib/dist-packages" ]; then cp -a "$lib/site-packages/." "$lib/dist-packages/"; rm -rf "$lib/site-packages"
  else mv "$lib/site-packages" "$lib/dist-packages"; fi
fi
sed -i '1s|^#!.*python.*$|#!/usr/bin/python3|' "$rootfs"/usr/local/bin/*
tar -C "$rootfs" -c . | podman import -q - "$image" >/dev/null
# Older builds of this image: only the newest is kept.
podman images --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/hpcdist-test:' | grep -v ":$key\$" \
  | xargs -r podman rmi -f >/dev/null 2>&1 || true
echo "container-image.sh: built $image in $(($(date +%s) - start)) s" >&2
echo "$image"
