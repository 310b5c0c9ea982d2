#!/bin/sh
# dtype-embed.sh: output size per chunk and embed time for each --dtype on
# the same input, in interleaved rounds (the order rotates each round). See
# docs/search-bench.md section 2. int8 and uint8 run twice: calibrating on
# the input's first 1,000 documents (embed's default: those documents are
# embedded twice) and with --calibration naming the float32 output of the
# same round (no extra embedding).
#
#   examples/bench/dtype-embed.sh MODEL [DOCS=2000] [ROUNDS=3]
#
# Environment: SYNAPSE (default bin/synapse), CORPUS (default
# ../shared/fixtures/corpora/scifact/corpus.jsonl), WORK (default a new
# temporary directory). Prints one line per run: round, contender, wall
# seconds, CPU seconds of synapse and its workers (/usr/bin/time), chunks,
# bytes of the .arrow output, bytes per chunk, and the 1-minute load average
# before the run; then the sizes of each dtype's output as Parquet
# (the last round's .arrow converted by examples/bench/randvec convert).
set -eu
MODEL=${1:?usage: dtype-embed.sh MODEL [DOCS] [ROUNDS]}
DOCS=${2:-2000}
ROUNDS=${3:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
SYNAPSE=${SYNAPSE:-bin/synapse}
CORPUS=${CORPUS:-../shared/fixtures/corpora/scifact/corpus.jsonl}
WORK=${WORK:-$(mktemp -d)}

head -n "$DOCS" "$CORPUS" >"$WORK/docs.jsonl"
load() { cut -d' ' -f1 /proc/loadavg; }

run() { # $1: contender name, then embed's extra flags
	name=$1
	shift
	out="$WORK/$name.arrow"
	rm -f "$out"
	l=$(load)
	/usr/bin/time -f '%e %U %S' -o "$WORK/time" "$SYNAPSE" embed "$WORK/docs.jsonl" -m "$MODEL" \
		--text-field title --text-field text -o "$out" "$@" >"$WORK/$name.log" 2>&1 ||
		{ cat "$WORK/$name.log" >&2; exit 1; }
	chunks=$(awk '$1 == "chunks" { print $2 }' "$WORK/$name.log")
	bytes=$(stat -c %s "$out")
	read -r wall user sys <"$WORK/time"
	echo "$chunks" >"$WORK/chunks"
	echo "$name $wall $user $sys $chunks $bytes $l" |
		awk -v r="$r" '{ printf "%s %-10s %7.1f %7.1f %6d %10d %7.1f %5s\n", r, $1, $2, $3 + $4, $5, $6, $6 / $5, $7 }'
}

echo "# $(date -u +%FT%TZ) $(uptime)"
echo "# $DOCS documents of $CORPUS; model $MODEL; $("$SYNAPSE" version 2>/dev/null | head -1)"
echo "round contender wall_s cpu_s chunks arrow_bytes bytes_per_chunk load1"
r=0
while [ "$r" -lt "$ROUNDS" ]; do
	# float32 first in every round: int8-cal and uint8-cal calibrate on it.
	run float32
	set -- float16 int8 int8-cal uint8 uint8-cal binary ubinary
	i=0
	while [ "$i" -lt "$r" ]; do first=$1; shift; set -- "$@" "$first"; i=$((i + 1)); done
	for c in "$@"; do
		case $c in
		*-cal) run "$c" --dtype "${c%-cal}" --calibration "$WORK/float32.arrow" ;;
		*) run "$c" --dtype "$c" ;;
		esac
	done
	r=$((r + 1))
done
echo "# the last round's outputs as Parquet (randvec convert): dtype parquet_bytes bytes_per_chunk"
for c in float32 float16 int8 uint8 binary ubinary; do
	rm -f "$WORK/$c.parquet"
	go run "$HERE/randvec" convert "$WORK/$c.arrow" "$WORK/$c.parquet"
	echo "$c $(stat -c %s "$WORK/$c.parquet") $(cat "$WORK/chunks")" | awk '{ printf "%-10s %10d %7.1f\n", $1, $2, $2 / $3 }'
done
