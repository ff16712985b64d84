#!/usr/bin/env bash
# Instruction counts (valgrind's callgrind) of each contender's import, fetch
# and fault phases: unlike times, they do not move with the machine's load.
#
#   Benchmarks/Scripts/instruction-counts.sh [N]       (default N = 10000)
#   Benchmarks/Scripts/instruction-counts.sh --search [ROWS]
#                                    (the search task's queries on ROWS companies, default 20000)
#   Benchmarks/Scripts/instruction-counts.sh --upsert [ROWS]
#                                    (the upsert task: ROWS imported, half of them stored before; default 20000)
#   Benchmarks/Scripts/instruction-counts.sh --batch [ROWS]
#                                    (the insert task: one batch insert of ROWS, each form alone; default 100000)
#   Benchmarks/Scripts/instruction-counts.sh --search-import [ROWS]
#                                    (the search task's import of ROWS companies, name indexed and not; default 100000)
#
# Each phase is counted alone, in a run of its own, by toggling collection on
# the phase's function (its mangled name: a pattern that also matched the
# `TA` thunk around a closure would toggle collection off again). Counts include
# the 1,000-row warm-up pass, as every contender's do. Needs a release build
# (`swift build -c release --package-path Benchmarks`; it refuses one older than
# any source, which a failed build leaves behind) and valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
search=false
upsert=false
if [ "${1:-}" = "--search" ]; then search=true; shift; fi
if [ "${1:-}" = "--upsert" ]; then upsert=true; shift; fi
batch=false
search_import=false
if [ "${1:-}" = "--batch" ]; then batch=true; shift; fi
if [ "${1:-}" = "--search-import" ]; then search_import=true; shift; fi
n="${1:-10000}"
binary=.build/release/datastack-benchmarks
[ -x "$binary" ] || { echo "error: build first: swift build -c release --package-path Benchmarks" >&2; exit 1; }
# A build that failed leaves the previous binary in place: counting it would measure old code.
stale="$(find ../Sources Sources ../Package.swift Package.swift -name '*.swift' -newer "$binary" -print -quit)"
[ -z "$stale" ] || { echo "error: $stale is newer than $binary: build again (swift build -c release --package-path Benchmarks)" >&2; exit 1; }

# valgrind 3.19 crashes in libdispatch's sigsuspend (README, "Profiling it yourself").
shim="${TMPDIR:-/tmp}/sigsuspend_shim.so"
if [ ! -f "$shim" ]; then
    cat > "${shim%.so}.c" <<'C'
#define _GNU_SOURCE
#include <signal.h>
#include <unistd.h>
#include <sys/syscall.h>
int sigsuspend(const sigset_t *mask) { sigset_t copy = *mask; return (int)syscall(SYS_rt_sigsuspend, &copy, 8); }
C
    gcc -O2 -shared -fPIC -o "$shim" "${shim%.so}.c"
fi

prefix='$s19DataStackBenchmarks'
# The importer context's work per chunk: the objects made, the save, the reset (the closure
# saveChunk runs on the importer's queue; the hash is StackManager+Import.swift's).
save_chunk='$s9DataStack0B7ManagerC9saveChunk33_E2CD26EACED56161CB1A037425618410LL_10onConflict_Si_SitSayxG_AA06ImportL10ResolutionOyAG_11ObjectGraph07ManagedO7ContextCtYbKctYaKs8SendableRzlFSi_SityYbKcfU_'

# The instructions run inside the function PATTERN names, in one run of the benchmarks with ARGS.
#   callgrind_count PATTERN ARGS...
callgrind_count() {
    local pattern="$1" out
    shift
    out="$(mktemp)"
    LD_PRELOAD="$shim" valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$pattern" \
        "$binary" "$@" > /dev/null 2>&1
    callgrind_annotate "$out" 2> /dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
    rm -f "$out"
}

