#!/bin/sh
# Print the interpreter the course's environment is built on: the newest Python that JAX 0.12
# installs on (3.13, then 3.12). A pyenv shim that does not run (a version pyenv has but has not
# selected) is skipped, and pyenv's own copy is tried instead. Exits 1 with a message if none runs.
#   scripts/find_python.sh            -> the first of 3.13, 3.12 that runs
#   scripts/find_python.sh 3.13       -> only 3.13 (the Colab simulation)
versions=${1:-"3.13 3.12"}
root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
for v in $versions; do
    for p in "python$v" "$root"/versions/"$v"*/bin/"python$v" /usr/local/bin/"python$v" /usr/bin/"python$v"; do
        if "$p" -c "import sys, venv; sys.exit(sys.version_info[:2] != tuple(map(int, '$v'.split('.'))))" >/dev/null 2>&1; then
            command -v "$p" 2>/dev/null || echo "$p"
            exit 0
        fi
    done
done
echo "error: this course needs Python $(echo $versions | sed 's/ / or /g') (JAX 0.12 installs on 3.12+)." >&2
echo "  Install one, e.g. 'pyenv install 3.13' (https://github.com/pyenv/pyenv), 'uv python install 3.13'," >&2
echo "  or your system's python3.13 package, then run make again (or: make PYTHON=/path/to/python3.13 ...)." >&2
exit 1
