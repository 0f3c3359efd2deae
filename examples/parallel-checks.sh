#!/usr/bin/env bash
# Start several attempts side by side, wait for all of them without polling, and read
# their envelopes with jq. Exits with the worst exit code of the runs, like `wait --all`.
#
#   examples/parallel-checks.sh            # uses `subpane` from PATH
#   SUBPANE=target/release/subpane examples/parallel-checks.sh
set -euo pipefail

subpane=${SUBPANE:-subpane}
tag="checks-$$"

# Each `run --detach --json` prints one JSON object; its run_id is all we keep.
start() {
    "$subpane" run --detach --json --label "batch=$tag" "$@" | jq -r .run_id
}

ids=(
    "$(start --timeout 1m -- sh -c 'echo "{\"check\":\"lint\",\"ok\":true}"; echo linted')"
    "$(start --timeout 1m -- sh -c 'echo compiling >&2; echo "{\"check\":\"build\",\"ok\":true}"')"
    "$(start --timeout 300ms -- sleep 5)"
)

# One JSON array of envelopes; the exit code is the worst of the runs.
set +e
"$subpane" wait --all --json "${ids[@]}" > "/tmp/$tag.json"
worst=$?
set -e

jq -r '.[] | [.run_id, .status, (.failure_kind // "-"), (.exit_code // "-"), .duration_ms] | @tsv' "/tmp/$tag.json" |
    while IFS=$'\t' read -r id status kind code ms; do
        printf '%-28s %-10s %-13s exit=%-4s %sms\n' "$id" "$status" "$kind" "$code" "$ms"
    done

# Every envelope lists its files with size and sha256; count the events the checks emitted.
for id in "${ids[@]}"; do
    events=$("$subpane" logs --events "$id" | jq -s 'length')
    echo "$id: $events event(s)"
done

rm -f "/tmp/$tag.json"
exit "$worst"