# The search task: each query function (none calls another) counted alone, in a run of its
# own without the task's import measurement. Each runs twice (the untimed pass and the one
# repetition): the counts are halved, one pass.
if $search; then
    rows="${1:-20000}"
    search_prefix="${prefix}15SearchBenchmarkO"
    declare -A search_phase=(
        [raw]="${search_prefix}03rawD0_5index2ons8DurationV_SitSS_SSAA13RawConnectionCtKFZ*"
        [raw-ranked]="${search_prefix}09rawRankedD0_5limit5index2ons8DurationV_SitSS_SiSSAA13RawConnectionCtKFZ*"
        [search]="${search_prefix}11searchFetch_2ins8DurationV_SitSS_11ObjectGraph07ManagedJ7ContextCtKFZ"
        [scan]="${search_prefix}9scanFetch_2ins8DurationV_SitSS_11ObjectGraph07ManagedJ7ContextCtKFZ"
        [ranked]="${search_prefix}11rankedFetch_5limit2ins8DurationV_SitSS_Si11ObjectGraph07ManagedK7ContextCtKFZ"
    )
    search_count() {
        callgrind_count "$1" --tasks search --search-rows "$rows" --repetitions 1 --no-search-import | awk '{ print $1 / 2 }'
    }
    raw=$(search_count "${search_phase[raw]}"); found=$(search_count "${search_phase[search]}")
    scanned=$(search_count "${search_phase[scan]}")
    raw_ranked=$(search_count "${search_phase[raw-ranked]}"); ranked=$(search_count "${search_phase[ranked]}")
    echo "| search, $rows companies: instructions of one pass | raw FTS5 | DataStack | × raw |"
    echo "|---|---|---|---|"
    awk -v r="$raw" -v d="$found" 'BEGIN { printf "| MATCHES[search], the 4 queries | %.2f M | %.2f M | %.2f× |\n", r / 1e6, d / 1e6, d / r }'
    awk -v r="$raw" -v d="$scanned" -v s="$found" 'BEGIN {
        printf "| CONTAINS[cd], the same 4 (%.0f× the search) | %.2f M | %.2f M | %.2f× |\n", d / s, r / 1e6, d / 1e6, d / r }'
    awk -v r="$raw_ranked" -v d="$ranked" 'BEGIN {
        printf "| relevance sort, limit 20 (raw: ORDER BY rank) | %.2f M | %.2f M | %.2f× |\n", r / 1e6, d / 1e6, d / r }'
    exit 0
fi
# The upsert task (issue #36): raw SQLite's `INSERT … ON CONFLICT DO UPDATE` (its own function,
# `UpsertBenchmark.rawUpsert`) against `performImport(_:upserting:by:key:_:)`: the importer's
# chunks (`saveChunk`'s closure: lookup, objects, save, reset). The stores are seeded by other
# functions, so neither count includes the rows stored before. Chunks of 10,000, as the task's.
if $upsert; then
    rows="${1:-20000}"
    upsert_count() { callgrind_count "$1" --tasks upsert --upsert-rows "$rows" --repetitions 1; }
    raw=$(upsert_count "${prefix}15UpsertBenchmarkO03rawD0_9chunkSize4into*")
    datastack=$(upsert_count "$save_chunk")
    echo "| upsert, $rows rows ($((rows / 2)) stored before) | raw SQLite (ON CONFLICT DO UPDATE) | DataStack performImport(upserting:) | × raw |"
    echo "|---|---|---|---|"
    awk -v r="$raw" -v d="$datastack" -v n="$rows" 'BEGIN {
        printf "| instructions (per row) | %.1f M (%.1f k) | %.1f M (%.1f k) | %.2f× |\n", r / 1e6, r / n / 1e3, d / 1e6, d / n / 1e3, d / r }'
    exit 0
