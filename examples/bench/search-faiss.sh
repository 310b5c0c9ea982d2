#!/bin/sh
# search-faiss.sh: synapse search against faiss-cpu, the build users install
# from PyPI, on the same vectors: IndexFlatIP (float32), IndexScalarQuantizer
# with QT_8bit_direct_signed (the int8 codes as they are: synapse's int8
# scores exactly) and IndexBinaryFlat (binary), on a corpus of N random unit
# vectors written as synapse embed outputs by examples/bench/randvec. First
# it checks that each dtype's top K equals faiss's under synapse's tie rule
# (examples/bench/compare_runs.py; stops if not), then runs ROUNDS rounds of
# whole processes, the contenders' order rotated each round, and prints the
# ratios. faiss's own 8-bit quantizer (QT_8bit, trained on the float32
# corpus: other scores, so timed and not checked) runs beside int8 unless
# SQ8=0. See docs/search-bench.md.
#
#   examples/bench/search-faiss.sh LIKE.arrow [N=1000000] [QUERIES=1000] [ROUNDS=2]
#
# LIKE.arrow is a real synapse embed output (float32) whose schema metadata
# the generated outputs copy. faiss-cpu and numpy are installed, the first
# time, into a virtual environment under PEERS (default .cache/peers of the
# repository) with python3 -m venv and pip; FAISS names the requirement
# (default faiss-cpu==1.15.1).
#
# Environment: SYNAPSE (default bin/synapse), WORK (default a new temporary
# directory; a WORK holding the vectors of an earlier run with the same N
# and QUERIES is reused), K (default 100), CHECK (0: skip the check, for
# more rounds on vectors already checked), DTYPES (default "float32 int8
# binary"), SQ8, SYNAPSE_BASE (another synapse
# binary, such as one built before a change, run as contender
# "synapse-base" in the rounds). Prints one line per run:
# round, contender, dtype, wall seconds of the process, seconds of the
# search alone (synapse's summary line; faiss's index.search), query·document
# similarities per second of the search alone and of the whole process, CPU
# seconds of the process (user + system, /usr/bin/time), similarities per
# CPU second of the process (what a loaded machine disturbs least), peak RSS
# in MiB, and the 1-minute load average before the run; then, per round and
# dtype, each other contender's CPU seconds ÷ synapse's (above 1: synapse
# does more per CPU-second) and its wall seconds ÷ synapse's.
set -eu
LIKE=${1:?usage: search-faiss.sh LIKE.arrow [N] [QUERIES] [ROUNDS]}
N=${2:-1000000}
NQ=${3:-1000}
ROUNDS=${4:-2}
K=${K:-100}
DTYPES=${DTYPES:-float32 int8 binary}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SYNAPSE=${SYNAPSE:-bin/synapse}
WORK=${WORK:-$(mktemp -d)}
PEERS=${PEERS:-$ROOT/.cache/peers}
FAISS=${FAISS:-faiss-cpu==1.15.1}
VENV=$PEERS/faiss
PY=$VENV/bin/python

if ! "$PY" -c 'import faiss, numpy' 2>/dev/null; then
	mkdir -p "$PEERS"
	python3 -m venv "$VENV"
	"$VENV/bin/pip" install -q "$FAISS" numpy
fi

V="$WORK/vectors-$N-$NQ"
if [ ! -f "$V/done" ]; then
	mkdir -p "$V"
	go run "$HERE/randvec" gen -like "$LIKE" -n "$N" -queries "$NQ" -out "$V"
	for f in corpus.float32 corpus.int8 corpus.binary queries; do
		go run "$HERE/randvec" raw "$V/$f.arrow" "$V/$f"
	done
	touch "$V/done"
fi

load() { cut -d' ' -f1 /proc/loadavg; }
pairs=$((N * NQ))

seconds() { # a Go duration (523ms, 52.3s, 11m51.933s, 1h2m3s) in seconds
	awk -v d="$1" 'BEGIN { t = 0
		if (d ~ /ms$/) { sub(/ms$/, "", d); print d / 1000; exit }
		if (match(d, /^[0-9.]+h/)) { t += substr(d, 1, RLENGTH - 1) * 3600; d = substr(d, RLENGTH + 1) }
		if (match(d, /^[0-9.]+m/)) { t += substr(d, 1, RLENGTH - 1) * 60; d = substr(d, RLENGTH + 1) }
		if (match(d, /^[0-9.]+s$/)) { t += substr(d, 1, RLENGTH - 1); d = "" }
		if (d != "") { print "?"; exit 1 }
		print t }'
}

