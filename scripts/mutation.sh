#!/usr/bin/env bash
# Mutation testing by hand (issue 15): plant small bugs (mutmut) in the modules whose tests must
# catch them and count the survivors. Not part of the default suite: slow, run before a release or
# after changing these modules' tests. One module at a time, each with the tests that exercise it:
#
#   scripts/mutation.sh diff                 # inspector_cli/diff/* (metrics, fast stats, engine, gates)
#   scripts/mutation.sh nanbisect            # the nan-bisect engine, inspector_cli/nanbisect/*
#   scripts/mutation.sh cli                  # inspector_cli/cli.py (error boundary, exit codes)
#   scripts/mutation.sh pairing              # inspector_cli/compare/pairing/*
#   scripts/mutation.sh diff 'inspector_cli/diff/gates.py'   # a module's tests, fewer files (globs)
#   MI_MUTATION_DIR=/tmp/mi-mut-diff scripts/mutation.sh diff   # reuse a scratch copy: only new mutants run
#   MI_MUTATION_RERUN=survivors MI_MUTATION_DIR=... scripts/mutation.sh diff   # re-judge the survivors
#                                                                              # after adding tests
#   MI_MUTATION_RERUN=unjudged ...   # the survivors and the mutants not judged yet (a run stopped early)
#   MI_MUTATION_JOBS=2 scripts/mutation.sh diff   # parallel mutants (default 1: 2 shared cores here)
#   MI_MUTATION_ONLY='inspector_cli.nanbisect.locate.x*_explain__mutmut_*' ...   # only these mutants (fnmatch)
#   MI_MUTATION_TESTS=fast MI_MUTATION_DIR=/tmp/mi-mut-diff-fast scripts/mutation.sh diff   # unit tests only:
#       every mutant judged in reasonable time; then its survivors with the full selection:
#   MI_MUTATION_SURVIVORS_FROM=/tmp/mi-mut-diff-fast MI_MUTATION_DIR=/tmp/mi-mut-diff-full scripts/mutation.sh diff
#
# Works on a scratch copy (never in the checkout: mutmut writes mutants/ and rewrites imports), so
# the worktree stays clean. mutmut is a dev tool installed on demand into ./.venv, not a dependency.
# It runs under `nice -n 19`. The survivors that remain are listed, each with why it is equivalent,
# in docs/development.md (Mutation testing).
set -euo pipefail

