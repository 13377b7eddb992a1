"""The one cache rule every paper folder uses."""

from pathlib import Path

from neurips26.harness.cache import cache_dir, cache_root


def test_env_variable_moves_every_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    assert cache_root() == tmp_path
    assert cache_dir("nota") == tmp_path / "nota"


def test_unset_or_empty_falls_back_to_home(monkeypatch):
    for value in (None, ""):
        if value is None:
            monkeypatch.delenv("NEURIPS26_CACHE", raising=False)
        else:
            monkeypatch.setenv("NEURIPS26_CACHE", value)
        assert cache_dir("njord") == Path.home() / ".cache" / "neurips26" / "njord"


def test_papers_use_it(monkeypatch, tmp_path):
    from neurips26.cofrgenet.data import cache_dir as cofrgenet_cache
    from neurips26.njord.simulator import cache_dir as njord_cache
    from neurips26.nota.data import cache_dir as nota_cache

    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    assert cofrgenet_cache() == tmp_path / "cofrgenet"
    assert njord_cache() == tmp_path / "njord"
    assert nota_cache() == tmp_path / "nota" and (tmp_path / "nota").is_dir()
