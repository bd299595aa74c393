#!/bin/bash
# A slow shared file system for the test clusters: a Python environment served over sshfs from a
# file server behind a link with added latency (tc netem), as Lustre or GPFS feels to a node at
# scale (every stat and open a round trip to a busy metadata server).
#
#   tests/cluster/slowshare.sh up [SRC [DELAY_MS]]   share SRC (default: this clone's .venv); prints
#                                                   the environment's path on the share
#   tests/cluster/slowshare.sh mount-in PID         mount the share in process PID's mount namespace
#                                                   (an OpenPBS host's: its holder; openpbs.sh)
#   tests/cluster/slowshare.sh down                 unmount everywhere, stop the server, remove all
#   tests/cluster/slowshare.sh status
#
# Layout: the server is an sshd in the network namespace hpcdist-slowfs (10.215.0.2), reached from
# the root namespace over a veth pair (hpcsf0 10.215.0.1) with DELAY_MS (default 2) of netem delay
# each way. It serves a copy of SRC (hard links; the scripts of its bin/ rewritten to name the
# share's path, as if the environment had been made there) read-only. The sshfs client runs in the
# root network namespace and mounts at $MNT: the Slurm test cluster's nodes share the root mount
# namespace and see it; an OpenPBS host (a private mount namespace) gets its own client and mount
# by `mount-in`. Links are followed (sshfs refuses to read an absolute one, as bin/python3's); so
# the export has no lib64 -> lib, which would show as a second lib (packed and unpacked twice: 2.8
# GB where the venv is 1.4; nothing imports through it). Caching is off (attributes, entries,
# directories: each lookup goes to the server; FUSE drops a file's pages at every open), so every
# node's every import pays the round trips.
# Nothing here touches the clusters' own bridges, namespaces or daemons; `down` undoes everything.
# Needs root, sshfs (installed here with apt when missing), iproute2 and tc.
set -u -o pipefail

STATE=${HPCDIST_SLOWSHARE_DIR:-/tmp/hpcdist-slowshare}
NS=hpcdist-slowfs
HOST_IF=hpcsf0
NS_IF=hpcsf1
HOST_IP=10.215.0.1
SERVER_IP=10.215.0.2
MNT=$STATE/mnt
EXPORT=$STATE/export
HERE=$(cd "$(dirname "$0")" && pwd)

log() { echo "[slowshare] $*" >&2; }
die() { log "error: $*"; exit 1; }

install_sshfs() {
    command -v sshfs >/dev/null && return 0
    log "installing sshfs"
    exec 8>/tmp/hpcdist-apt.lock && flock 8
    DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q sshfs >"$STATE/apt.log" 2>&1 \
        || { DEBIAN_FRONTEND=noninteractive timeout 300 apt-get update -q >>"$STATE/apt.log" 2>&1 &&
             DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q sshfs >>"$STATE/apt.log" 2>&1; } \
        || die "apt-get install sshfs failed (see $STATE/apt.log)"
    [ -z "${HPCDIST_INSTALL_RECORD:-}" ] || echo "sshfs (apt, for tests/cluster/slowshare.sh)" >>"$HPCDIST_INSTALL_RECORD"
    exec 8>&-
}

# The copy the server exports: hard links to SRC, but the text files of bin/ that name SRC are
# rewritten (a new file each: the link to SRC's is broken, SRC stays as it was) to name the share.
make_export() {
    local src=$1 name dest f
    name=$(basename "$src"); name=${name#.}
    dest=$EXPORT/$name
    if [ ! -e "$dest/pyvenv.cfg" ] && [ ! -d "$dest/conda-meta" ]; then
        rm -rf "$dest.part"; mkdir -p "$EXPORT"
        cp -al "$src" "$dest.part" 2>/dev/null || cp -a "$src" "$dest.part" || die "cannot copy $src"
        [ -L "$dest.part/lib64" ] && rm -f "$dest.part/lib64"
        for f in "$dest.part"/bin/*; do
            # (its time kept: the environment's packed copy is named by its files' times, hpcdist.submission.stage)
            [ -f "$f" ] && [ ! -L "$f" ] && grep -qIF "$src" "$f" 2>/dev/null &&
                sed -i "s|$src|$MNT/$name|g" "$f" && touch -r "$src/bin/${f##*/}" "$f"
        done
        mv "$dest.part" "$dest"
    fi
    echo "$MNT/$name"
}