synapse_run() { # $1: dtype, $2: the binary (default $SYNAPSE)
	l=$(load)
	/usr/bin/time -f '%e %M %U %S' -o "$WORK/time" "${2:-$SYNAPSE}" search --queries "$V/queries.arrow" \
		--corpus "$V/corpus.$1.arrow" -k "$K" -o "$WORK/synapse.$1.tsv" >"$WORK/synapse.log" 2>&1 ||
		{ cat "$WORK/synapse.log" >&2; exit 1; }
	# "searched  1000 queries × 1000000 chunks (float32, 1 passes) in 5.41s: …"
	s=$(seconds "$(sed -n 's/^searched .* in \([0-9.hms]*\): .*/\1/p' "$WORK/synapse.log")")
	read -r wall rss user sys <"$WORK/time"
	echo "$wall $s $rss $l $user $sys"
}

faiss_run() { # $1: dtype (sq8: QT_8bit on the float32 corpus), then extra arguments
	d=$1
	shift
	c=$d
	if [ "$d" = sq8 ]; then
		c=float32
		set -- "$@" --sq8
	fi
	l=$(load)
	/usr/bin/time -f '%e %M %U %S' -o "$WORK/time" "$PY" "$HERE/faiss_search.py" \
		"$V/corpus.$c" "$V/queries" "$K" "$WORK/faiss.$d.tsv" "$@" >"$WORK/faiss.json"
	s=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["search_s"])' "$WORK/faiss.json")
	read -r wall rss user sys <"$WORK/time"
	echo "$wall $s $rss $l $user $sys"
}

line() { # round contender dtype wall search rss load user sys
	echo "$@" >>"$WORK/results"
	echo "$@" | awk -v p="$pairs" '{ cpu = $8 + $9; printf "%-5s %-12s %-7s %7.2f %7.2f %9.3g %9.3g %7.1f %9.3g %6.0f %5s\n",
		$1, $2, $3, $4, $5, p / $5, p / $4, cpu, p / cpu, $6 / 1024, $7 }'
}

echo "# $(date -u +%FT%TZ) $(uptime)"
echo "# $(lscpu | grep 'Model name' | tr -s ' ')"
echo "# $N chunks x $NQ queries, k $K; $("$SYNAPSE" version 2>/dev/null | head -1); faiss $("$PY" -c 'import faiss; print(faiss.__version__, faiss.get_compile_options())')"
: >"$WORK/results"
header="round contender dtype wall_s search_s search_sims/s process_sims/s cpu_s sims/cpu_s rss_MiB load1"
echo "# check: synapse search equals faiss (compare_runs.py)"
echo "$header"
[ "${CHECK:-1}" = 0 ] && echo "# (CHECK=0: not checked in this run)"
[ "${CHECK:-1}" = 0 ] || for d in $DTYPES; do
	line check synapse "$d" $(synapse_run "$d")
	line check faiss "$d" $(faiss_run "$d" --extend "$WORK/faiss.$d.ext.tsv")
	"$PY" "$HERE/compare_runs.py" "$d" "$K" "$WORK/synapse.$d.tsv" "$WORK/faiss.$d.tsv" "$WORK/faiss.$d.ext.tsv"
done

echo "$header"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	set -- synapse faiss
	[ "${SQ8:-1}" = 0 ] || set -- "$@" faiss-sq8
	[ -z "${SYNAPSE_BASE:-}" ] || set -- "$@" synapse-base
	i=0
	while [ "$i" -lt "$r" ]; do first=$1; shift; set -- "$@" "$first"; i=$((i + 1)); done
	for d in $DTYPES; do
		for c in "$@"; do
			case $c in
			synapse) line "$r" "$c" "$d" $(synapse_run "$d") ;;
			synapse-base) line "$r" "$c" "$d" $(synapse_run "$d" "$SYNAPSE_BASE") ;;
			faiss) line "$r" "$c" "$d" $(faiss_run "$d") ;;
			faiss-sq8) [ "$d" = int8 ] && line "$r" "$c" "$d" $(faiss_run sq8) ;;
			esac
		done
	done
	r=$((r + 1))
done

echo "# ratios: each contender ÷ synapse, CPU seconds of the process (per-CPU-second ratio) and wall seconds"
echo "round dtype contender cpu_ratio wall_ratio"
awk '$1 != "check" { key = $1 " " $3; if ($2 == "synapse") { sc[key] = $8 + $9; sw[key] = $4 }
	else { fc[key, $2] = $8 + $9; fw[key, $2] = $4; who[key] = who[key] " " $2 } }
	END { for (key in who) { n = split(who[key], f, " "); for (i = 1; i <= n; i++)
		printf "%s %s %.2f %.2f\n", key, f[i], fc[key, f[i]] / sc[key], fw[key, f[i]] / sw[key] } }' "$WORK/results" | sort
echo "# $(date -u +%FT%TZ) $(uptime)"
