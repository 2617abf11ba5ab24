#!/usr/bin/env bash
# Mutation testing by hand (issue 15): plant small bugs (mutmut) in the modules whose tests must
# catch them and count the survivors. Not part of the default suite: slow, run before a release or
# after changing these modules' tests.
#
#   scripts/mutation.sh                      # the default set: diff/, compare/pairing/, nanbisect engine, cli.py
#   scripts/mutation.sh 'inspector_cli/diff/metrics.py'   # one module (glob patterns, as mutmut's only_mutate)
#   MI_MUTATION_JOBS=2 scripts/mutation.sh  # parallel mutants (default 1: this machine has 2 shared cores)
#
# Works on a scratch copy (never in the checkout: mutmut writes mutants/ and rewrites imports), so
# the worktree stays clean. mutmut is a dev tool installed on demand into ./.venv, not a dependency.
# The survivors that remain are listed, with why they are equivalent, in docs/hostile-input.md.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
python="$here/.venv/bin/python"
[ -x "$python" ] || { echo "Error: no ./.venv: run 'source scripts/_venv.sh && install_project [dev]' first" >&2; exit 2; }
"$python" -c 'import mutmut' 2>/dev/null || "$python" -m pip install -q 'mutmut==3.8.1'

if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    targets=("inspector_cli/diff/*" "inspector_cli/compare/pairing/score.py" "inspector_cli/compare/pairing/match.py"
             "inspector_cli/nanbisect/batch.py" "inspector_cli/nanbisect/values.py" "inspector_cli/nanbisect/analyse.py"
             "inspector_cli/nanbisect/locate.py" "inspector_cli/cli.py")
fi
# The tests that exercise those modules in-process (subprocess tests would import the unmutated code).
tests=(tests/diff tests/nanbisect tests/compare/test_match.py tests/compare/test_pairing_qkv.py
       tests/compare/test_compare_cli.py tests/hostile/test_planted_bugs.py tests/hostile/test_numpy_warnings.py
       tests/test_cli_global_options.py)

scratch="${MI_MUTATION_DIR:-$(mktemp -d /tmp/mi-mutation.XXXXXX)}"
mkdir -p "$scratch"
# the tracked files as they are now (uncommitted edits included), without .venv, .git or old mutants
(cd "$here" && git ls-files -co --exclude-standard -z | tar --null -T - -cf - ) | (cd "$scratch" && tar -xf -)
cd "$scratch"
{
    echo "[mutmut]"
    echo "source_paths = inspector_cli"
    printf 'only_mutate =\n'; for t in "${targets[@]}"; do printf '    %s\n' "$t"; done
    printf 'pytest_add_cli_args_test_selection =\n'; for t in "${tests[@]}"; do printf '    %s\n' "$t"; done
    printf 'pytest_add_cli_args =\n    -p\n    no:cacheprovider\n    -q\n    --ignore=tests/nanbisect/test_nan_bisect_kill.py\n'
    echo "mutate_only_covered_lines = true"
    printf 'also_copy =\n'; for d in configs docs schemas examples; do if [ -e "$d" ]; then printf '    %s\n' "$d"; fi; done
} > "$scratch/setup.cfg.new"
mv "$scratch/setup.cfg.new" "$scratch/setup.cfg"
# mutmut reads pyproject.toml's [tool.mutmut] first; the project has none, so setup.cfg applies.

echo "mutation testing in $scratch: ${targets[*]}" >&2
"$here/.venv/bin/mutmut" run --max-children "${MI_MUTATION_JOBS:-1}" || true
"$here/.venv/bin/mutmut" results --all true > "$scratch/results.txt" 2>&1 || true
killed=$(grep -c ': killed' "$scratch/results.txt" || true)
survived=$(grep -c ': survived' "$scratch/results.txt" || true)
other=$(grep -vc -E ': (killed|survived)$' "$scratch/results.txt" || true)
total=$((killed + survived))
pct=$(awk -v s="$survived" -v t="$total" 'BEGIN { printf "%.1f", t ? 100 * s / t : 0 }')
echo "mutants: $total judged, $killed killed, $survived survived ($pct%), $other other (timeout/no tests/skipped)"
echo "survivors: grep survived $scratch/results.txt; diff of one: (cd $scratch && $here/.venv/bin/mutmut show NAME)"
