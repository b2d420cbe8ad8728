"""bench/proxy/compressed.py's bodies: the gzipped body decodes to the plain one, which is one well-formed
multipart part of CSV text compressing between 3 and 5 times (docs/performance.md quotes its ratio), and the
text is the same for the same size (rounds compare one body)."""

import gzip

from e2e_helpers import load_bench

compressed = load_bench("compressed")


def test_the_gzipped_body_is_the_plain_one_and_compresses_like_a_real_export(tmp_path):
    files = {"boundary": "BenchBoundary0123", "plain": str(tmp_path / "plain"), "gzip": str(tmp_path / "gzip")}
    plain_len, gzip_len = compressed.write_bodies(files, 1 << 20)
    plain = open(files["plain"], "rb").read()
    assert len(plain) == plain_len and gzip.decompress(open(files["gzip"], "rb").read()) == plain
    assert 3 < plain_len / gzip_len < 5
    assert plain.startswith(b"--BenchBoundary0123\r\nContent-Disposition: form-data; name=\"file\"")
    assert plain.endswith(b"\r\n--BenchBoundary0123--\r\n") and plain.count(b"--BenchBoundary0123") == 2
    assert compressed.csv_text(5000) == compressed.csv_text(5000) and len(compressed.csv_text(5000)) == 5000
