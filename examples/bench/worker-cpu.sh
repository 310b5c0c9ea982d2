#!/bin/sh
# worker-cpu.sh MODEL [FLAGS]: run synapse embed on /tmp/hpack-scifact300.jsonl (head -300 of SciFact)
# and sample each worker's CPU time (utime+stime) from /proc until it ends.
M=$1; shift
${SYNAPSE:-bin/synapse} embed /tmp/hpack-scifact300.jsonl --text-field title --text-field text -m "$M" -o /tmp/hpack-percpu.arrow "$@" >/tmp/hpack-percpu.out 2>&1 &
P=$!
t0=$(date +%s.%N)
: >/tmp/hpack-percpu.samples
while kill -0 $P 2>/dev/null; do
  for c in $(pgrep -P $P); do
    [ -r /proc/$c/stat ] && echo "$c $(awk '{print $14+$15}' /proc/$c/stat 2>/dev/null)" >>/tmp/hpack-percpu.samples
  done
  sleep 0.2
done
t1=$(date +%s.%N)
echo "wall $(echo "$t0 $t1" | awk '{print $2-$1}') s"
awk '{last[$1]=$2} END {for (p in last) printf "worker %s: %.2f CPU-s\n", p, last[p]/100}' /tmp/hpack-percpu.samples
grep -i "tokens" /tmp/hpack-percpu.out | head -3