fi
# The insert task (issue #36): each form in a run of its own (`--insert-forms`), counted alone: raw
# SQLite's timed closure (the transaction, the prepared INSERT bound by position, Z_MAX), and
# DataStack's `execute(_: BatchInsertRequest)` (the handler form with the handler's own dictionary
# filling; the `objects:` form with the dictionaries built before; the handler form with history).
# Counts include the 1,000-row warm-up pass, as every form's does.
if $batch; then
    rows="${1:-100000}"
    batch_count() { callgrind_count "$2" --tasks insert --insert-rows "$rows" --insert-forms "$1" --repetitions 1; }
    execute='$s11ObjectGraph07ManagedA7ContextC7executeyAA11BatchResultOAA0F13InsertRequestVKF'
    raw=$(batch_count raw "${prefix}20BatchInsertBenchmarkO3raw33_AC93FE82815D42E3F61D31850A060572LL_4intoAC6TimingVSayAA12TickerValuesVG_20FoundationEssentials3URLVtKFZyyKXEfU_")
    echo "| batch insert, $rows rows (+ 1,000 warm-up) | instructions (per row) | × raw |"
    echo "|---|---|---|"
    awk -v r="$raw" -v n="$rows" 'BEGIN { printf "| raw SQLite (prepared INSERT) | %.1f M (%.2f k) | 1.00× |\n", r / 1e6, r / (n + 1000) / 1e3 }'
    for form in handler objects tracked; do
        count=$(batch_count "$form" "$execute")
        awk -v f="$form" -v r="$raw" -v d="$count" -v n="$rows" 'BEGIN {
            printf "| DataStack, %s | %.1f M (%.2f k) | %.2f× |\n", f, d / 1e6, d / (n + 1000) / 1e3, d / r }'
    done
    exit 0
fi
# The search task's import (issue #36): the companies imported through the stack into the entity
# with `name` not indexed and indexed, each in a run of its own (`--search-import-only`), counted
# as the import task's are (the importer's chunks: `saveChunk`'s closure). Chunks of 10,000.
if $search_import; then
    rows="${1:-100000}"
    import_count() {
        callgrind_count "$save_chunk" --tasks search --search-rows "$rows" --search-import-only "$1" --repetitions 1
    }
    plain=$(import_count plain); indexed=$(import_count indexed)
    echo "| search import, $rows companies | name not indexed | name indexed | indexed ÷ not |"
    echo "|---|---|---|---|"
    awk -v p="$plain" -v i="$indexed" -v n="$rows" 'BEGIN {
        printf "| instructions (per row) | %.1f M (%.1f k) | %.1f M (%.1f k) | %.2f× |\n", p / 1e6, p / n / 1e3, i / 1e6, i / n / 1e3, i / p }'
    exit 0
fi
declare -A phase=(
    [raw/import]="${prefix}9RawSQLiteC6insert_9chunkSize9upsertingySayAA12TickerValuesVG_SiSbtKF"
    [raw/fetch]="${prefix}9RawSQLiteC8fetchAllAA8ChecksumVyKF"
    # Raw SQLite also writing Core Data's history as DataStack does (RawSQLiteWithHistory.swift).
    [raw-history/import]="${prefix}20RawSQLiteWithHistoryC6insert_9chunkSizeySayAA12TickerValuesVG_SitKF"
    [raw/fault-ids]="${prefix}9RawSQLiteC16fetchIDsThenRows5everyAA8ChecksumVSi_tKF"
    [grdb-hand-written/import]="${prefix}9GRDBBenchO6insert_9chunkSize2as4intoySayAA12TickerValuesVG_SiAC6RecordO4GRDB13DatabaseQueueCtKFZyAM0N0CKXEfU_"
    [grdb-hand-written/fetch]="${prefix}9GRDBBenchO8fetchAll2as4fromAA8ChecksumVAC6RecordO_4GRDB13DatabaseQueueCtKFZAhK0L0CKXEfU_"
    [grdb-hand-written/fault-ids]="${prefix}9GRDBBenchO19fetchIDsThenRecords5every2as4fromAA8ChecksumVSi_AC6RecordO4GRDB13DatabaseQueueCtKFZAiL0O0CKXEfU_"
    [datastack/import]="$save_chunk"
    [datastack/fetch]="${prefix}0aB5BenchO8fetchAll2inAA8ChecksumV11ObjectGraph07ManagedI7ContextC_tYaKFZAGyYbKcfU_"
    [datastack/fault-rows]="${prefix}0aB5BenchO19fetchFaultsThenFire5every2inAA8ChecksumV_Si4hits_Si6missest5cachetSi_11ObjectGraph07ManagedO7ContextCtYaKFZAH_SiAI_SiAJtAKtyYbKcfU_"
    [datastack/fault-ids]="${prefix}0aB5BenchO21fetchIDFaultsThenFire5every2inAA8ChecksumV_Si4hits_Si6missest5cachetSi_11ObjectGraph07ManagedO7ContextCtYaKFZAH_SiAI_SiAJtAKtyYbKcfU_"
    [grdb-hand-written/fault-rows]="${prefix}9GRDBBenchO20fetchRecordsThenRead5every4fromAA8ChecksumVSi_4GRDB13DatabaseQueueCtKFZAhI0M0CKXEfU_SiTf3nnpSi100_n"
)

