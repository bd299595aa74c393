#!/bin/bash
# A real multi-host Slurm (+ PBS personality) cluster on this one machine.
#
#   tests/cluster/cluster.sh up [N]     bring up N nodes (default 2, max 4); idempotent
#   tests/cluster/cluster.sh down       stop everything this script started, remove
#                                       namespaces, bridge and /etc/hosts lines
#   tests/cluster/cluster.sh status     node states
#   tests/cluster/cluster.sh run CMD..  run CMD on the head with the cluster's environment
#   tests/cluster/cluster.sh on NODE CMD..  run CMD inside NODE (its network + host name)
#   tests/cluster/cluster.sh env        path of the env file (source it to use the cluster)
#   tests/cluster/cluster.sh ctld-stop  stop slurmctld only (the controller-down tests); jobs run on
#   tests/cluster/cluster.sh ctld-start start it again and wait until it answers
#
# Layout: the "head" is the root network namespace (bridge address 10.213.0.1,
# slurmctld in its own UTS namespace with host name "head"); node1..nodeN are
# network namespaces hpcdist-nodeK on the bridge (10.213.0.1K), each with its
# own host name (UTS namespace), one slurmd and one sshd.  The filesystem is
# shared.  Namespaces get no default route: nothing can leave the bridge.
#
# Needs root, iproute2, nsenter/unshare (util-linux).  Everything the script
# starts records a pid file under the state dir; `down` stops exactly those
# processes (plus whatever still runs inside its own node namespaces).
set -u -o pipefail

STATE=${HPCDIST_CLUSTER_DIR:-/tmp/hpcdist-cluster}
BRIDGE=${HPCDIST_CLUSTER_BRIDGE:-hpcbr0}
NET=${HPCDIST_CLUSTER_NET:-10.213.0}          # a /24; head is .1, nodeK is .1K
HEAD_IP=$NET.1
NS_PREFIX=hpcdist-
TAG="# hpcdist-cluster"
CTLD_PORT=${HPCDIST_CLUSTER_CTLD_PORT:-16817}
SLURMD_PORT=${HPCDIST_CLUSTER_SLURMD_PORT:-16818}
WAIT_S=${HPCDIST_CLUSTER_WAIT:-60}
HERE=$(cd "$(dirname "$0")" && pwd)
# What the test hosts need (and the OpenPBS cluster, and the container rows): one list for all.
PACKAGES=$(sed 's/#.*//' "$HERE/packages.txt")

log() { echo "[cluster] $*" >&2; }
die() { log "error: $*"; exit 1; }

node_ip() { echo "$NET.1$1"; }
ns_name() { echo "${NS_PREFIX}node$1"; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }

# ---------------------------------------------------------------- packages
install_packages() {
    local missing="" p
    for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    log "installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    # The OpenPBS cluster (tests/openpbs.py) may install its packages at the same time, from the
    # other test process: apt takes one at a time, so each waits for this lock.
    exec 8>/tmp/hpcdist-apt.lock && flock 8
    timeout 300 apt-get update -q >"$STATE/log/apt.log" 2>&1 || die "apt-get update failed (see $STATE/log/apt.log)"
    # shellcheck disable=SC2086
    timeout 600 apt-get install -y -q --no-install-recommends $missing >>"$STATE/log/apt.log" 2>&1 \
        || die "apt-get install failed (see $STATE/log/apt.log)"
    exec 8>&-
    # For the test command's closing summary (tests/conftest.py), when it asked for one.
    if [ -n "${HPCDIST_INSTALL_RECORD:-}" ]; then
        echo "tests/cluster/cluster.sh (the test cluster): apt-get install$missing (system-wide)" >>"$HPCDIST_INSTALL_RECORD"
    fi
}

