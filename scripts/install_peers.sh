#!/bin/sh
# The peer routers `tao bench live --peers-venv VENV` compares against, in a virtualenv of their own
# (never in the project's .venv: their dependencies must not touch ours, and we never vendor their code):
#
#   scripts/install_peers.sh VENV [THUNDERAGENT]
#
# - vllm-router 0.1.17 from PyPI (`vllm-router-program`, `vllm-router-ca`);
# - ThunderAgent (`thunderagent`) from THUNDERAGENT, when given: a checkout of ThunderAgent-org/ThunderAgent,
#   its git directory (a bare clone or mirror; HEAD is exported), or a source archive (.tar.gz, .tgz, .zip)
#   of it. ThunderAgent is not on PyPI; its own dependencies (fastapi, httpx, uvicorn) are.
#
# Exported from a git directory, only the package's tree and its build files are read (not the examples
# tree, which the package does not need and of which a partial clone may lack a file: `git archive HEAD
# ThunderAgent ...` walks the whole tree and reports that file as an invalid object). Where it came from
# (the commit) is written to VENV/thunderagent-source.txt, which the benchmark's results quote.
set -eu
VLLM_ROUTER_VERSION=0.1.17
PYTHON=${PYTHON:-python3}

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 VENV [THUNDERAGENT_CHECKOUT_GIT_DIR_OR_ARCHIVE]" >&2
    exit 2
fi
VENV=$1
SOURCE=${2:-}

test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet "vllm-router==$VLLM_ROUTER_VERSION"
echo "vllm-router $VLLM_ROUTER_VERSION installed in $VENV"
[ -n "$SOURCE" ] || exit 0

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
if [ -f "$SOURCE/pyproject.toml" ]; then
    cp -R "$SOURCE" "$WORK/src"
    ORIGIN="checkout $SOURCE$(git -C "$SOURCE" rev-parse HEAD 2>/dev/null | sed 's/^/ at /')"
elif git --git-dir="$SOURCE" rev-parse --verify -q HEAD >/dev/null 2>&1; then
    mkdir "$WORK/src"
    git --git-dir="$SOURCE" archive --prefix=ThunderAgent/ HEAD:ThunderAgent | tar -x -C "$WORK/src"
    for file in pyproject.toml README.md; do
        git --git-dir="$SOURCE" show "HEAD:$file" > "$WORK/src/$file"
    done
    ORIGIN="git $SOURCE at $(git --git-dir="$SOURCE" rev-parse HEAD)"
else
    case "$SOURCE" in
        *.tar.gz|*.tgz) mkdir "$WORK/unpacked" && tar -xzf "$SOURCE" -C "$WORK/unpacked" ;;
        *.zip) "$PYTHON" -m zipfile -e "$SOURCE" "$WORK/unpacked" ;;
        *) echo "$SOURCE: not a ThunderAgent checkout, git directory or .tar.gz/.tgz/.zip archive" >&2
           exit 2 ;;
    esac
    # An archive holds the tree at its top or in one folder (GitHub's NAME-REF/).
    TOP=$(dirname "$(find "$WORK/unpacked" -maxdepth 2 -name pyproject.toml | head -n 1)")
    [ -f "$TOP/pyproject.toml" ] || { echo "$SOURCE: no pyproject.toml inside" >&2; exit 2; }
    mv "$TOP" "$WORK/src"
    ORIGIN="archive $SOURCE"
fi
grep -q '^name = "ThunderAgent"' "$WORK/src/pyproject.toml" || {
    echo "$SOURCE: its pyproject.toml is not ThunderAgent's" >&2; exit 2; }
"$VENV/bin/python" -m pip install --disable-pip-version-check --quiet "$WORK/src"
echo "$ORIGIN" > "$VENV/thunderagent-source.txt"
echo "ThunderAgent ($ORIGIN) installed in $VENV: $VENV/bin/thunderagent"
