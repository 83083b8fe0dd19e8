#!/usr/bin/env bash
# Fail when a tracked file (as staged in the index) is larger than MAX_BYTES (default 1 MiB) and is
# not listed in hack/large-files-allowed.txt. Catches build outputs committed by accident
# (`go build ./hack/dev` run at the root once put a 55 MB executable into the tree).
set -euo pipefail
cd "$(dirname "$0")/.."

max="${MAX_BYTES:-1048576}"
allow=hack/large-files-allowed.txt

declare -A allowed=()
if [[ -f $allow ]]; then
	while IFS= read -r line; do
		line="${line%%#*}"
		line="${line%"${line##*[![:space:]]}"}"
		[[ -n $line ]] && allowed["$line"]=1
	done <"$allow"
fi

status=0
# Index entries: "<mode> <object> <stage>\t<path>"; sizes come from the staged blobs.
while IFS=$'\t' read -r size path; do
	if ((size > max)) && [[ -z ${allowed[$path]:-} ]]; then
		echo "tracked file over $max bytes: $path ($size bytes); remove it (build output?) or add it to $allow" >&2
		status=1
	fi
done < <(git ls-files -s -z | tr '\0' '\n' | awk -F'\t' '{split($1, a, " "); print a[2] "\t" $2}' |
	git cat-file --batch-check=$'%(objectsize)\t%(rest)')

exit "$status"
