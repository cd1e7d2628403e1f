"""Every decoder's fuzz target (tests/support/fuzz_targets.py) replays its seeds and its
kept corpus (tests/fuzz_corpus/<target>/: inputs fuzzing found interesting, and the
input of every finding) and raises nothing but its declared errors -- without atheris:
bench/fuzz.py is the coverage-guided search, this is its regression test."""

import pytest

from tests.support import fuzz_targets as ft


@pytest.mark.parametrize("name", sorted(ft.TARGETS))
def test_the_corpus_raises_only_declared_errors(name):
    inputs = ft.seeds(name) + ft.corpus(name)
    assert inputs, f"{name} has no seeds"
    for data in inputs:
        ft.run(name, data)


def test_every_corpus_folder_is_a_target():
    folders = {p.name for p in ft.CORPUS.iterdir() if p.is_dir()} if ft.CORPUS.is_dir() else set()
    assert folders <= set(ft.TARGETS), folders - set(ft.TARGETS)


def test_an_undeclared_error_is_not_swallowed(monkeypatch):
    def broken(data):
        raise KeyError(data)

    monkeypatch.setitem(ft.TARGETS, "broken", ft.Target("broken", broken, (ValueError,), lambda: [], ""))
    with pytest.raises(KeyError):
        ft.run("broken", b"x")
