#!/bin/bash
# openpbs.sh: a real OpenPBS cluster of 1 head + N compute hosts on ONE Linux machine, for the tests
# (tests/openpbs.py starts it once per session, as tests/testcluster.py starts the Slurm one).
#
# The project's copy of ../shared/openpbs/pbs-cluster.sh (the OpenPBS build beside it: its README),
# with what the tests need added: jobs may run as root, as on the Slurm test cluster (the server's
# acl_roots), and root reaches the other compute hosts by ssh with a key of the state folder (an
# `ssh` wrapper first on the jobs' PATH), as mpirun and pdsh do. Everything else is
# pbs-cluster.sh's, and its facts below hold.
#
# Each "host" is a network namespace (its own address on a private bridge) plus a UTS
# namespace (its own hostname) plus a mount namespace (its own /etc/hosts and /etc/profile.d,
# bind-mounted from this cluster's state folder; the machine's own files are never edited; and, on
# a compute host, an empty /run of its own, as a node that has just booted has: a fresh machine has
# no /run/sshd. The head keeps the machine's /run, where its datastore's PostgreSQL has its folder).
# The file system is otherwise shared, as a cluster's NFS home would be.
#
#   head   (pbshead, .1)     pbs_server + its PostgreSQL datastore, pbs_sched, pbs_comm; the login node
#   pbsn1  (pbsn1,   .11)    pbs_mom (+ sshd for MPI launchers that need ssh)
#   pbsn2  (pbsn2,   .12)    pbs_mom (+ sshd)
#
# Usage (as root):
#   openpbs.sh start                  build the network and the hosts, start every daemon, wait until the nodes are free
#   openpbs.sh stop                   stop the daemons, end every process left in the hosts, delete namespaces and bridge
#   openpbs.sh status                 pbsnodes -a and qstat -B from the head
#   openpbs.sh exec HOST CMD...       run CMD as root on HOST (head, pbsn1, pbsn2 ...)
#   openpbs.sh user HOST 'LINE'       run a shell LINE as $PBSX_USER on HOST, with PBS's commands first on PATH
#   openpbs.sh qmgr 'DIRECTIVE'       qmgr -c DIRECTIVE on the head, as root
#   openpbs.sh restart                stop, then start
#   openpbs.sh clean                  stop, then remove the state folder (the next start makes a new datastore)
#
# Settings (environment):
#   PBS_EXEC       the OpenPBS install tree (default /opt/pbs; configure --prefix)
#   PBSX_ROOT      state folder: each host's PBS_HOME and pbs.conf, hosts file, pids (default /var/spool/pbsx).
#                  PBS checks that no folder on the way to PBS_HOME is writable by group/others: not /tmp.
#   PBSX_NET       first three octets of the private /24 (default 10.214.0)
#   PBSX_NS        namespace name prefix (default pbsx: pbsx-head, pbsx-n1 ...)
#   PBSX_BRIDGE    bridge name (default pbsxbr0)
#   PBSX_NODES     number of compute hosts (default 2)
#   PBSX_USER      the submitting user, created if missing (default pbsuser; PBS's qsub refuses root)
#   PBSX_SSH       1: an sshd on each compute host and key login for PBSX_USER between them (default 1):
#                  Debian's Open MPI has no PBS "tm" launcher, so mpirun reaches other nodes by ssh
#   PBSX_HISTORY   True/False: set job_history_enable (default: leave the server's value; a new server has False)
#   PBSX_FLATUID   True/False: set the server's flatuid (default True). A stock server has False: a
#                  qsub from a compute node (a job that resubmits itself, hpcdist --requeue) is then
#                  refused with "Bad UID for job execution" unless hosts.equiv allows the node.
#   PBSX_NCPUS     override resources_available.ncpus of each node (default: what the mom detects)
#   PBSX_OFFLINE   compute hosts to mark offline once up (pbsnodes -o): up, but given no job until
#                  `pbsnodes -r` (a spare that a test brings in without a restart of the cluster)
#
# Facts this script encodes (each one cost a failed start to learn):
#   - PBS will not use a host whose addresses are all 127.x ("Could not find any usable IP address").
#   - qsub refuses root ("Bad UID for job execution"): jobs are submitted as PBSX_USER.
#   - The moms copy output files with `$usecp *:/ /` (shared file system) instead of scp.
#   - Daemons are started with nsenter into the holder process's namespaces, not `ip netns exec`,
#     which remounts /sys.
#   - PBS_CONF_FILE points every daemon, command and job at its host's pbs.conf: no /etc/pbs.conf.
#     The moms hand it to jobs through PBS_HOME/pbs_environment, and a pbs.sh in the hosts'
#     private /etc/profile.d puts $PBS_EXEC/bin on the PATH of the jobs' login shells, as a site's would.
#   - On a busy machine pbs_habitat's first datastore creation can lose a race with PostgreSQL's
#     start ("Error initializing the PBS dataservice"): the home is wiped and made again (3 tries).
#   - sshd without PAM refuses key logins to a locked account ("!" in /etc/shadow, useradd's default).
#   - The hosts share /var/tmp: each mom gets its own $tmpdir for its jobs' TMPDIR.
#   - Job output is spooled on the first node and copied when the job ends (PBS's default):
#     a job that wants its log live asks for `#PBS -k oed`.
#
# Typical use (a test session): PBSX_HISTORY=True pbs-cluster.sh start; then
#   openpbs.sh user pbshead 'cd work && qsub -l select=2:ncpus=1 -l place=scatter job.sh'
# and at the end openpbs.sh stop (state and datastore stay in PBSX_ROOT: the next start takes
# about 6 s; a first start, which creates the datastore, about 12 s).
set -euo pipefail

