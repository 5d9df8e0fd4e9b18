# Shared by the CI jobs (.ci/lowest, .ci/package); sourced, not run.

# The packages whose versions each job prints.
KEY_PACKAGES='pytest|pytest-xdist|syrupy|hypothesis|huggingface-hub|websockets|open-spiel|openai|anthropic|httpx|pydantic|execnet|numpy|requests|pytest-openenv'

# Print the interpreter and the installed versions of the key packages.
show_versions() {
    local python=$1
    echo "python: $("$python" -c 'import sys; print(sys.version.split()[0])') ($python)"
    "$python" -m pip list --format=freeze 2>/dev/null |
        grep -iE "^(${KEY_PACKAGES//-/[-_]})==" | sed 's/^/  /'
}

# The interpreter for Python X.Y: pythonX.Y on PATH, else the newest pyenv X.Y.*.
find_python() {
    local version=$1 candidate
    if candidate=$(command -v "python$version") && "$candidate" -c '' 2>/dev/null; then
        echo "$candidate"
        return
    fi
    local root
    root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
    candidate=$(ls -d "$root"/versions/"$version".*/bin/python"$version" 2>/dev/null |
        sort -V | tail -n 1)
    if [ -z "$candidate" ]; then
        echo "no Python $version on this machine" >&2
        return 1
    fi
    echo "$candidate"
}

# The README's headline command with PYTHON in a fresh empty folder, on WORKERS workers:
# it must exit 0 and keep all 200 episodes in openenv-results/results.jsonl.
headline() {
    local python=$1 workers=$2 folder rows code=0
    folder=$(mktemp -d)
    (cd "$folder" && "$python" -m pytest --openenv-env=openspiel:tic_tac_toe --openenv-n=200 \
        -n "$workers") | tail -n 16 || code=$?
    rows=$(wc -l <"$folder/openenv-results/results.jsonl" 2>/dev/null || echo 0)
    rm -rf "$folder"
    echo "headline: exit $code, $rows rows in openenv-results/results.jsonl"
    if [ "$code" -ne 0 ] || [ "$rows" -ne 200 ]; then
        echo "FAILED: the headline command must exit 0 with 200 rows" >&2
        return 1
    fi
}

# "<name>: N s" for a job that started at $1 (bash's SECONDS).
report_time() {
    echo "== $2 wall time: $((SECONDS - $1)) s"
}

# Start COMMAND... in the background as job NAME, its output kept in PREFIX.log; then
# wait_for NAME PREFIX prints that output and the job's wall time, and fails as it failed.
in_background() {
    local name=$1 prefix=$2
    shift 2
    echo "== $name: started in the background"
    (
        start=$SECONDS
        code=0
        "$@" >"$prefix.log" 2>&1 || code=$?
        echo "$code $((SECONDS - start))" >"$prefix.result"
    ) &
    echo $! >"$prefix.pid"
}

wait_for() {
    local name=$1 prefix=$2 code seconds
    wait "$(cat "$prefix.pid")" || true
    read -r code seconds <"$prefix.result"
    echo "== $name (in the background), exit $code:"
    sed 's/^/  /' "$prefix.log"
    echo "== $name wall time: $seconds s"
    if [ "$code" -ne 0 ]; then
        echo "FAILED: $name" >&2
        return "$code"
    fi
}

# Copy the tree to DEST: the files git tracks and the new ones it does not ignore. A job
# that installs or builds from a copy of its own can run beside the others: an install or a
# build writes the tree's *.egg-info, which another job's would read half-written.
tree_copy() {
    local dest=$1
    mkdir -p "$dest"
    if git rev-parse --git-dir >/dev/null 2>&1; then
        git ls-files -z -co --exclude-standard |
            tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$dest"
    else
        tar --exclude=.git --exclude='*.egg-info' -cf - . | tar -xf - -C "$dest"
    fi
}