# ---------------------------------------------------------------- helpers
pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
# a pid file counts only while its pid still is one of our daemons (not a reused pid)
our_daemon() { [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qE '(^|/)(slurmctld|slurmd|sshd|munged)( |:|$)|^sshd:|slurmscriptd'; }
pidfile_alive() { [ -s "$1" ] && pid_alive "$(cat "$1")" && our_daemon "$(cat "$1")"; }
# wait_pidfile FILE: up to 10 s for a daemon to write its pid file
wait_pidfile() {
    local i
    for i in $(seq 100); do pidfile_alive "$1" && return 0; sleep 0.1; done
    return 1
}

# stop_pid PID NAME: TERM, wait up to 10 s, then KILL
stop_pid() {
    local pid=$1 name=$2 i
    pid_alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null
    for i in $(seq 50); do pid_alive "$pid" || return 0; sleep 0.2; done
    log "$name ($pid) ignored TERM; killing"
    kill -KILL "$pid" 2>/dev/null
    for i in $(seq 25); do pid_alive "$pid" || return 0; sleep 0.2; done
}

stop_pidfile() {
    local f=$1 pid
    [ -s "$f" ] || { rm -f "$f"; return 0; }
    pid=$(cat "$f")
    # only stop the process if it still is the daemon the file names
    if pidfile_alive "$f"; then stop_pid "$pid" "$(basename "$f" .pid)"; fi
    rm -f "$f"
}

# the nodes that exist now (namespaces we created)
existing_nodes() {
    ip netns list 2>/dev/null | awk '{print $1}' | sed -n "s/^${NS_PREFIX}node\([0-9]\+\)$/\1/p" | sort -n
}

write_env() {
    cat >"$STATE/env" <<EOF
# source me: the environment of a client of the hpcdist test cluster
export SLURM_CONF=$STATE/slurm.conf
export PATH=$STATE/bin:\$PATH
export PDSH_RCMD_TYPE=ssh
export HPCDIST_CLUSTER_DIR=$STATE
export HPCDIST_CLUSTER_NODES="$(seq -s' ' -f 'node%g' 1 "$1")"
EOF
}

# ---------------------------------------------------------------- config
write_configs() {
    local n=$1 k
    mkdir -p "$STATE"/{bin,run,log,ctld,spool,ssh,pbs,munge}
    chmod 1777 "$STATE/pbs"

    # munge: our own daemon, key and socket (nothing shared with a system munged)
    chown munge:munge "$STATE/munge"; chmod 0755 "$STATE/munge"
    if [ ! -s "$STATE/munge/munge.key" ]; then
        dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
    fi
    chown munge:munge "$STATE/munge/munge.key"; chmod 0400 "$STATE/munge/munge.key"

    # ssh: one key for root login, host key shared by all nodes, client config
    [ -s "$STATE/ssh/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C hpcdist-cluster -f "$STATE/ssh/id_ed25519"
    [ -s "$STATE/ssh/host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -C hpcdist-cluster-host -f "$STATE/ssh/host_ed25519_key"
    cp "$STATE/ssh/id_ed25519.pub" "$STATE/ssh/authorized_keys"; chmod 600 "$STATE/ssh/authorized_keys"
    cat >"$STATE/ssh/config" <<EOF
Host head node1 node2 node3 node4 $NET.*
    User root
    IdentityFile $STATE/ssh/id_ed25519
    IdentitiesOnly yes
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
    BatchMode yes
    ConnectTimeout 5
EOF
    # every ssh the cluster's clients run (pdsh, mpirun, deepspeed) picks the config up
    cat >"$STATE/bin/ssh" <<EOF
#!/bin/sh
exec /usr/bin/ssh -F $STATE/ssh/config "\$@"
EOF
    chmod 755 "$STATE/bin/ssh"
    for k in $(seq "$n"); do
        cat >"$STATE/ssh/sshd_config.node$k" <<EOF
Port 22
ListenAddress $(node_ip "$k")
HostKey $STATE/ssh/host_ed25519_key
PidFile $STATE/run/sshd-node$k.pid
PermitRootLogin prohibit-password
AuthorizedKeysFile $STATE/ssh/authorized_keys
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
X11Forwarding no
PrintMotd no
AcceptEnv LANG LC_*
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
    done

    # PBS personality: what a PBS mom exports, for every task of a job
    cat >"$STATE/task_prolog.sh" <<EOF
#!/bin/sh
# Slurm TaskProlog: stdout lines "export NAME=value" land in the task's environment.
nf=$STATE/pbs/nodefile.\$SLURM_JOB_ID
if [ ! -s "\$nf" ] && [ -n "\${SLURM_JOB_NODELIST:-}" ]; then
    tmp=\$(SLURM_NODELIST=\$SLURM_JOB_NODELIST SLURM_TASKS_PER_NODE=\${SLURM_TASKS_PER_NODE:-1} SLURM_CONF=$STATE/slurm.conf generate_pbs_nodefile 2>/dev/null) \\
        && mv -f "\$tmp" "\$nf" 2>/dev/null && chmod 644 "\$nf"
fi
echo "export PBS_NODEFILE=\$nf"
if [ -n "\${SLURM_ARRAY_TASK_ID:-}" ]; then
    # A subjob of an array (qsub -t), as a Torque mom names it: 123[4], its index in PBS_ARRAYID
    # (TORQUE Administrator Guide, "Job arrays"; the server part is left out, as for a job's own id).
    echo "export PBS_JOBID=\$SLURM_ARRAY_JOB_ID[\$SLURM_ARRAY_TASK_ID]"
    echo "export PBS_ARRAYID=\$SLURM_ARRAY_TASK_ID"
else
    echo "export PBS_JOBID=\$SLURM_JOB_ID"
fi
echo "export PBS_O_WORKDIR=\${SLURM_SUBMIT_DIR:-\$PWD}"
echo "export PBS_JOBNAME=\${SLURM_JOB_NAME:-job}"
echo "export PBS_NUM_NODES=\${SLURM_JOB_NUM_NODES:-1}"
[ -s "\$nf" ] && echo "export PBS_NP=\$(wc -l < "\$nf")"
echo "export PBS_ENVIRONMENT=PBS_BATCH"
EOF
    chmod 755 "$STATE/task_prolog.sh"

    {
        cat <<EOF
# generated by tests/cluster/cluster.sh
ClusterName=hpcdist
SlurmctldHost=head($HEAD_IP)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
# cred_expire: also how long a requeued job waits before it may start again (default 120 s;
# starting it sooner fails with "Job credential revoked"): 30 s keeps the requeue tests short.
AuthInfo=socket=$STATE/munge/munge.socket,cred_expire=30
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# A requeued job becomes startable with no event to wake the scheduler: look every 5 s, not 30.
SchedulerParameters=bf_interval=5
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=600
TaskProlog=$STATE/task_prolog.sh
EOF
        for k in $(seq "$n"); do
            echo "NodeName=node$k NodeAddr=$(node_ip "$k") CPUs=2 State=UNKNOWN"
        done
        echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
    } >"$STATE/slurm.conf"
    : >"$STATE/cgroup.conf"   # unused (task/none, proctrack/linuxproc); avoids a missing-file warning
    write_env "$n"
}

# PBS's pbsdsh and HPE Cray PALS's mpiexec, which cannot be installed here: stand-ins (each
# one's header says what it does and what not). pbsdsh is on the cluster's PATH, as PBS puts it;
# the PALS mpiexec in a folder of its own (Open MPI's mpiexec stays what `mpiexec` runs), which
# the tests name with --mpiexec. Installed on every `up`, also to a cluster already up.
install_stand_ins() {
    mkdir -p "$STATE/bin" "$STATE/pals"
    install -m 755 "$HERE/pbsdsh" "$STATE/bin/pbsdsh"
    install -m 755 "$HERE/pals-mpiexec" "$STATE/pals/mpiexec"
}

# ---------------------------------------------------------------- network
net_up() {
    local n=$1 k ns ip
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link add "$BRIDGE" type bridge || die "cannot create bridge $BRIDGE"
    fi
    ip addr replace "$HEAD_IP/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    for k in $(seq "$n"); do
        ns=$(ns_name "$k"); ip=$(node_ip "$k")
        ip netns list | awk '{print $1}' | grep -qx "$ns" || ip netns add "$ns" || die "cannot create namespace $ns"
        if ! ip link show "hpcv$k" >/dev/null 2>&1; then
            ip link add "hpcv$k" type veth peer name "hpcp$k" || die "cannot create veth for node$k"
            ip link set "hpcp$k" netns "$ns"
            ip -n "$ns" link set "hpcp$k" name eth0
        fi
        ip link set "hpcv$k" master "$BRIDGE"
        ip link set "hpcv$k" up
        ip -n "$ns" link set lo up
        ip -n "$ns" addr replace "$ip/24" dev eth0
        ip -n "$ns" link set eth0 up
    done
    hosts_add "$n"
}

hosts_add() {
    local n=$1 k
    hosts_remove
    {
        echo "$HEAD_IP head $TAG"
        for k in $(seq "$n"); do echo "$(node_ip "$k") node$k $TAG"; done
    } >>/etc/hosts
}

hosts_remove() {
    grep -qF "$TAG" /etc/hosts 2>/dev/null || return 0
    local tmp; tmp=$(mktemp)
    grep -vF "$TAG" /etc/hosts >"$tmp"
    cat "$tmp" >/etc/hosts     # rewrite in place: /etc/hosts may be a bind mount
    rm -f "$tmp"
}

# run in node K: its network namespace, a fresh UTS namespace named nodeK
in_node() {
    local k=$1; shift
    nsenter --net="/var/run/netns/$(ns_name "$k")" unshare --uts sh -c 'hostname "$0"; exec "$@"' "node$k" "$@"
}

# ---------------------------------------------------------------- daemons
start_munge() {
    if pidfile_alive "$STATE/run/munged.pid"; then return 0; fi
    rm -f "$STATE/munge/munge.socket" "$STATE/munge/munge.socket.lock"
    # munged writes its pid file itself (as user munge): keep it in the munge dir
    su -s /bin/sh munge -c "munged --socket=$STATE/munge/munge.socket --key-file=$STATE/munge/munge.key \
        --pid-file=$STATE/munge/munged.pid --log-file=$STATE/munge/munged.log \
        --seed-file=$STATE/munge/munged.seed" || die "munged failed (see $STATE/munge/munged.log)"
    local i
    for i in $(seq 50); do [ -s "$STATE/munge/munged.pid" ] && break; sleep 0.1; done
    cp "$STATE/munge/munged.pid" "$STATE/run/munged.pid"
    munge -S "$STATE/munge/munge.socket" -n | unmunge -S "$STATE/munge/munge.socket" >/dev/null \
        || die "munge self-test failed"
}

start_slurmctld() {
    pidfile_alive "$STATE/run/slurmctld.pid" && return 0
    SLURM_CONF=$STATE/slurm.conf unshare --uts sh -c 'hostname head; exec slurmctld -i' \
        >>"$STATE/log/slurmctld.stdout" 2>&1 || die "slurmctld failed (see $STATE/log/slurmctld.log)"
    wait_pidfile "$STATE/run/slurmctld.pid" || die "slurmctld did not start (see $STATE/log/slurmctld.log)"
}

start_node() {
    local k=$1
    mkdir -p "$STATE/spool/node$k"
    if ! pidfile_alive "$STATE/run/slurmd-node$k.pid"; then
        SLURM_CONF=$STATE/slurm.conf in_node "$k" slurmd -N "node$k" \
            >>"$STATE/log/slurmd-node$k.stdout" 2>&1 || die "slurmd on node$k failed (see $STATE/log/slurmd-node$k.log)"
        wait_pidfile "$STATE/run/slurmd-node$k.pid" || die "slurmd on node$k did not start (see $STATE/log/slurmd-node$k.log)"
    fi
    if ! pidfile_alive "$STATE/run/sshd-node$k.pid"; then
        in_node "$k" /usr/sbin/sshd -f "$STATE/ssh/sshd_config.node$k" -E "$STATE/log/sshd-node$k.log" \
            || die "sshd on node$k failed (see $STATE/log/sshd-node$k.log)"
    fi
}

# ---------------------------------------------------------------- health
node_states() { SLURM_CONF=$STATE/slurm.conf timeout 10 sinfo -h -N -o '%N %t' 2>/dev/null | sort -u; }

healthy() {
    local n k
    [ -s "$STATE/nodes" ] || return 1
    n=$(cat "$STATE/nodes")
    pidfile_alive "$STATE/run/munged.pid" || return 1
    pidfile_alive "$STATE/run/slurmctld.pid" || return 1
    for k in $(seq "$n"); do
        pidfile_alive "$STATE/run/slurmd-node$k.pid" || return 1
        pidfile_alive "$STATE/run/sshd-node$k.pid" || return 1
    done
    [ "$(node_states | awk '$2 ~ /^(idle|mix|alloc)$/' | wc -l)" = "$n" ]
}

wait_idle() {
    local n=$1 deadline=$((SECONDS + WAIT_S)) k
    while [ $SECONDS -lt $deadline ]; do
        # a daemon that died will not come back: fail now, not at the deadline
        if ! pidfile_alive "$STATE/run/slurmctld.pid"; then
            log "slurmctld is not running:"; tail -n 3 "$STATE/log/slurmctld.log" >&2; return 1
        fi
        for k in $(seq "$n"); do
            if ! pidfile_alive "$STATE/run/slurmd-node$k.pid"; then
                log "slurmd on node$k is not running:"; tail -n 3 "$STATE/log/slurmd-node$k.log" >&2; return 1
            fi
        done
        [ "$(node_states | awk '$2 == "idle"' | wc -l)" = "$n" ] && return 0
        sleep 0.5
    done
    log "nodes not idle after ${WAIT_S}s:"; node_states >&2
    return 1
}

# ---------------------------------------------------------------- commands
cmd_up() {
    need_root
    local n=${1:-2}
    case $n in 1|2|3|4) ;; *) die "node count must be 1..4 (got $n)";; esac
    if [ -s "$STATE/nodes" ]; then
        if [ "$(cat "$STATE/nodes")" = "$n" ] && healthy; then
            install_stand_ins
            log "already up ($n nodes)"; return 0
        fi
        log "existing cluster is unhealthy or has another size: tearing it down first"
        cmd_down
    fi
    local t0=$SECONDS k
    mkdir -p "$STATE/log"
    install_packages
    for c in slurmctld slurmd sshd munged nsenter unshare ip; do
        command -v "$c" >/dev/null || [ -x "/usr/sbin/$c" ] || die "missing command: $c"
    done
    mkdir -p /run/sshd; chmod 0755 /run/sshd     # sshd's privilege separation dir
    rm -rf "$STATE/ctld" "$STATE/spool" "$STATE/pbs"
    echo "$n" >"$STATE/nodes"     # written first: `down` after a failed `up` knows what to remove
    write_configs "$n"
    install_stand_ins
    net_up "$n"
    start_munge
    start_slurmctld
    for k in $(seq "$n"); do start_node "$k"; done
    if ! wait_idle "$n"; then
        log "see logs in $STATE/log"; exit 1
    fi
    log "up: $n nodes in $((SECONDS - t0)) s; env file $STATE/env"
    node_states
}

cmd_down() {
    need_root
    local k ns pids nodes f
    # 1. ask the controller to stop itself and every slurmd (bounded)
    if pidfile_alive "$STATE/run/slurmctld.pid"; then
        SLURM_CONF=$STATE/slurm.conf timeout 10 scontrol shutdown >/dev/null 2>&1 || true
        for k in $(seq 50); do pidfile_alive "$STATE/run/slurmctld.pid" || break; sleep 0.2; done
    fi
    # 2. every daemon we started, by pid file: TERM them all, then wait (bounded) for each
    pids=""
    for f in "$STATE"/run/slurmd-node*.pid "$STATE"/run/sshd-node*.pid "$STATE/run/slurmctld.pid"; do
        pidfile_alive "$f" && { pids="$pids $(cat "$f")"; kill -TERM "$(cat "$f")" 2>/dev/null; }
        rm -f "$f"
    done
    for f in $pids; do stop_pid "$f" "daemon"; done
    # 3. whatever still runs inside our node namespaces (job steps, ssh sessions), then the namespaces
    nodes=$(existing_nodes)
    for k in $nodes; do
        ns=$(ns_name "$k")
        pids=$(ip netns pids "$ns" 2>/dev/null)
        if [ -n "$pids" ]; then
            # shellcheck disable=SC2086
            kill -TERM $pids 2>/dev/null
            for f in $(seq 25); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.2; done
            pids=$(ip netns pids "$ns" 2>/dev/null)
            # shellcheck disable=SC2086
            [ -n "$pids" ] && kill -KILL $pids 2>/dev/null && sleep 0.5
        fi
        ip netns del "$ns" 2>/dev/null || log "could not delete namespace $ns"
    done
    for k in 1 2 3 4; do ip link del "hpcv$k" 2>/dev/null; done
    ip link del "$BRIDGE" 2>/dev/null
    hosts_remove
    # 4. munge last (slurm needs it to shut down cleanly)
    [ -e "$STATE/run/munged.pid" ] && stop_pidfile "$STATE/run/munged.pid"
    rm -f "$STATE/munge/munged.pid" "$STATE/munge/munge.socket" "$STATE/munge/munge.socket.lock" "$STATE/nodes"
    return 0
}

cmd_status() {
    if [ ! -s "$STATE/nodes" ]; then echo "down"; return 1; fi
    if healthy; then echo "up ($(cat "$STATE/nodes") nodes)"; else echo "unhealthy"; fi
    SLURM_CONF=$STATE/slurm.conf timeout 10 sinfo -N -o '%N %t %c %P' 2>&1
}

# The controller alone, for the tests of a controller that is down: slurmctld saves its
# state on TERM, and `slurmctld -i` reads it back, so running jobs survive the gap.
cmd_ctld_stop() {
    need_root
    [ -s "$STATE/nodes" ] || die "cluster not up"
    stop_pidfile "$STATE/run/slurmctld.pid"
}

cmd_ctld_start() {
    need_root
    [ -s "$STATE/nodes" ] || die "cluster not up"
    start_slurmctld
    local deadline=$((SECONDS + WAIT_S))
    while [ $SECONDS -lt $deadline ]; do
        SLURM_CONF=$STATE/slurm.conf timeout 10 squeue -h >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    die "slurmctld does not answer after ${WAIT_S}s (see $STATE/log/slurmctld.log)"
}

cmd_run() {
    [ -s "$STATE/env" ] || die "cluster not set up (no $STATE/env)"
    # shellcheck disable=SC1091
    . "$STATE/env"
    exec "$@"
}

cmd_on() {
    local node=${1:?usage: on NODE CMD...}; shift
    local k=${node#node}
    [ -e "/var/run/netns/$(ns_name "$k")" ] || die "no such node: $node"
    # shellcheck disable=SC1091
    . "$STATE/env"
    in_node "$k" "$@"
}

case ${1:-} in
    up) shift; cmd_up "$@" ;;
    down) cmd_down ;;
    status) cmd_status ;;
    run) shift; cmd_run "$@" ;;
    on) shift; cmd_on "$@" ;;
    env) echo "$STATE/env" ;;
    ctld-stop) cmd_ctld_stop ;;
    ctld-start) cmd_ctld_start ;;
    *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
