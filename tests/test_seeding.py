"""Deterministic grades (issue 43, item 5): hidden inputs come from a seed fixed by the course's
grading secret, the assignment, the learner and the test (autograder.judge.seeding). A regrade
draws the same inputs whatever order the tests run in; another learner, or another course,
draws others; the inputs a judge names (the visible test's, the contract's edges) are always
among them."""
from __future__ import annotations

import stat

import numpy as np
import pytest

from autograder import judge
from autograder.judge import seeding

JUDGE = '''
DRAWN = {}

def test_a(k):
    DRAWN.setdefault("test_a", []).append(k.rng.normal(size=4).tolist())

def test_b(k):
    DRAWN.setdefault("test_b", []).append(k.cases(lambda r: int(r.integers(0, 10**9)), 3, always=[0, 7]))
'''


def _draws(folder, key, order=("test_a", "test_b"), threads=None):
    judge.run_judge(folder, kernel=judge.Kernel(channel=object(), key=key), grade_ids=list(order), threads=threads)
    module = judge.load_judge(folder / "judge.py")
    drawn = {g: v.pop() for g, v in module.DRAWN.items()}
    return drawn


def test_the_secret_is_made_once_owner_only_and_kept(tmp_path):
    path = seeding.secret_path(tmp_path, "")
    assert path == tmp_path / ".course" / seeding.SECRET_FILE
    first = seeding.course_secret(path)
    assert len(first) >= 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert seeding.course_secret(path) == first  # read back, not made again
    assert seeding.course_secret(seeding.secret_path(tmp_path, str(tmp_path / "state"))) != first


def test_a_regrade_draws_the_same_inputs_in_any_order(tmp_path):
    (tmp_path / "judge.py").write_text(JUDGE)
    key = seeding.submission_key(b"s" * 64, "05_shapes", "ada")
    first = _draws(tmp_path, key)
    assert _draws(tmp_path, key) == first
    assert _draws(tmp_path, key, order=("test_b", "test_a"), threads=2) == first  # each test its own seed
    assert first["test_b"][:2] == [0, 7] and len(first["test_b"]) == 5  # named inputs first, always
    other_learner = _draws(tmp_path, seeding.submission_key(b"s" * 64, "05_shapes", "grace"))
    other_course = _draws(tmp_path, seeding.submission_key(b"t" * 64, "05_shapes", "ada"))
    assert other_learner["test_a"] != first["test_a"] and other_course["test_a"] != first["test_a"]
    assert other_learner["test_b"][:2] == [0, 7]
    assert _draws(tmp_path, None)["test_a"] != _draws(tmp_path, None)["test_a"]  # no key: afresh


def test_the_step_keys_each_learner_under_the_courses_secret(tmp_path):
    """The grading step's key: the learner is the folder above the assignment's (nbgrader's
    submitted/<learner>/<assignment>/), the secret the course state's."""
    from autograder.common.settings import Settings

    source = tmp_path / "solutions" / "05_shapes"
    source.mkdir(parents=True)
    settings = Settings.load({"COURSE_STATE": str(tmp_path / "state")})
    step = judge.JudgeStep(source, settings=settings, learner=seeding.learner_of(
        tmp_path / "submitted" / "ada" / "05_shapes" / "05_shapes.ipynb"))
    assert step.learner == "ada"
    key = step.key()
    assert key == judge.JudgeStep(source, settings=settings, learner="ada").key()
    assert key != judge.JudgeStep(source, settings=settings, learner="grace").key()
    assert (tmp_path / "state" / seeding.SECRET_FILE).is_file()
    assert judge.JudgeStep(source, settings=settings).key() is None  # no learner named: fresh draws
    seeds = {seeding.seed_for(key, g) for g in ("test_a", "test_b")}
    assert len(seeds) == 2 and all(0 <= s < 2**128 for s in seeds)
    assert np.random.default_rng(seeding.seed_for(key, "test_a")).integers(0, 2**62) == \
        np.random.default_rng(seeding.seed_for(key, "test_a")).integers(0, 2**62)


# Right for odd widths only: the centred window's last entry, one past the window for an even
# width, is taken into each range (the judge draws the width, odd or even: a borderline answer).
EVEN_WIDTH_PADDING_BUG = '''
def window_range(x, width):
    half = width // 2

    def one(_, start):
        window = jax.lax.dynamic_slice(x, (start,), (width,))
        end = jax.lax.dynamic_slice(x, (jnp.minimum(start + 2 * half, x.shape[0] - 1),), (1,))
        both = jnp.concatenate([window, end])
        return None, jnp.max(both) - jnp.min(both)

    return jax.lax.scan(one, None, jnp.arange(x.shape[0] - width + 1))[1]
'''


# Right except on an edge the judge may or may not draw: zeros, which it counts as positive
# (the issue's `positive_mean` that passed the grader while failing the visible test).
ZERO_IS_POSITIVE = '''
def positive_mean(x):
    mask = x >= 0
    return jnp.sum(jnp.where(mask, x, 0.0)) / jnp.maximum(jnp.sum(mask), 1)
'''


@pytest.fixture(scope="module")
def borderline(tmp_path_factory):
    """Two borderline answers (each wrong only on an edge: an even width, a zero) in 05's
    solution, graded for three learners, one of them twice, in one batch: ``[{grade_id:
    (points, feedback)}]`` for ada, grace, ada again, alan."""
    from conftest import fill_answers, run_grader, solution_notebook

    a, tmp = "05_shapes", tmp_path_factory.mktemp("borderline")
    answers = {"window_range": EVEN_WIDTH_PADDING_BUG, "positive_mean": ZERO_IS_POSITIVE}
    paths = [fill_answers(solution_notebook(a), answers, tmp / learner / a / f"{a}.ipynb")
             for learner in ("ada", "grace", "alan")]
    results, stderr, code = run_grader([paths[0], paths[1], paths[0], paths[2]], "--jobs", "2")
    assert code == 0, stderr[-3000:]
    return [{t["grade_id"]: (t["points"], t["feedback"]) for t in r["tests"]} for r in results]


def _points(verdicts, grade_id):
    return [v[grade_id][0] for v in verdicts]


@pytest.mark.notebook
def test_the_same_submission_graded_again_gets_the_same_verdicts(borderline):
    assert borderline[0] == borderline[2]  # ada, regraded: the same inputs, the same feedback
    assert sum(p for p, _ in borderline[0].values()) > 0  # the rest of the notebook is the solution's


@pytest.mark.notebook
def test_every_learner_gets_the_same_verdict_when_the_edge_is_always_drawn(borderline):
    """The zero is among every learner's hidden inputs, never drawn: the answer that counts it
    as positive scores 0 for all of them, whatever else they draw."""
    assert _points(borderline, "test_positive_mean") == [0.0] * 4, [v["test_positive_mean"] for v in borderline]
    others = [{g: p for g, (p, _) in v.items() if g != "test_window_range"} for v in borderline]
    assert others[0] == others[1] == others[3]


@pytest.mark.notebook
def test_every_learner_fails_the_even_width_padding_bug(borderline):
    assert _points(borderline, "test_window_range") == [0.0] * 4, [v["test_window_range"] for v in borderline]
