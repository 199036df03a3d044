# Sourced by infra/ci/smdebug_venv.sh, infra/ci/sagemaker_venv.sh and infra/ci/sagemaker3_venv.sh: one isolated virtualenv
# with exactly the given packages, built once even when several pytest sessions ask at once.
#
# ensure_venv NAME DIR PYTHON CHECK PACKAGE...
#   NAME names the stamp file (DIR/.NAME-installed: the package list it was built with) and the
#   lock (DIR.lock); CHECK is Python code run in the venv after installing (it must fail on a
#   wrong install). Prints DIR/bin/python on the last stdout line.
ensure_venv() {
    local name=$1 dir=$2 python=$3 check=$4
    shift 4
    local stamp="$dir/.$name-installed" want
    want="$(printf '%s\n' "$@")"
    if ! _venv_ready "$dir" "$stamp" "$want"; then
        mkdir -p "$(dirname "$dir")"
        exec 9>"$dir.lock"
        flock 9
        if ! _venv_ready "$dir" "$stamp" "$want"; then  # another session may have built it meanwhile
            echo "creating $name venv in $dir" >&2
            test -x "$dir/bin/python" || "$python" -m venv "$dir"
            "$dir/bin/python" -m pip install -q --disable-pip-version-check "$@" >&2
            "$dir/bin/python" -c "$check" >&2
            printf '%s\n' "$@" > "$stamp"
        fi
        exec 9>&-
    fi
    echo "$dir/bin/python"
}

_venv_ready() {
    [[ -f "$2" && "$(cat "$2")" == "$3" && -x "$1/bin/python" ]]
}
