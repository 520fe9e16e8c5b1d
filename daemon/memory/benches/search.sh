#!/usr/bin/env bash
# Runs the memory search benchmark (release build) and prints the medians
# against the budgets of SPEC §14: hybrid search over 10k chunks × 384-d
# ≤ 3 ms p50, over 100k ≤ 12 ms p50; plus each leg alone and the cost of
# embedding one query with all-MiniLM-L6-v2 (installed by tests/setup.sh),
# and each part of a search alone (benches/parts/mod.rs: sqlite-vec's KNN,
# the popcount reference, re-scoring reads, FTS5 steps, row reads, MMR).
# Also indexing throughput with that model and MEMORY.md save → searchable.
# Usage: bash daemon/memory/benches/search.sh   (PINCER_BENCH_SIZES=10000 skips 100k)
set -euo pipefail
cd "$(dirname "$0")/../../.."
cargo bench --quiet -p pincer-memory --bench hybrid_search -- --warm-up-time 2 --measurement-time 5 >&2
median() {
  python3 -c 'import json, sys; print("%.2f" % (json.load(open(sys.argv[1]))["median"]["point_estimate"] / 1e6))' "$1"
}
printf '\n%-46s %10s %10s\n' "measure (median)" "value" "budget"
IFS=',' read -ra sizes <<< "${PINCER_BENCH_SIZES:-10000,100000}"
for size in "${sizes[@]}"; do
  budget=-; [ "$size" = 10000 ] && budget=3; [ "$size" = 100000 ] && budget=12
  for leg in hybrid vector_only text_only; do
    f="${CARGO_TARGET_DIR:-target}/criterion/memory_search/$leg/$size/new/estimates.json"
    [ -f "$f" ] || continue
    b=-; [ "$leg" = hybrid ] && b=$budget
    printf '%-46s %7s ms %7s ms\n' "$leg search, $size chunks × 384-d" "$(median "$f")" "$b"
  done
  for f in "${CARGO_TARGET_DIR:-target}"/criterion/memory_search_parts/*/"$size"/new/estimates.json; do
    [ -f "$f" ] || continue
    part=$(basename "$(dirname "$(dirname "$(dirname "$f")")")")
    printf '%-46s %7s ms %7s\n' "  part: $part" "$(median "$f")" "-"
  done
done
f=${CARGO_TARGET_DIR:-target}/criterion/query_embedding_all-MiniLM-L6-v2/new/estimates.json
[ -f "$f" ] && printf '%-46s %7s ms %7s\n' "embedding the query (all-MiniLM-L6-v2)" "$(median "$f")" "-"
f=${CARGO_TARGET_DIR:-target}/criterion/indexing/all-MiniLM-L6-v2/new/estimates.json
[ -f "$f" ] && printf '%-46s %7s /s %7s\n' "indexing with all-MiniLM-L6-v2 (chunks)" \
  "$(python3 -c 'import json, sys; print("%.0f" % (64 / (json.load(open(sys.argv[1]))["median"]["point_estimate"] / 1e9)))' "$f")" "-"
f=${CARGO_TARGET_DIR:-target}/criterion/save_to_searchable/MEMORY.md/new/estimates.json
[ -f "$f" ] && printf '%-46s %7s ms %7s ms\n' "MEMORY.md saved → found by search" "$(median "$f")" 500
exit 0