server_up() {
    local delay=$1
    mkdir -p "$STATE/ssh" /run/sshd
    [ -f "$STATE/ssh/key" ] || ssh-keygen -q -t ed25519 -N "" -f "$STATE/ssh/key"
    [ -f "$STATE/ssh/host_key" ] || ssh-keygen -q -t ed25519 -N "" -f "$STATE/ssh/host_key"
    cp "$STATE/ssh/key.pub" "$STATE/ssh/authorized_keys"
    cat >"$STATE/ssh/sshd_config" <<EOF
ListenAddress $SERVER_IP
Port 22
HostKey $STATE/ssh/host_key
AuthorizedKeysFile $STATE/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
UsePAM no
StrictModes no
PidFile $STATE/sshd.pid
Subsystem sftp internal-sftp
EOF
    if [ ! -e "/var/run/netns/$NS" ]; then
        ip netns add "$NS" || die "cannot create namespace $NS"
    fi
    if ! ip link show "$HOST_IF" >/dev/null 2>&1; then
        ip link add "$HOST_IF" type veth peer name "$NS_IF" || die "cannot create veth $HOST_IF"
        ip link set "$NS_IF" netns "$NS"
    fi
    ip addr replace "$HOST_IP/30" dev "$HOST_IF"; ip link set "$HOST_IF" up
    ip -n "$NS" addr replace "$SERVER_IP/30" dev "$NS_IF"; ip -n "$NS" link set "$NS_IF" up; ip -n "$NS" link set lo up
    # This machine's kernel may lack sch_netem (no modules: "Specified qdisc kind is unknown"): the
    # share is then slow by its lack of caching alone (every lookup a round trip over ssh), as said.
    if tc qdisc replace dev "$HOST_IF" root netem delay "${delay}ms" 2>/dev/null &&
       ip netns exec "$NS" tc qdisc replace dev "$NS_IF" root netem delay "${delay}ms" 2>/dev/null; then
        echo "netem ${delay}ms each way" >"$STATE/latency"
    else
        echo "none added: this kernel has no netem qdisc" >"$STATE/latency"
        log "no netem in this kernel: no latency added; each lookup is still a round trip over ssh"
    fi
    if ! { [ -s "$STATE/sshd.pid" ] && kill -0 "$(cat "$STATE/sshd.pid")" 2>/dev/null; }; then
        nsenter --net="/var/run/netns/$NS" /usr/sbin/sshd -f "$STATE/ssh/sshd_config" -E "$STATE/sshd.log" \
            || die "the share's sshd did not start (see $STATE/sshd.log)"
    fi
}

sshfs_words() {
    echo sshfs -o ro,allow_other,default_permissions,reconnect,follow_symlinks,dir_cache=no,attr_timeout=0,entry_timeout=0 \
        -o negative_timeout=0,IdentityFile="$STATE/ssh/key",StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null \
        -o LogLevel=ERROR "root@$SERVER_IP:$EXPORT" "$MNT"
}

do_mount() {  # in this mount namespace
    mkdir -p "$MNT"
    mountpoint -q "$MNT" && return 0
    local i
    for i in 1 2 3 4 5; do
        # shellcheck disable=SC2046
        $(sshfs_words) && return 0
        sleep 1
    done
    die "sshfs to $SERVER_IP failed"
}

case "${1:-}" in
up)
    [ "$(id -u)" = 0 ] || die "must run as root"
    src=$(cd "${2:-$HERE/../../.venv}" && pwd) || die "no environment ${2:-.venv}"
    mkdir -p "$STATE"
    install_sshfs
    path=$(make_export "$src")
    server_up "${3:-2}"
    do_mount
    [ -x "$path/bin/python" ] || die "the share does not show $path/bin/python"
    echo "$path"
    ;;
mount-in)
    pid=${2:?usage: slowshare.sh mount-in PID}
    # The mount namespace of PID, this network namespace (the server's link is here).
    nsenter -t "$pid" -m -- "$0" mount-here || die "cannot mount the share in process $pid's namespace"
    echo "$pid" >>"$STATE/mounted-in"
    ;;
mount-here)
    do_mount
    ;;
down)
    if [ -f "$STATE/mounted-in" ]; then
        while read -r pid; do
            nsenter -t "$pid" -m -- umount -l "$MNT" 2>/dev/null || true
        done <"$STATE/mounted-in"
        rm -f "$STATE/mounted-in"
    fi
    mountpoint -q "$MNT" 2>/dev/null && { fusermount -u "$MNT" 2>/dev/null || umount -l "$MNT"; }
    # sshfs's ssh can outlive its mount once the server is gone: those with this share's key, only.
    for pid in $(pgrep -f -- "-oIdentityFile=$STATE/ssh/key" 2>/dev/null); do kill "$pid" 2>/dev/null; done
    [ -s "$STATE/sshd.pid" ] && kill "$(cat "$STATE/sshd.pid")" 2>/dev/null
    rm -f "$STATE/sshd.pid"
    ip link del "$HOST_IF" 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$EXPORT"
    ;;
status)
    mountpoint "$MNT" 2>&1; cat "$STATE/latency" 2>/dev/null; ip netns list | grep -w "$NS" || echo "no $NS"
    ;;
*)
    sed -n '2,14p' "$0"; exit 2
    ;;
esac