PBS_EXEC=${PBS_EXEC:-/opt/pbs}
ROOT=${PBSX_ROOT:-/var/spool/pbsx}
NET=${PBSX_NET:-10.214.0}
NS=${PBSX_NS:-pbsx}
BRIDGE=${PBSX_BRIDGE:-pbsxbr0}
NODES=${PBSX_NODES:-2}
USERNAME=${PBSX_USER:-pbsuser}
SSH=${PBSX_SSH:-1}
HEAD=pbshead

say() { echo "pbs-cluster: $*" >&2; }
die() { say "error: $*"; exit 1; }

# --- the hosts ------------------------------------------------------------------------------------
nodes() { local i; for ((i = 1; i <= NODES; i++)); do echo "pbsn$i"; done; }
hosts() { echo "$HEAD"; nodes; }
ns_of() { if [ "$1" = "$HEAD" ]; then echo "$NS-head"; else echo "$NS-n${1#pbsn}"; fi; }
veth_of() { if [ "$1" = "$HEAD" ]; then echo "${NS}v-head"; else echo "${NS}v-n${1#pbsn}"; fi; }
addr_of() { if [ "$1" = "$HEAD" ]; then echo "$NET.1"; else echo "$NET.$((10 + ${1#pbsn}))"; fi; }
conf_of() { echo "$ROOT/$1/pbs.conf"; }
home_of() { echo "$ROOT/$1/home"; }
holder_of() { cat "$ROOT/run/$1.holder" 2>/dev/null; }

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# Run a command on HOST (as root): inside the holder's network, mount and UTS namespaces.
on() {
    local host=$1; shift
    local pid; pid=$(holder_of "$host") || true
    alive "$pid" || die "host $host is not up (no holder process): run '$0 start'"
    nsenter -t "$pid" -n -m -u -- env -i PATH="$PBS_EXEC/bin:$PBS_EXEC/sbin:/usr/sbin:/usr/bin:/sbin:/bin" \
        LANG=C.UTF-8 PBS_CONF_FILE="$(conf_of "$host")" "$@"
}

# Run a shell line on HOST as the user, in their home, with PBS's commands first on PATH.
as_user() {
    local host=$1 line=$2 home
    home=$(getent passwd "$USERNAME" | cut -d: -f6)
    on "$host" runuser -u "$USERNAME" -- env -i HOME="$home" USER="$USERNAME" LOGNAME="$USERNAME" SHELL=/bin/bash \
        LANG=C.UTF-8 PATH="$PBS_EXEC/bin:/usr/local/bin:/usr/bin:/bin" PBS_CONF_FILE="$(conf_of "$HEAD")" \
        bash -c "cd \"\$HOME\" && $line"
}

