#!/bin/sh
# search-vs-faiss.sh: synapse search against faiss's exact indexes
# (IndexFlatIP for float32 and for int8 codes, IndexBinaryFlat for binary)
# on the same vectors: a corpus of N random unit vectors written as synapse
# embed outputs by examples/bench/randvec, in interleaved rounds (the order
# rotates each round). First it checks that each dtype's run equals faiss's
# (examples/bench/compare_runs.py: same ids in the same order, ties by
# document id; stops if not). See docs/search-bench.md section 1.
#
#   examples/bench/search-vs-faiss.sh LIKE.arrow [N=1000000] [QUERIES=300] [ROUNDS=3]
#
# LIKE.arrow is a real synapse embed output (float32) whose schema metadata
# the generated outputs copy. Needs Debian's python3-faiss and python3-numpy
# (/usr/bin/python3). faiss runs with each BLAS that BLAS names: "system",
# the one Debian's alternatives select (the reference BLAS unless another is
# installed), and "openblas", OpenBLAS (libopenblas0-pthread) through
# LD_LIBRARY_PATH; the default is both when OpenBLAS is installed. The check
# runs faiss with the last of them.
#
# Environment: SYNAPSE (default bin/synapse), WORK (default a new temporary
# directory; a WORK holding the vectors of an earlier run with the same N
# and QUERIES is reused), K (default 100), BLAS (see above), CHECK (0: skip
# the check, for more rounds on vectors already checked). Prints one line per run: round,
# contender, dtype, wall seconds of the process, seconds of the search alone
# (synapse's summary line; faiss's index.search), query·document
# similarities per second of the search alone and of the whole process, CPU
# seconds of the process (user + system), similarities per CPU second of the
# process (what a loaded machine disturbs least), peak RSS in MiB
# (/usr/bin/time), and the 1-minute load average before the run. The check's
# runs are printed as round "check" (faiss's then includes the range search
# the check needs, after the timed search).
set -eu
LIKE=${1:?usage: search-vs-faiss.sh LIKE.arrow [N] [QUERIES] [ROUNDS]}
N=${2:-1000000}
NQ=${3:-300}
ROUNDS=${4:-3}
K=${K:-100}
HERE=$(cd "$(dirname "$0")" && pwd)
SYNAPSE=${SYNAPSE:-bin/synapse}
WORK=${WORK:-$(mktemp -d)}
PY=/usr/bin/python3
OPENBLAS=/usr/lib/x86_64-linux-gnu/openblas-pthread

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

synapse_run() { # $1: dtype
	l=$(load)
	/usr/bin/time -f '%e %M %U %S' -o "$WORK/time" "$SYNAPSE" search --queries "$V/queries.arrow" \
		--corpus "$V/corpus.$1.arrow" -k "$K" -o "$WORK/synapse.$1.tsv" >"$WORK/synapse.log" 2>&1 ||
		{ cat "$WORK/synapse.log" >&2; exit 1; }
	# "searched  300 queries × 1000000 chunks (float32, 1 passes) in 11m51.933s: …"
	s=$(seconds "$(sed -n 's/^searched .* in \([0-9.hms]*\): .*/\1/p' "$WORK/synapse.log")")
	read -r wall rss user sys <"$WORK/time"
	echo "$wall $s $rss $l $user $sys"
}

faiss_run() { # $1: dtype, $2: blas (system or openblas), then extra arguments
	d=$1
	b=$2
	shift 2
	l=$(load)
	lib=
	[ "$b" = openblas ] && lib=$OPENBLAS
	LD_LIBRARY_PATH=$lib /usr/bin/time -f '%e %M %U %S' -o "$WORK/time" $PY "$HERE/faiss_search.py" \
		"$V/corpus.$d" "$V/queries" "$K" "$WORK/faiss.$d.tsv" "$@" >"$WORK/faiss.json"
	s=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["search_s"])' "$WORK/faiss.json")
	read -r wall rss user sys <"$WORK/time"
	echo "$wall $s $rss $l $user $sys"
}

line() { # round contender dtype wall search rss load user sys
	echo "$@" | awk -v p="$pairs" '{ cpu = $8 + $9; printf "%-5s %-15s %-7s %7.2f %7.2f %9.3g %9.3g %7.1f %9.3g %6.0f %5s\n",
		$1, $2, $3, $4, $5, p / $5, p / $4, cpu, p / cpu, $6 / 1024, $7 }'
}

echo "# $(date -u +%FT%TZ) $(uptime)"
echo "# $N chunks x $NQ queries, k $K; $("$SYNAPSE" version 2>/dev/null | head -1); faiss $($PY -c 'import faiss; print(faiss.__version__)')"
blases=system
[ -f "$OPENBLAS/libblas.so.3" ] && blases="system openblas"
blases=${BLAS:-$blases}
checkblas=${blases##* }

header="round contender dtype wall_s search_s search_sims/s process_sims/s cpu_s sims/cpu_s rss_MiB load1"
echo "# check: synapse search equals faiss (compare_runs.py)"
echo "$header"
[ "${CHECK:-1}" = 0 ] && echo "# (CHECK=0: not checked in this run)"
[ "${CHECK:-1}" = 0 ] || for d in float32 int8 binary; do
	line check synapse "$d" $(synapse_run "$d")
	line check "faiss-$checkblas" "$d" $(faiss_run "$d" "$checkblas" --extend "$WORK/faiss.$d.ext.tsv")
	$PY "$HERE/compare_runs.py" "$d" "$K" "$WORK/synapse.$d.tsv" "$WORK/faiss.$d.tsv" "$WORK/faiss.$d.ext.tsv"
done

echo "$header"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	set -- synapse
	for b in $blases; do set -- "$@" "faiss-$b"; done
	i=0
	while [ "$i" -lt "$r" ]; do first=$1; shift; set -- "$@" "$first"; i=$((i + 1)); done
	for d in float32 int8 binary; do
		for c in "$@"; do
			if [ "$d" = binary ] && [ "$c" = faiss-openblas ] && [ "$blases" != openblas ]; then
				continue # IndexBinaryFlat does not use BLAS: faiss-system runs it
			fi
			case $c in
			synapse) line "$r" "$c" "$d" $(synapse_run "$d") ;;
			faiss-*) line "$r" "$c" "$d" $(faiss_run "$d" "${c#faiss-}") ;;
			esac
		done
	done
	r=$((r + 1))
done
