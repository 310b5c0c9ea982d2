#!/usr/bin/env bash
# local-cluster.sh: a private single-node Slurm cluster on this host, for
# trying the examples and for `make test-slurm`.
#
#   local-cluster.sh start DIR   start munged, slurmctld and slurmd with all their
#                                config, state, logs and the munge key in DIR (created,
#                                must be empty or absent); returns when the node is idle
#   local-cluster.sh env DIR     print the environment the Slurm commands need
#                                (eval "$(local-cluster.sh env DIR)")
#   local-cluster.sh logs DIR    print the daemons' logs
#   local-cluster.sh stop DIR    cancel every job, stop the daemons, remove DIR; safe after
#                                a failed or partial start, and safe to run twice
#
# Needs root and Debian's slurm-wlm and munge packages (apt-get install slurm-wlm munge).
# Nothing outside DIR is written: the daemons use their own ports (free ones, chosen at
# start), their own munge socket, and SLURM_CONF points the commands at DIR/slurm.conf.
# Settings for a container: no cgroups (proctrack/linuxproc, task/none), slurmd as root.
set -euo pipefail
PATH=$PATH:/usr/sbin:/sbin # the daemons, for a user whose PATH lacks them

# How long start waits for each daemon to answer, in seconds.
WAIT=${LOCAL_CLUSTER_WAIT:-60}

die() { echo "local-cluster: $*" >&2; exit 1; }

# free_port prints a TCP port nobody listens on (read from /proc/net/tcp*), from
# a range the kernel does not hand out as ephemeral ports.
free_port() {
	local p listening
	listening=$(awk '$4 == "0A" { split($2, a, ":"); print a[2] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null)
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 10000))
		if ! grep -qx "$(printf %04X "$p")" <<<"$listening"; then
			echo "$p"
			return
		fi
	done
	die "no free TCP port found in 20000-29999"
}

# wait_for DESCRIPTION COMMAND...: run COMMAND until it succeeds, for at most
# $WAIT seconds; on timeout print the logs and fail.
wait_for() {
	local what=$1 deadline=$((SECONDS + WAIT))
	shift
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			logs >&2
			die "timed out after ${WAIT}s waiting for $what"
		fi
		sleep 0.2
	done
}

write_conf() {
	local host cpus ctld_port d_port
	host=$(hostname -s)
	cpus=$(nproc)
	ctld_port=$(free_port)
	d_port=$(free_port)
	[ "$d_port" != "$ctld_port" ] || d_port=$((ctld_port + 1))
	cat >"$DIR/slurm.conf" <<EOF
# Written by local-cluster.sh: a private single-node cluster in $DIR.
ClusterName=synapse-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job waits this long (default 120 s) before it can start
# again, until the node has dropped the revoked credential of its last run.
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
PlugStackConfig=$DIR/plugstack.conf
ReturnToService=2
JobRequeue=1
# Finished jobs stay visible to scontrol for 10 minutes (there is no accounting database).
MinJobAge=600
MaxArraySize=1001
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MessageTimeout=20
KillWait=5
SlurmdTimeout=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
	: >"$DIR/plugstack.conf"
}

start_munge() {
	mkdir -p "$DIR/munge"
	chmod 0700 "$DIR/munge" # root only: the clients and the jobs run as root
	# A fresh random key, readable by root only, as munged requires.
	(umask 077 && head -c 1024 /dev/urandom >"$DIR/munge/munge.key")
	munged --force \
		--key-file="$DIR/munge/munge.key" \
		--socket="$DIR/munge/munge.socket" \
		--pid-file="$DIR/run/munged.pid" \
		--seed-file="$DIR/munge/munged.seed" \
		--log-file="$DIR/log/munged.log"
	wait_for "munged to answer" munge_ok
}

munge_ok() { munge -n -S "$DIR/munge/munge.socket" | unmunge -S "$DIR/munge/munge.socket"; }

node_idle() { [ "$(sinfo -h -N -o %t)" = idle ]; }

