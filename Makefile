# The course's workflows. `make lab` to learn, `make test` to check everything.
# The interpreter the venv is built on: python3.13, else python3.12 (JAX 0.12 needs 3.12+).
# scripts/find_python.sh finds it (pyenv's copies included) or says how to get one.
PYTHON ?= $(shell scripts/find_python.sh)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PYTEST_WORKERS ?= 2

.PHONY: help env lab test test-fast lint release check clean-outputs bench \
        colab collect autograde feedback export bench-grading hub check-exercises
.DEFAULT_GOAL := help

## help: this list of targets (from the `## target: what it does` comments)
help:
	@awk '/^## [a-z-]+:/ { sub(/^## /, ""); i = index($$0, ":"); printf "  %-16s%s\n", substr($$0, 1, i - 1), substr($$0, i + 2); next } \
	     /^##  / { sub(/^## +/, ""); printf "  %-16s%s\n", "", $$0 }' $(MAKEFILE_LIST) | sed 's/\$$\$$/$$/g'

$(STAMP): requirements.txt pyproject.toml
	@test -n "$(PYTHON)" || { scripts/find_python.sh >/dev/null; exit 1; }
	@# a venv left from an older interpreter (the course ran on 3.11 before JAX 0.12) is rebuilt
	@$(BIN)/python -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null || \
	    { rm -rf $(VENV) && echo "creating $(VENV) with $(PYTHON)" && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

## env: create .venv and install the pinned requirements (idempotent)
env: $(STAMP)

## lab: open JupyterLab on the course at http://localhost:8888/lab (the next free port if taken), nbgrader and widgets enabled
lab: env
	$(BIN)/python scripts/lab.py

## test: the linter, then the whole suite (what CI runs; the 30 slowest tests listed at the end)
test: env lint
	@scripts/ensure_system_packages.sh
	@$(MAKE) --no-print-directory bytecode
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup -p no:cacheprovider --durations=30 tests

# The package's bytecode, written once as pip writes an installed package's (an editable install
# has none): every grader, kernel and program runner a run starts reads it instead of compiling the
# modules it imports (0.13 CPU s of the grader's 0.68 for the package's names and its pipeline).
# Without it, a process where PYTHONDONTWRITEBYTECODE is set compiles every module it imports, and a
# contained kernel or runner (its view of the package is read-only) every one no other process wrote.
.PHONY: bytecode
bytecode:
	-@$(BIN)/python -m compileall -q autograder  # a file it cannot compile is the suite's to report

## lint: ruff over the whole tree, notebooks included (rules in pyproject.toml)
lint: env
	$(BIN)/ruff check .

## test-fast: the suite without the slow environment tests (Colab venvs, browser, hub, PostgreSQL)
test-fast: env
	@$(MAKE) --no-print-directory bytecode
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup -p no:cacheprovider -m "not slow_env" tests

## hub: JupyterHub for a room of learners on http://127.0.0.1:$${HUB_PORT:-8000} (hub/course.toml;
##      as root it creates the learners; docs/instructor-guide.md "Running a workshop on a hub")
CHP_VERSION := 5.3.0
HUB_CHP := .hub/node_modules/.bin/configurable-http-proxy
$(HUB_CHP):
	npm install --silent --no-audit --no-fund --prefix .hub configurable-http-proxy@$(CHP_VERSION)
hub: env $(HUB_CHP)
	$(BIN)/python hub/workshop.py serve

## colab: (re)write every notebook's "Open in Colab" badge and Colab install cell, and slide metadata
colab: env
	$(BIN)/python scripts/colab.py
	$(BIN)/python scripts/slides.py

## release: regenerate exercises/ from solutions/ with nbgrader, and the manifest's exercises and the guide's exercise lists
##      from the notebooks and judge files (fails, naming the notebooks, if `make colab` would change course/ or solutions/)
release: env
	$(BIN)/python scripts/colab.py --check
	$(BIN)/python scripts/slides.py --check
	$(BIN)/python scripts/release.py

## check-exercises: prove every exercise (ASSIGNMENT=05_shapes for one): the released notebook scores zero, the solution
##      full marks, every known wrong answer fails naming its idea, every right alternative passes, three hints each
check-exercises: env
	$(BIN)/python scripts/release.py --check $(ASSIGNMENT)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -p no:cacheprovider tests/test_exercises.py tests/test_manifest.py \
	    tests/test_judge_files.py tests/test_hints.py tests/test_solutions_not_copies.py tests/test_docs.py -m "not slow_env" $(if $(ASSIGNMENT),-k $(ASSIGNMENT))

## clean-outputs: strip outputs and execution counts from every notebook
clean-outputs: env
	$(BIN)/python scripts/clean_outputs.py

## bench: measure the course (report in docs/)
bench: env
	$(BIN)/python scripts/bench.py

## check: your progress on every exercise notebook in exercises/ (hidden tests included; without bubblewrap
##      your own notebooks run uncontained, said once)
check: env
	$(BIN)/python -m autograder grade --mine exercises/*/*.ipynb

# Instructor workflow (see README). ASSIGNMENT=01_phases FOLDER=path/to/downloads
ASSIGNMENT ?=
FOLDER ?= downloads
## collect: downloaded <student>_*.ipynb / zips in FOLDER -> .course/submitted (or: nbgrader collect)
collect: env
	$(BIN)/python -m autograder collect $(FOLDER) --assignment $(ASSIGNMENT)
## autograde: grade every submission (or ASSIGNMENT) in parallel into the gradebook (exit 1, naming them, if any could not be graded)
autograde: env
	$(BIN)/python -m autograder autograde $(ASSIGNMENT)
## feedback: one HTML page per submission in .course/feedback
feedback: env
	$(BIN)/python -m autograder feedback
## export: .course/grades.csv (points per student, assignment and exercise) and grades-summary.csv (a row per student, a column per assignment, a total)
export: env
	$(BIN)/python -m autograder export

## bench-grading: the grader's CPU per run tree (a cgroup per way) against nbgrader autograde and bare execution, the speed-up in parallel, one notebook against jupyter execute, with issue 42's targets (docs/bench-grading.md)
bench-grading: env
	$(BIN)/python scripts/bench_grading.py

## site: the course as a static website in _site/html: chapters executed (cached between builds), exercises without solutions (docs/site.md)
.PHONY: site
site: env
	$(BIN)/python scripts/site.py