# --- start ----------------------------------------------------------------------------------------
write_files() {
    mkdir -p "$ROOT/run" "$ROOT/etc"
    chmod 755 "$ROOT"
    # The hosts' own /etc/hosts (bind-mounted inside their mount namespaces only).
    {
        echo "127.0.0.1 localhost"
        local h; for h in $(hosts); do echo "$(addr_of "$h") $h"; done
    } > "$ROOT/etc/hosts"
    chmod 644 "$ROOT/etc/hosts"
    # The hosts' /etc/profile.d: the machine's, plus OpenPBS's pbs.sh (PATH for jobs' login shells).
    # (Filled in place: a running host's bind mount keeps pointing at this folder.)
    mkdir -p "$ROOT/etc/profile.d"
    cp -a /etc/profile.d/. "$ROOT/etc/profile.d/" 2>/dev/null || true
    [ ! -f "$PBS_EXEC/etc/pbs.sh" ] || cp "$PBS_EXEC/etc/pbs.sh" "$ROOT/etc/profile.d/pbs.sh"
    # OpenPBS's pbs.sh APPENDS $PBS_EXEC/bin to PATH. Where another qsub is installed earlier on
    # PATH (slurm-wlm-torque's /usr/bin/qsub, on this machine), a job's own `qsub` (hpcdist's
    # --requeue resubmission) would be Slurm's: put PBS's commands first, as on a PBS-only site.
    echo 'case ":$PATH:" in *":'"$PBS_EXEC"'/bin:"*) PATH="'"$PBS_EXEC"'/bin:$(echo "$PATH" | sed "s#:'"$PBS_EXEC"'/bin##g")";; *) PATH="'"$PBS_EXEC"'/bin:$PATH";; esac; export PATH' \
        > "$ROOT/etc/profile.d/zz-pbsx-path.sh"
    # Root's ssh between the compute hosts (mpirun, pdsh): the wrapper first on the jobs' PATH.
    echo 'PATH="'"$ROOT"'/bin:$PATH"; export PATH' >> "$ROOT/etc/profile.d/zz-pbsx-path.sh"
    # Root's jobs: Open MPI refuses root unless told (this cluster's own setting, as a site's would be).
    echo '[ "$(id -u)" != 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1' \
        >> "$ROOT/etc/profile.d/zz-pbsx-path.sh"
    chmod -R go-w "$ROOT/etc"
}

# The bridge lives in the machine's own namespace, with no address: nothing on it is routed
# anywhere else. (Where br_netfilter is loaded and iptables' FORWARD policy is DROP, e.g. with
# Docker, bridged traffic between the hosts needs an ACCEPT rule for the bridge.)
make_network() {
    ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
    ip link set "$BRIDGE" up
    local h ns veth
    for h in $(hosts); do
        ns=$(ns_of "$h"); veth=$(veth_of "$h")
        [ -e "/var/run/netns/$ns" ] || ip netns add "$ns"
        if ! ip -n "$ns" link show eth0 >/dev/null 2>&1; then
            ip link add "$veth" type veth peer name eth0 netns "$ns"
            ip link set "$veth" master "$BRIDGE" up
            ip -n "$ns" addr add "$(addr_of "$h")/24" dev eth0
        fi
        ip -n "$ns" link set lo up
        ip -n "$ns" link set eth0 up
    done
}

# A holder per host: a sleeping process that keeps the host's UTS and mount namespaces alive
# (its network namespace is the named one). Everything for the host is started inside it.
make_holders() {
    local h pid i
    for h in $(hosts); do
        pid=$(holder_of "$h") || true
        alive "$pid" && continue
        rm -f "$ROOT/run/$h.holder"
        setsid nsenter --net="/var/run/netns/$(ns_of "$h")" unshare --mount --uts --propagation private \
            sh -c 'echo $$ > "$1/run/$2.holder.part" && hostname "$2" &&
                   mount --bind "$1/etc/hosts" /etc/hosts && mount --bind "$1/etc/profile.d" /etc/profile.d &&
                   { [ "$2" = "$3" ] || mount -t tmpfs -o mode=0755 "run-$2" /run; } &&
                   mv "$1/run/$2.holder.part" "$1/run/$2.holder" && exec sleep infinity' holder "$ROOT" "$h" "$HEAD" \
            </dev/null >/dev/null 2>&1 &
        for ((i = 0; i < 50; i++)); do [ -s "$ROOT/run/$h.holder" ] && break; sleep 0.1; done
        [ "$(on "$h" hostname)" = "$h" ] || die "host $h: the holder did not come up"
    done
}