start() {
	[ -n "$DIR" ] || die "usage: local-cluster.sh start DIR"
	for c in munged munge slurmctld slurmd sinfo scontrol; do
		command -v "$c" >/dev/null || die "$c not found: apt-get install slurm-wlm munge (as root)"
	done
	[ "$(id -u)" = 0 ] || die "start needs root (slurmd runs jobs as their users)"
	if [ -e "$DIR" ] && [ -n "$(ls -A "$DIR")" ]; then
		die "$DIR is not empty: stop the cluster there first (local-cluster.sh stop $DIR)"
	fi
	mkdir -p "$DIR"/{state,spool,log,run}
	DIR=$(cd "$DIR" && pwd)
	export SLURM_CONF=$DIR/slurm.conf
	write_conf
	start_munge
	slurmctld -f "$SLURM_CONF" -i
	wait_for "slurmctld to answer" scontrol ping
	slurmd -f "$SLURM_CONF"
	wait_for "the node to be idle" node_idle
	echo "local-cluster: up in $DIR (export SLURM_CONF=$SLURM_CONF)"
}

logs() {
	for f in "$DIR"/log/*.log; do
		[ -f "$f" ] || continue
		echo "=== $f"
		cat "$f"
	done
}

# pidfiles FILE...: the processes named in the pid files that exist.
pidfiles() {
	local f
	for f in "$@"; do
		[ -s "$f" ] && cat "$f"
	done
	return 0
}

# kill_pids PID...: TERM the processes, wait at most 10 s for them to end,
# then KILL those left.
kill_pids() {
	local pid alive deadline=$((SECONDS + 10))
	[ $# -gt 0 ] || return 0
	kill -TERM "$@" 2>/dev/null || true
	while :; do
		alive=()
		for pid in "$@"; do
			kill -0 "$pid" 2>/dev/null && alive+=("$pid")
		done
		[ ${#alive[@]} -gt 0 ] || return 0
		if ((SECONDS >= deadline)); then
			kill -KILL "${alive[@]}" 2>/dev/null || true
			return 0
		fi
		sleep 0.1
	done
}

# leftovers prints the processes that still hold a file in DIR open (a
# slurmstepd of a job that could not be cancelled, a daemon whose pid file is
# gone).
leftovers() {
	find /proc/[0-9]*/fd -maxdepth 1 -lname "$DIR/*" 2>/dev/null | cut -d/ -f3 | sort -u
}

# with_descendants PID...: the processes and all their descendants (a lost
# slurmstepd's job), from /proc/PID/task/*/children.
with_descendants() {
	local pid
	for pid in "$@"; do
		echo "$pid"
		# shellcheck disable=SC2046
		with_descendants $(cat /proc/"$pid"/task/*/children 2>/dev/null)
	done
}

stop() {
	[ -n "$DIR" ] || die "usage: local-cluster.sh stop DIR"
	[ -d "$DIR" ] || return 0
	DIR=$(cd "$DIR" && pwd)
	export SLURM_CONF=$DIR/slurm.conf
	if [ -f "$SLURM_CONF" ] && scontrol ping >/dev/null 2>&1; then
		scancel --full --quiet $(squeue -h -o %A) 2>/dev/null || true
		local deadline=$((SECONDS + 20))
		while [ -n "$(squeue -h -o %A 2>/dev/null)" ] && ((SECONDS < deadline)); do
			sleep 0.2
		done
	fi
	# shellcheck disable=SC2046 # lists of pids
	kill_pids $(pidfiles "$DIR/run/slurmd.pid" "$DIR/run/slurmctld.pid")
	# shellcheck disable=SC2046
	kill_pids $(pidfiles "$DIR/run/munged.pid")
	# shellcheck disable=SC2046
	kill_pids $(with_descendants $(leftovers | grep -vx "$$"))
	rm -rf "$DIR"
}

DIR=${2:-}
case ${1:-} in
start) start ;;
stop) stop ;;
env)
	[ -n "$DIR" ] || die "usage: local-cluster.sh env DIR"
	echo "export SLURM_CONF=$(cd "$DIR" && pwd)/slurm.conf"
	;;
logs)
	[ -n "$DIR" ] || die "usage: local-cluster.sh logs DIR"
	logs
	;;
*) die "usage: local-cluster.sh start|stop|env|logs DIR" ;;
esac