count() {
    # shellcheck disable=SC2086  # ${3:-}: extra options, split into words
    callgrind_count "$2" --n "$n" --repetitions 1 --contenders "$1" --tasks import,fetch,fault --no-history-off-import ${3:-}
}

echo "| phase (N = $n + 1,000 warm-up) | raw SQLite | GRDB hand-written | DataStack | DataStack × raw | DataStack × GRDB |"
echo "|---|---|---|---|---|---|"
row() {   # label, raw count, GRDB count, DataStack count
    awk -v t="$1" -v r="$2" -v g="$3" -v d="$4" 'BEGIN {
        printf "| %s | %.1f M | %.1f M | %.1f M | %.2f× | %.2f× |\n", t, r / 1e6, g / 1e6, d / 1e6, d / r, d / g }'
}
raw_import=$(count raw "${phase[raw/import]}")
datastack_import=$(count datastack "${phase[datastack/import]}")
row import "$raw_import" "$(count grdb-hand-written "${phase[grdb-hand-written/import]}")" "$datastack_import"
row fetch "$(count raw "${phase[raw/fetch]}")" "$(count grdb-hand-written "${phase[grdb-hand-written/fetch]}")" \
    "$(count datastack "${phase[datastack/fetch]}")"
# The raw contender fetches IDs in the fault task; GRDB does it both ways, like DataStack.
raw_fault=$(count raw "${phase[raw/fault-ids]}")
row "fault, rows read (DataStack's default; GRDB fetchAll)" "$raw_fault" \
    "$(count grdb-hand-written "${phase[grdb-hand-written/fault-rows]}")" "$(count datastack "${phase[datastack/fault-rows]}")"
row "fault, IDs only (includesPropertyValues = false; GRDB IDs)" "$raw_fault" \
    "$(count grdb-hand-written "${phase[grdb-hand-written/fault-ids]}")" "$(count datastack "${phase[datastack/fault-ids]}")"

# Import like against like. DataStack's default tracks history (an ACHANGE row per object), against
# raw SQLite writing the same history rows; DataStack with history off against plain raw SQLite. The
# history-off import is counted as both imports (the second one with history off) less the default's.
raw_history_import=$(count raw-history "${phase[raw-history/import]}")
both_imports=$(count datastack "${phase[datastack/import]}" --history-off-import)
echo
echo "| import (N = $n + 1,000 warm-up) | raw SQLite | raw SQLite + history | DataStack, history tracked | DataStack, history off | tracked ÷ raw + history | off ÷ raw |"
echo "|---|---|---|---|---|---|---|"
awk -v r="$raw_import" -v h="$raw_history_import" -v d="$datastack_import" -v b="$both_imports" 'BEGIN {
    o = b - d
    printf "| instructions | %.1f M | %.1f M | %.1f M | %.1f M | %.2f× | %.2f× |\n", r / 1e6, h / 1e6, d / 1e6, o / 1e6, d / h, o / r }'
