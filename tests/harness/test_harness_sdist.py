"""Verified sdist corpora: checksum, member filter, content dedupe."""

import hashlib
import io
import tarfile

import pytest

from neurips26.harness.sdist import dedupe_by_content, read_tar_texts, verify_sha256


def _tar(tmp_path, files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            b = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(b)
            tar.addfile(info, io.BytesIO(b))
    path = tmp_path / "x.tar.gz"
    path.write_bytes(buf.getvalue())
    return path


def test_read_filter_dedupe_and_checksum(tmp_path):
    path = _tar(tmp_path, {"p/texts/b.txt": "same", "p/texts/a.txt": "same", "p/texts/c.txt": "é",
                           "p/other/d.txt": "x"})
    texts = read_tar_texts(path, lambda n: "/texts/" in n)
    assert sorted(n for n, _ in texts) == ["p/texts/a.txt", "p/texts/b.txt", "p/texts/c.txt"]
    assert dedupe_by_content(texts) == [("p/texts/a.txt", "same"), ("p/texts/c.txt", "é")]
    verify_sha256(path, hashlib.sha256(path.read_bytes()).hexdigest())
    with pytest.raises(ValueError, match="re-fetch"):
        verify_sha256(path, "0" * 64)