write_conf() {
    local h=$1 server=0 sched=0 comm=0 mom=0
    if [ "$h" = "$HEAD" ]; then server=1; sched=1; comm=1; else mom=1; fi
    mkdir -p "$ROOT/$h"
    cat > "$(conf_of "$h")" <<EOF
PBS_EXEC=$PBS_EXEC
PBS_HOME=$(home_of "$h")
PBS_SERVER=$HEAD
PBS_START_SERVER=$server
PBS_START_SCHED=$sched
PBS_START_COMM=$comm
PBS_START_MOM=$mom
PBS_LEAF_ROUTERS=$HEAD
PBS_CORE_LIMIT=unlimited
PBS_SCP=/usr/bin/scp
EOF
    chmod 644 "$(conf_of "$h")"
}

# PBS_HOME of a host: made once by OpenPBS's own pbs_habitat (on the head it also creates the
# datastore and the default queue workq), then our additions.
make_home() {
    local h=$1 home; home=$(home_of "$h")
    local try
    for try in 1 2 3; do
        [ ! -f "$home/pbs_version" ] || { [ "$h" = "$HEAD" ] && [ ! -d "$home/datastore" ]; } || break
        # A half-made home (a failed try) would be taken as an upgrade: start from nothing.
        rm -rf "$home"
        say "$h: creating PBS_HOME $home (pbs_habitat, try $try)"
        # Upstream race on a busy machine: pbs_dataservice starts PostgreSQL without waiting
        # (pg_ctl -W) and createdb can come before its socket ("Error initializing the PBS
        # dataservice"). A new try usually passes.
        if on "$h" "$PBS_EXEC/libexec/pbs_habitat" > "$ROOT/run/$h.habitat.log" 2>&1; then break; fi
        cat "$ROOT/run/$h.habitat.log" >&2
        [ "$try" != 3 ] || die "$h: pbs_habitat failed 3 times"
        sleep 2
    done
    # Jobs, and the commands they run (pbsdsh, qsub), find this host's pbs.conf.
    local env="$home/pbs_environment"
    grep -q '^PBS_CONF_FILE=' "$env" 2>/dev/null || echo "PBS_CONF_FILE=$(conf_of "$h")" >> "$env"
    if [ "$h" != "$HEAD" ]; then
        # Output files are copied on the shared file system, not with scp. Each mom keeps its
        # jobs' TMPDIR in a folder of its own, as node-local /var/tmp would be on a real cluster
        # (the machine's /var/tmp is shared by all the hosts here).
        mkdir -p "$ROOT/$h/tmp"; chmod 1777 "$ROOT/$h/tmp"
        cat > "$home/mom_priv/config" <<EOF
\$clienthost $HEAD
\$usecp *:/ /
\$tmpdir $ROOT/$h/tmp
\$logevent 0x1ff
EOF
        chmod 644 "$home/mom_priv/config"
    fi
}

make_user() {
    id "$USERNAME" >/dev/null 2>&1 || useradd -m -s /bin/bash "$USERNAME"
    # A new account's password is locked ("!"), and sshd without PAM refuses key logins to
    # locked accounts: "*" means no password, not locked.
    [ "$(getent shadow "$USERNAME" | cut -d: -f2)" != "!" ] || usermod -p '*' "$USERNAME"
}

