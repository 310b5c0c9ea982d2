#!/usr/bin/python3
"""compare_runs.py: check that synapse search's run equals faiss's.

    compare_runs.py DTYPE K SYNAPSE.tsv FAISS.tsv FAISS_EXT.tsv

SYNAPSE.tsv and FAISS.tsv are BEIR TSV runs (query-id, corpus-id, score,
best first); FAISS_EXT.tsv is faiss_search.py --extend's list of every
document whose faiss score reaches the query's k-th (within 1e-5 for
float32). synapse breaks ties by the smaller document id; faiss keeps
whichever tied documents its heap meets first. So the reference is faiss's
extended list sorted by (score descending, id ascending), cut to k: the
list faiss's scores give under synapse's tie rule.

  int8, binary (integer scores): synapse's k ids, their order and their
      scores must equal the reference exactly.
  float32: at every rank synapse's id must be the reference's, or both
      documents' faiss scores must be within 1e-5 (a near-tie that the two
      summation orders may decide either way); every synapse score must be
      within 1e-5 of faiss's score of the same document.

Prints one line of counts and exits 1 on any other difference, naming the
first ones.
"""
import sys
from collections import defaultdict

EPS = 1e-5


def read(path):
    runs = defaultdict(list)
    with open(path) as f:
        if f.readline().split("\t")[:2] != ["query-id", "corpus-id"]:
            sys.exit(f"{path}: not a BEIR TSV run")
        for n, line in enumerate(f, 2):
            q, d, s = line.rstrip("\n").split("\t")
            runs[q].append((d, float(s)))
    return runs


def main(argv):
    if len(argv) != 6:
        sys.exit(__doc__)
    dtype, k = argv[1], int(argv[2])
    syn, fai, ext = read(argv[3]), read(argv[4]), read(argv[5])
    exact = dtype != "float32"
    bad = []
    counts = dict(queries=0, ranks=0, same_as_faiss_order=0, tie_reordered=0, near_tie_swaps=0)
    max_diff = 0.0
    if set(syn) != set(fai):
        bad.append(f"query sets differ: {len(syn)} in synapse, {len(fai)} in faiss")
    for q in sorted(set(syn) & set(fai)):
        counts["queries"] += 1
        s = syn[q]
        fscore = dict(ext[q])
        fscore.update(dict(fai[q]))
        ref = sorted(fscore.items(), key=lambda h: (-h[1], h[0]))[:k]
        if len(s) != k or len(ref) != k:
            bad.append(f"{q}: {len(s)} synapse hits, {len(ref)} reference hits; want {k}")
            continue
        if [d for d, _ in fai[q]] != [d for d, _ in ref]:
            counts["tie_reordered"] += 1  # faiss's own order broke a tie otherwise
        if [d for d, _ in s] == [d for d, _ in fai[q]]:
            counts["same_as_faiss_order"] += 1
        for r, ((sd, ss), (rd, rs)) in enumerate(zip(s, ref), 1):
            counts["ranks"] += 1
            if sd not in fscore:
                bad.append(f"{q} rank {r}: synapse's {sd} (score {ss}) is not among faiss's documents at or above the k-th score")
                continue
            diff = abs(ss - fscore[sd])
            max_diff = max(max_diff, diff)
            if (exact and diff != 0) or diff > EPS:
                bad.append(f"{q} rank {r}: {sd} scores {ss} in synapse, {fscore[sd]} in faiss")
            if sd == rd:
                continue
            if not exact and abs(fscore[sd] - rs) <= EPS:
                counts["near_tie_swaps"] += 1
                continue
            bad.append(f"{q} rank {r}: synapse {sd} ({ss}), reference {rd} ({rs})")
    print(f"{dtype}: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + f", max |score diff| {max_diff:.3g}, differences {len(bad)}")
    for b in bad[:10]:
        print("  " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
