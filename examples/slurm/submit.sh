#!/usr/bin/env bash
# submit.sh: submit a sharded `synapse embed` as a Slurm array, and the merge job
# to run once every task succeeded.
#
#   submit.sh -n SHARDS [-k AT_ONCE] [-c CPUS] -m MODEL -o OUT INPUT...
#
# -k: at most AT_ONCE tasks run at a time; -c: CPUs per task (each task runs that
# many workers; default: the script's #SBATCH --cpus-per-task). Prints "embed JOBID"
# and "merge JOBID". More embed flags go in SYNAPSE_ARGS, more merge flags in
# MERGE_ARGS, the binary in SYNAPSE; other sbatch options in SBATCH_* variables
# (SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_TIMELIMIT, ...).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
usage() {
	echo "usage: submit.sh -n SHARDS [-k AT_ONCE] [-c CPUS] -m MODEL -o OUT INPUT..." >&2
	exit 2
}

SHARDS= AT_ONCE= CPUS= MODEL= OUT=
while getopts n:k:c:m:o: opt; do
	case $opt in
	n) SHARDS=$OPTARG ;;
	k) AT_ONCE=$OPTARG ;;
	c) CPUS=$OPTARG ;;
	m) MODEL=$OPTARG ;;
	o) OUT=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ -n "$SHARDS" ] && [ -n "$MODEL" ] && [ -n "$OUT" ] && [ $# -gt 0 ] || usage
[[ $SHARDS =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: -n $SHARDS: want a positive number" >&2; exit 2; }
for v in "$AT_ONCE" "$CPUS"; do
	[ -z "$v" ] || [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: $v: want a positive number" >&2; exit 2; }
done

INPUTS="$*"
export SHARDS MODEL OUT INPUTS
array=0-$((SHARDS - 1))${AT_ONCE:+%$AT_ONCE}
embed=$(sbatch --parsable --export=ALL --array="$array" ${CPUS:+--cpus-per-task="$CPUS"} "$here/embed-array.sbatch")
embed=${embed%%;*} # "JOBID;CLUSTER" on a federation
echo "embed $embed"
merge=$(sbatch --parsable --export=ALL --dependency="afterok:$embed" --kill-on-invalid-dep=yes "$here/merge.sbatch")
echo "merge ${merge%%;*}"
