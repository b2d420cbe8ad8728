#!/usr/bin/env python3
"""Replays OWASP CRS regression tests (go-ftw YAML) through Formwall (docs/rules.md, *Against real attack files*).

Each stage of each FILE is sent as written, its multipart body with CRLF line ends (the YAML holds LF; ModSecurity
takes either, Formwall refuses bare LF as `lf-line` and would measure that and nothing else), Host, Connection and
Content-Length left to the client. Prints one tab-separated line a stage: file, test and stage, `crs-fires` when
CRS expects its rule to match (`expect_ids`, `log_contains`) or `crs-passes` (`no_expect_ids`, `no_log_contains`),
and Formwall's status. A stage that carries a whole raw request (`encoded_request`, `raw_request`) is skipped.

    python3 scripts/corpus/crs_replay.py --target 127.0.0.1:8080 \\
        ~/corpora/coreruleset/tests/regression/tests/REQUEST-920-PROTOCOL-ENFORCEMENT/920120.yaml
"""

import argparse
import http.client
import sys
from urllib.parse import urlsplit

import yaml

LEFT_TO_THE_CLIENT = ("host", "content-length", "connection")


def stages(document: dict):
    for test in document.get("tests") or []:
        name = test.get("test_id", test.get("test_title"))
        for number, stage in enumerate(test.get("stages") or [], 1):
            yield f"{name}.{number}", stage.get("stage", stage)   # go-ftw 1 nests each stage once more


def expects_a_match(output: dict) -> bool:
    log = output.get("log") or {}
    return bool(log.get("expect_ids") or output.get("log_contains"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="Formwall's HOST:PORT")
    parser.add_argument("--path", help="send every stage to this path instead of its own (its query is kept)")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    host, port = args.target.rsplit(":", 1)
    for file in args.files:
        with open(file, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
        for label, stage in stages(document):
            given, output = stage.get("input") or {}, stage.get("output") or {}
            verdict = "crs-fires" if expects_a_match(output) else "crs-passes"
            if "encoded_request" in given or "raw_request" in given:
                print(file, label, verdict, "skipped", sep="\t")
                continue
            body = given.get("data") or b""
            if isinstance(body, str):
                body = body.encode("utf-8")
            if b"\r\n" not in body:
                body = body.replace(b"\n", b"\r\n")
            target = given.get("uri", "/")
            if args.path:
                query = urlsplit(target).query
                target = args.path + ("?" + query if query else "")
            headers = {str(k): str(v) for k, v in (given.get("headers") or {}).items()
                       if str(k).lower() not in LEFT_TO_THE_CLIENT}
            connection = http.client.HTTPConnection(host, int(port), timeout=30)
            try:
                connection.request(given.get("method", "GET"), target, body=body or None, headers=headers)
                status = str(connection.getresponse().status)
            except (OSError, http.client.HTTPException) as error:
                status = f"error:{type(error).__name__}"
            finally:
                connection.close()
            print(file, label, verdict, status, sep="\t", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