start_sshd() {
    local h=$1 dir="$ROOT/ssh"
    mkdir -p "$dir"; chmod 755 "$dir"
    [ -f "$dir/$h.key" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/$h.key" -C "$h"
    cat > "$dir/$h.sshd_config" <<EOF
ListenAddress $(addr_of "$h")
Port 22
HostKey $dir/$h.key
PidFile $ROOT/run/$h.sshd.pid
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys $dir/root_authorized_keys
AcceptEnv LANG
X11Forwarding no
EOF
    alive "$(cat "$ROOT/run/$h.sshd.pid" 2>/dev/null)" && return 0
    # sshd's privilege separation folder: only an sshd service makes it, and the host's /run is new.
    on "$h" install -d -m 0755 /run/sshd
    on "$h" /usr/sbin/sshd -f "$dir/$h.sshd_config"
}

# Root's key login between the compute hosts: a key of the state folder, and `ssh` wrapped to use it
# (root's own ~/.ssh is not touched).
root_ssh() {
    local dir="$ROOT/ssh" h
    [ -f "$dir/root_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/root_key" -C pbsx-root
    cp "$dir/root_key.pub" "$dir/root_authorized_keys"; chmod 644 "$dir/root_authorized_keys"
    : > "$dir/root_known_hosts"
    for h in $(nodes); do echo "$h,$(addr_of "$h") $(cut -d' ' -f1-2 "$dir/$h.key.pub")" >> "$dir/root_known_hosts"; done
    printf 'Match localuser root\n    IdentityFile %s\n    UserKnownHostsFile %s\n    StrictHostKeyChecking yes\n' \
        "$dir/root_key" "$dir/root_known_hosts" > "$dir/root_config"
    chmod 644 "$dir/root_config"
    mkdir -p "$ROOT/bin"
    printf '#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' "$dir/root_config" > "$ROOT/bin/ssh"
    chmod 755 "$ROOT/bin/ssh"
}

# Key login for the user between the compute hosts (their host keys are known in advance).
ssh_keys() {
    local home h; home=$(getent passwd "$USERNAME" | cut -d: -f6)
    runuser -u "$USERNAME" -- bash -c '
        mkdir -p ~/.ssh && chmod 700 ~/.ssh
        [ -f ~/.ssh/id_ed25519 ] || ssh-keygen -q -t ed25519 -N "" -f ~/.ssh/id_ed25519 -C pbsx
        touch ~/.ssh/authorized_keys && chmod 600 ~/.ssh/authorized_keys
        grep -qF "$(cat ~/.ssh/id_ed25519.pub)" ~/.ssh/authorized_keys || cat ~/.ssh/id_ed25519.pub >> ~/.ssh/authorized_keys'
    # This start's host keys, in a file of the user's that every start rewrites (a cluster
    # started with another PBSX_ROOT has other keys).
    local known="$home/.ssh/pbsx_known_hosts"
    : > "$known"
    for h in $(nodes); do
        echo "$h,$(addr_of "$h") $(cut -d' ' -f1-2 "$ROOT/ssh/$h.key.pub")" >> "$known"
    done
    chown "$USERNAME:" "$known"; chmod 644 "$known"
    # Only for these hosts: the user's other ssh settings stay as they are. Our block (the marker
    # line and the 3 after it) is written anew each start.
    local cfg="$home/.ssh/config" marker="# pbs-cluster.sh"
    touch "$cfg"
    awk -v m="$marker" '$0 == m { skip = 4 } skip > 0 { skip--; next } { print }' "$cfg" > "$cfg.new"
    printf '%s\nHost %s\n    UserKnownHostsFile %s\n    StrictHostKeyChecking yes\n' \
        "$marker" "$(nodes | paste -sd' ')" "$known" >> "$cfg.new"
    mv "$cfg.new" "$cfg"; chown "$USERNAME:" "$cfg"; chmod 600 "$cfg"
}

wait_nodes_free() {
    local i states
    for ((i = 0; i < 120; i++)); do
        states=$(on "$HEAD" pbsnodes -a 2>/dev/null | awk '/^     state = /{print $3}' | sort | uniq -c | tr '\n' ' ')
        if [ "$(on "$HEAD" pbsnodes -a 2>/dev/null | grep -c '^     state = free')" = "$NODES" ]; then
            say "nodes free: $(nodes | paste -sd' ')"; return 0
        fi
        sleep 0.5
    done
    on "$HEAD" pbsnodes -a >&2 || true
    die "the nodes did not become free within 60 s (states: $states)"
}

start() {
    [ "$(id -u)" = 0 ] || die "run as root"
    [ -x "$PBS_EXEC/sbin/pbs_server" ] || die "no OpenPBS in $PBS_EXEC (PBS_EXEC)"
    local t0=$SECONDS h
    make_user
    write_files
    make_network
    make_holders
    for h in $(hosts); do write_conf "$h"; done
    make_home "$HEAD"
    on "$HEAD" "$PBS_EXEC/libexec/pbs_init.d" start > "$ROOT/run/head.start.log" 2>&1 ||
        { cat "$ROOT/run/head.start.log" >&2; die "the head's daemons did not start"; }
    for h in $(nodes); do
        on "$HEAD" qmgr -c "list node $h" >/dev/null 2>&1 || on "$HEAD" qmgr -c "create node $h"
        [ -z "${PBSX_NCPUS:-}" ] || on "$HEAD" qmgr -c "set node $h resources_available.ncpus = $PBSX_NCPUS"
        on "$HEAD" pbsnodes -r "$h" >/dev/null 2>&1 || true  # offline is kept in the datastore
    done
    [ -z "${PBSX_HISTORY:-}" ] || on "$HEAD" qmgr -c "set server job_history_enable = $PBSX_HISTORY"
    on "$HEAD" qmgr -c "set server flatuid = ${PBSX_FLATUID:-True}"
    # Root may submit and run jobs (PBS refuses root's jobs otherwise: "Bad UID for job execution").
    on "$HEAD" qmgr -c "set server acl_roots = root"
    for h in $(nodes); do
        make_home "$h"
        on "$h" "$PBS_EXEC/libexec/pbs_init.d" start > "$ROOT/run/$h.start.log" 2>&1 ||
            { cat "$ROOT/run/$h.start.log" >&2; die "$h: pbs_mom did not start"; }
    done
    if [ "$SSH" = 1 ]; then
        for h in $(nodes); do start_sshd "$h"; done
        ssh_keys
        root_ssh
    fi
    # The datastore outlives a stop: a session that was killed leaves its jobs queued or "running",
    # holding the nodes. Every start begins with an empty queue.
    on "$HEAD" bash -c 'left=$(qselect); [ -z "$left" ] || qdel -W force $left' || true
    wait_nodes_free
    for h in ${PBSX_OFFLINE:-}; do on "$HEAD" pbsnodes -o "$h"; done
    say "up in $((SECONDS - t0)) s. Submit as $USERNAME on the head:  $0 user $HEAD 'qsub job.sh'"
}

# --- stop -----------------------------------------------------------------------------------------
# Every process whose network namespace is one of this cluster's (daemons, jobs, sshd sessions).
pids_in_cluster() {
    local h ino pid
    for h in $(hosts); do
        [ -e "/var/run/netns/$(ns_of "$h")" ] || continue
        ino=$(stat -L -c %i "/var/run/netns/$(ns_of "$h")")
        for pid in $(ls /proc | grep -E '^[0-9]+$'); do
            [ "$(stat -L -c %i "/proc/$pid/ns/net" 2>/dev/null)" = "$ino" ] && echo "$pid"
        done
    done
}

stop() {
    [ "$(id -u)" = 0 ] || die "run as root"
    local h pid
    for h in $(nodes) "$HEAD"; do
        pid=$(holder_of "$h") || true
        alive "$pid" || continue
        on "$h" "$PBS_EXEC/libexec/pbs_init.d" stop > "$ROOT/run/$h.stop.log" 2>&1 || true
        pid=$(cat "$ROOT/run/$h.sshd.pid" 2>/dev/null) || true
        ! alive "$pid" || kill "$pid"
    done
    # What is left (a job's processes, a hung daemon): TERM, then KILL, by pid, holders last.
    local holders left
    holders=$(for h in $(hosts); do holder_of "$h" || true; done)
    for sig in TERM KILL; do
        left=$(pids_in_cluster | grep -vxF -e "${holders:-none}" || true)
        [ -z "$left" ] || { say "ending $(echo $left | wc -w) leftover process(es) with SIG$sig"; kill -$sig $left 2>/dev/null || true; sleep 2; }
    done
    for h in $(hosts); do
        pid=$(holder_of "$h") || true
        ! alive "$pid" || kill "$pid"
        rm -f "$ROOT/run/$h.holder"
        ! [ -e "/var/run/netns/$(ns_of "$h")" ] || ip netns del "$(ns_of "$h")"
    done
    ! ip link show "$BRIDGE" >/dev/null 2>&1 || ip link del "$BRIDGE"
    say "stopped; state kept in $ROOT"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    restart) stop; start ;;
    clean) stop; rm -rf "$ROOT"; say "removed $ROOT" ;;
    status) on "$HEAD" pbsnodes -a; on "$HEAD" qstat -B ;;
    exec) shift; h=$1; shift; on "$h" "$@" ;;
    user) shift; as_user "$1" "$2" ;;
    qmgr) shift; on "$HEAD" qmgr -c "$1" ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
esac