# The whole script is one function, read before it runs: editing this file during a run (hours) is safe.
main() {
    here="$(cd "$(dirname "$0")/.." && pwd)"
    python="$here/.venv/bin/python"
    [ -x "$python" ] || { echo "Error: no ./.venv: run 'source scripts/_venv.sh && install_project [dev]' first" >&2; exit 2; }
    "$python" -c 'import mutmut' 2>/dev/null || "$python" -m pip install -q 'mutmut==3.8.1'

    module="${1:-}"
    extra=()
    unset fast_rest
    # Per module: the files to mutate, and the in-process tests that exercise them (a test that runs
    # `mi` in a subprocess imports the unmutated code, so it cannot kill a mutant; mutmut runs only the
    # tests that cover the mutated function, so a wider selection costs little beyond the first pass).
    case "$module" in
        diff)
            targets=("inspector_cli/diff/*")
            fast=(tests/diff tests/hostile/test_planted_bugs.py)
            tests=("${fast[@]}" tests/compare/test_compare_cli.py tests/compare/test_layers.py) ;;
        nanbisect)
            # the origin logic first (scan, backward walk, origins, bad values); the rest of the engine
            # (regions, describe, rootcause, fullscan, nested...) with: scripts/mutation.sh nanbisect 'inspector_cli/nanbisect/*'
            targets=("inspector_cli/nanbisect/analyse.py" "inspector_cli/nanbisect/locate.py"
                     "inspector_cli/nanbisect/values.py" "inspector_cli/nanbisect/batch.py")
            tests=(tests/nanbisect tests/hostile/test_planted_bugs.py)
            # the engine driven directly, without the workflow, the CLI or batches
            fast=(tests/nanbisect/test_origin_scan.py tests/nanbisect/test_locate_plans.py
                  tests/nanbisect/test_locate_and_fullscan.py tests/nanbisect/test_nan_bisect_regions.py
                  tests/nanbisect/test_values_and_log.py tests/nanbisect/test_nan_bisect_origin.py
                  tests/nanbisect/test_walk_back.py tests/nanbisect/test_walk_back_values.py
                  tests/nanbisect/test_walk_back_feeds.py tests/nanbisect/test_walk_back_budget.py
                  tests/nanbisect/test_walk_back_dead_branch.py tests/nanbisect/test_locate_records.py
                  tests/nanbisect/test_layered_vs_expose_all.py tests/nanbisect/test_prebuild.py)
            # the rest of the engine (regions, describe, rootcause, fullscan, nested, model, repro,
            # prebuild, job, static, findings) is mostly driven through the workflow: with any other
            # target the fast selection is every in-process nan-bisect test (some 16 s in all)
            fast_rest=(tests/nanbisect)
            # worker processes import the unmutated code: the two-worker test cannot kill a mutant
            extra=(--deselect tests/nanbisect/test_nan_bisect_batch.py::test_jsonl_is_the_same_with_two_workers) ;;
        cli)
            targets=("inspector_cli/cli.py")
            tests=(tests/cli/test_cli_boundary.py tests/test_cli_global_options.py tests/hostile/test_planted_bugs.py)
            fast=("${tests[@]}") ;;
        pairing)
            targets=("inspector_cli/compare/pairing/*")
            fast=(tests/compare/pairing tests/compare/test_match.py tests/compare/test_pairing_qkv.py
                  tests/compare/test_dynamic_pairing.py tests/compare/test_qop_pairing.py
                  tests/compare/test_renamed_pairing.py tests/compare/test_qop_chains.py)
            tests=("${fast[@]}" tests/compare/test_layers.py) ;;
        *)
            echo "Error: usage: scripts/mutation.sh diff|nanbisect|cli|pairing [GLOB...]" >&2; exit 2 ;;
    esac
    shift
    if [ "$#" -gt 0 ]; then targets=("$@"); fi
    for t in "${targets[@]}"; do  # a target beyond the origin logic: its wider fast selection
        case "$t" in */analyse.py|*/locate.py|*/values.py|*/batch.py) ;; *) if [ -n "${fast_rest+x}" ]; then fast=("${fast_rest[@]}"); fi ;; esac
    done
    # MI_MUTATION_TESTS=fast: only the module's unit-level tests, so that every mutant is judged in
    # an hour on a shared machine; then judge that run's survivors with the full selection:
    # MI_MUTATION_SURVIVORS_FROM=<the fast run's scratch dir> scripts/mutation.sh MODULE
    if [ "${MI_MUTATION_TESTS:-}" = fast ]; then tests=("${fast[@]}"); fi
    existing=()
    for t in "${tests[@]}"; do if [ -e "$here/$t" ]; then existing+=("$t"); fi; done
    tests=("${existing[@]}")

    scratch="${MI_MUTATION_DIR:-$(mktemp -d "/tmp/mi-mutation-$module.XXXXXX")}"
    mkdir -p "$scratch"
    # the tracked files as they are now (uncommitted edits included), without .venv, .git or old mutants;
    # stamped now (-m): mutmut regenerates a file's mutants only when the source is newer than them,
    # and keeps the verdicts of the functions whose code did not change
    (cd "$here" && git ls-files -co --exclude-standard -z | tar --null -T - -cf - ) | (cd "$scratch" && tar -xmf -)
    cd "$scratch"
    {
        echo "[mutmut]"
        echo "source_paths = inspector_cli"
        printf 'only_mutate =\n'; for t in "${targets[@]}"; do printf '    %s\n' "$t"; done
        printf 'pytest_add_cli_args_test_selection =\n'; for t in "${tests[@]}"; do printf '    %s\n' "$t"; done
        printf 'pytest_add_cli_args =\n    -p\n    no:cacheprovider\n    -q\n    --ignore=tests/nanbisect/test_nan_bisect_kill.py\n'
        for a in "${extra[@]}"; do printf '    %s\n' "$a"; done
        # every line, covered or not: mutant names (function + number) stay the same when tests are
        # added (with only covered lines mutated, new coverage renumbered them under kept verdicts),
        # and a mutant no selected test reaches is counted: it survives ("no tests")
        echo "mutate_only_covered_lines = false"
        printf 'also_copy =\n'; for d in configs docs schemas examples; do if [ -e "$d" ]; then printf '    %s\n' "$d"; fi; done
    } > "$scratch/setup.cfg.new"
    mv "$scratch/setup.cfg.new" "$scratch/setup.cfg"
    # mutmut reads pyproject.toml's [tool.mutmut] first; the project has none, so setup.cfg applies.

    mutmut=(nice -n 19 "$here/.venv/bin/mutmut")
    survivors=()
    from=""
    case "${MI_MUTATION_RERUN:-}" in survivors|unjudged) if [ -d mutants ]; then from="$scratch"; fi ;; esac
    if [ -n "${MI_MUTATION_SURVIVORS_FROM:-}" ]; then from="$MI_MUTATION_SURVIVORS_FROM"; fi
    if [ -n "$from" ]; then
        # mutmut keeps a verdict once given: name the survivors (and with "unjudged" the mutants not
        # judged yet, e.g. of functions edited since) to have them judged again with the current tests
        # (mutmut's incremental stats pick up new tests), here or in a scratch copy with a wider test
        # selection (mutant names are stable while the source is unchanged)
        verdicts='survived\|no tests'  # MI_MUTATION_RERUN=unjudged: also the mutants not judged yet
        if [ "${MI_MUTATION_RERUN:-}" = unjudged ]; then verdicts="$verdicts\\|not checked"; fi
        mapfile -t survivors < <(cd "$from" && "${mutmut[@]}" results 2>/dev/null | sed -n "s/^ *\([^ :]*\): \($verdicts\)\$/\1/p")
        if [ "${#survivors[@]}" -eq 0 ]; then echo "no survivors to re-judge in $from" >&2; exit 0; fi
    fi
    # MI_MUTATION_ONLY='PATTERN ...': judge only the mutants whose names match (mutmut's fnmatch), e.g.
    # 'inspector_cli.nanbisect.locate.xǁLocatorǁ_explain__mutmut_*' for one function edited since a run
    if [ "${#survivors[@]}" -eq 0 ] && [ -n "${MI_MUTATION_ONLY:-}" ]; then read -ra survivors <<< "$MI_MUTATION_ONLY"; fi
    echo "mutation testing ($module) in $scratch: ${targets[*]}; tests: ${tests[*]}" >&2
    # mutmut regenerates a re-stamped file's mutants and forgets every verdict in it: keep the last
    # results, so that a rerun of some mutants reports the others as they were (same source only)
    if [ -f "$scratch/results.txt" ]; then cp "$scratch/results.txt" "$scratch/results.before.txt"; fi
    if [ "${#survivors[@]}" -gt 0 ]; then
        "${mutmut[@]}" run --max-children "${MI_MUTATION_JOBS:-1}" "${survivors[@]}" || true
    else
        "${mutmut[@]}" run --max-children "${MI_MUTATION_JOBS:-1}" || true
    fi
    "${mutmut[@]}" results --all true > "$scratch/results.txt" 2>&1 || true
    if [ "${MI_MUTATION_RERUN:-}" = survivors ] && [ -f "$scratch/results.before.txt" ]; then
        # a mutant not run this time ("not checked") keeps its earlier verdict (the sources are unchanged
        # when survivors are re-judged after adding tests; with "unjudged" after an edit they may not be)
        awk -F': ' 'NR == FNR { if ($2 != "not checked") before[$1] = $2; next }
                    $2 == "not checked" && ($1 in before) { print $1 ": " before[$1]; next } { print }' \
            "$scratch/results.before.txt" "$scratch/results.txt" > "$scratch/results.merged.txt"
        mv "$scratch/results.merged.txt" "$scratch/results.txt"
    fi
    # per file: mutants judged, killed, survived (mutant names are module.path.x_function__mutmut_N)
    # (a mutant no selected test reaches counts as surviving: nothing would catch it)
    awk -F': ' '/: (killed|survived|no tests)$/ {
            file = $1; sub(/^ +/, "", file); sub(/\.[^.]*$/, "", file)
            total[file]++; if ($2 == "killed") killed[file]++; else if ($2 == "survived") survived[file]++; else untested[file]++
        }
        END { for (f in total) printf "%-45s %5d judged %5d killed %5d survived %5d no tests (%.1f%%)\n", f, total[f],
              killed[f], survived[f], untested[f], 100 * (survived[f] + untested[f]) / total[f] }' "$scratch/results.txt" | sort
    killed=$(grep -c ': killed$' "$scratch/results.txt" || true)
    survived=$(grep -c ': survived$' "$scratch/results.txt" || true)
    untested=$(grep -c ': no tests$' "$scratch/results.txt" || true)
    other=$(grep -vc -E ': (killed|survived|no tests)$' "$scratch/results.txt" || true)
    total=$((killed + survived + untested))
    pct=$(awk -v s="$((survived + untested))" -v t="$total" 'BEGIN { printf "%.1f", t ? 100 * s / t : 0 }')
    echo "mutants: $total judged, $killed killed, $survived survived, $untested reached by no test ($pct% not killed), $other other (timeout/not checked/skipped)"
    echo "survivors: grep survived $scratch/results.txt; diff of one: (cd $scratch && $here/.venv/bin/mutmut show NAME)"
    echo "re-judge them after adding tests: MI_MUTATION_RERUN=survivors MI_MUTATION_DIR=$scratch scripts/mutation.sh $module"
}

main "$@"; exit $?  # on one line: bash has read it before main runs
