"""Deterministic, seeded generator of the differential suite's request bodies.

`variants(seed)` returns a list of `Variant`s in classes (CLASSES): hand-written cases for each class, random
byte mutations of valid bodies (seeded), and `control` bodies shaped like real browsers' forms, which Formwall
must forward. The same seed gives the same bytes, ids and order.
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CORPUS = REPO / "Tests" / "MultipartTests" / "Fixtures" / "corpus" / "werkzeug"

CLASSES = ("control", "boundary", "framing", "part-headers", "disposition", "names", "filenames", "charsets",
           "duplicates", "encodings", "pollution", "urlencoded", "random")

URLENC = "application/x-www-form-urlencoded"
B = b"XyZ1"  # the default boundary of hand-written bodies
CT = f"multipart/form-data; boundary={B.decode()}"


@dataclass
class Variant:
    id: str
    cls: str
    content_type: str
    body: bytes
    note: str
    headers: list[tuple[str, str]] = field(default_factory=list)  # extra request fields (Content-Encoding)
    path: str = "/"
    control: bool = False

    def decoded_body(self) -> bytes | None:
        """The body Formwall parses: after the request's Content-Encoding (`formwall inspect` has no option for
        it). None when the suite cannot decode it (a coding other than gzip, deflate and identity, a body that
        does not decode, bytes after a gzip member)."""
        body = self.body
        for name, value in self.headers:
            if name.lower() != "content-encoding":
                continue
            codings = [c.strip().lower() for c in value.split(",")]
            if len([c for c in codings if c != "identity"]) > 1:
                return None  # over the default encodings-max 1: serve refuses it
            for coding in reversed(codings):
                try:
                    if coding in ("gzip", "x-gzip"):
                        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                        body, rest = d.decompress(body), d.unused_data
                        if rest or not d.eof:
                            return None
                    elif coding == "deflate":
                        body = zlib.decompress(body)
                    elif coding != "identity":
                        return None
                except zlib.error:
                    return None
        return body


def part(name: bytes | None = b"f", data: bytes = b"v", filename: bytes | None = None, ctype: bytes | None = None,
         extra: list[bytes] = (), disposition: bytes | None = None) -> tuple[list[bytes], bytes]:
    """One part: its header lines and its data. `disposition` replaces the whole Content-Disposition line."""
    if disposition is None:
        disposition = b"Content-Disposition: form-data"
        if name is not None:
            disposition += b'; name="' + name + b'"'
        if filename is not None:
            disposition += b'; filename="' + filename + b'"'
    heads = [disposition] if disposition else []
    if ctype is not None:
        heads.append(b"Content-Type: " + ctype)
    elif filename is not None:
        heads.append(b"Content-Type: text/plain")
    return heads + list(extra), data


def mp(parts, boundary: bytes = B, preamble: bytes = b"", epilogue: bytes = b"\r\n", eol: bytes = b"\r\n",
       close: bool = True) -> bytes:
    out = bytearray(preamble)
    for heads, data in parts:
        out += b"--" + boundary + eol
        for h in heads:
            out += h + eol
        out += eol + data + eol
    if close:
        out += b"--" + boundary + b"--" + epilogue
    return bytes(out)


def simple(*parts_) -> bytes:
    return mp(list(parts_))


def base_form() -> bytes:
    """A plain valid form: two fields and a text file."""
    return simple(part(b"user", b"alice"), part(b"role", b"user"),
                  part(b"doc", b"hello world\n", filename=b"notes.txt", ctype=b"text/plain"))


# ---------------------------------------------------------------------------------------------------- controls

def _png(n: int) -> bytes:
    return (CORPUS / "firefox3-2png1txt" / f"file{n}.png").read_bytes()


def browser_form(kind: str) -> tuple[str, bytes]:
    """A Chrome- or Firefox-shaped form: a text field, a checkbox group, an <input type=file multiple>."""
    if kind == "chrome":
        boundary = b"----WebKitFormBoundary7MA4YWxkTrZu0gW"
    else:
        boundary = b"---------------------------3089245183286352094196738425"
    parts = [
        part(b"title", "Grüße aus Köln".encode()),
        part(b"colors[]", b"red"), part(b"colors[]", b"green"), part(b"colors[]", b"blue"),
        part(b"attachments[]", _png(1), filename=b"anchor.png", ctype=b"image/png"),
        part(b"attachments[]", _png(2), filename=b"application_edit.png", ctype=b"image/png"),
        part(b"attachments[]", b"plain text notes\r\n", filename="notizen-ü.txt".encode(), ctype=b"text/plain"),
        part(b"comment", b"multi\r\nline\r\n--not a delimiter"),
        part(b"avatar", b"", filename=b"", ctype=b"application/octet-stream") if kind == "firefox" else
        part(b"agree", b"on"),
    ]
    return f"multipart/form-data; boundary={boundary.decode()}", mp(parts, boundary=boundary, epilogue=b"\r\n")


def controls() -> list[Variant]:
    out = []
    for entry in json.loads((CORPUS / "expected.json").read_text()):
        if entry["id"].startswith(("ie6", "ie7")):
            continue  # old IE: backslash paths and bare LF, refused by default (they are in `filenames`)
        out.append(Variant("", "control", entry["content_type"], (CORPUS / entry["body_file"]).read_bytes(),
                           f"browser capture {entry['id']}", control=True))
    for kind in ("chrome", "firefox"):
        ctype, body = browser_form(kind)
        out.append(Variant("", "control", ctype, body, f"{kind}-shaped form: text, checkbox group, "
                           "file multiple", control=True))
    out.append(Variant("", "control", URLENC, "title=Gr%C3%BC%C3%9Fe+aus+K%C3%B6ln&colors%5B%5D=red&colors%5B%5D="
                       "green&agree=on".encode(), "browser-shaped urlencoded form with a checkbox group",
                       control=True))
    out.append(Variant("", "control", CT, base_form(), "plain form: two fields and a text file", control=True))
    return out


# ---------------------------------------------------------------------------------------------------- classes

def boundary_class() -> list[Variant]:
    body = base_form()
    out = []
    ctypes = [
        ('multipart/form-data; boundary="XyZ1"', "quoted boundary"),
        ("multipart/form-data; boundary = XyZ1", "spaces around ="),
        ("multipart/form-data;boundary=XyZ1", "no space after ;"),
        ("multipart/form-data; BOUNDARY=XyZ1", "upper-case parameter name"),
        ("Multipart/Form-Data; boundary=XyZ1", "mixed-case media type"),
        ("multipart/form-data; boundary=XyZ1; boundary=Other", "boundary twice, first right"),
        ("multipart/form-data; boundary=Other; boundary=XyZ1", "boundary twice, second right"),
        ("multipart/form-data; charset=utf-8; boundary=XyZ1", "charset before boundary"),
        ("multipart/form-data; boundary=XyZ1;", "trailing ;"),
        ("multipart/form-data; boundary=XyZ1 ", "trailing space"),
        ("multipart/form-data; boundary=XyZ1; charset=ISO-8859-1", "charset after boundary"),
        ("multipart/form-data; boundary=xyz1", "boundary in another case"),
        ("multipart/form-data; boundary=XyZ", "boundary a prefix of the real one"),
        ("multipart/form-data; boundary='XyZ1'", "single-quoted boundary"),
        ('multipart/form-data; boundary="XyZ1', "unterminated quote"),
        ("multipart/mixed; boundary=XyZ1", "multipart/mixed"),
        ("multipart/related; boundary=XyZ1", "multipart/related"),
        ("multipart/form-data; boundary=XyZ1, text/plain", "a list of media types"),
        ("multipart/form-data ; boundary=XyZ1", "space before ;"),
        ("multipart/form-data; boundary=\"XyZ1\"; boundary=XyZ1", "quoted and bare boundary"),
        ("multipart/form-data; boundary*=utf-8''XyZ1", "extended boundary parameter"),
        ("multipart/form-data; xboundary=Other; boundary=XyZ1", "a parameter ending in boundary"),
        ("multipart/form-data", "no boundary"),
        ("multipart/form-data; boundary=", "empty boundary"),
    ]
    for ctype, note in ctypes:
        out.append(Variant("", "boundary", ctype, body, note))
    specials = [b"'()+_,-./:=?", b"a" * 70, b"a" * 71, b"--", b"-", b"XyZ1 ", b" ", b"a b", b"=", b"%41"]
    for bnd in specials:
        b2 = mp([part(b"user", b"alice"), part(b"role", b"user")], boundary=bnd)
        q = bnd.decode()
        out.append(Variant("", "boundary", f'multipart/form-data; boundary="{q}"', b2, f"boundary {q[:20]!r} quoted"))
        if b" " not in bnd:
            out.append(Variant("", "boundary", f"multipart/form-data; boundary={q}", b2, f"boundary {q[:20]!r}"))
    # the data holds the boundary, or the boundary of another request
    out.append(Variant("", "boundary", CT, simple(part(b"a", b"--XyZ1x"), part(b"b", b"x--XyZ1--")),
                       "data holds boundary look-alikes"))
    out.append(Variant("", "boundary", CT, simple(part(b"a", b"x\r\n--XyZ"), part(b"b", b"2")),
                       "data ends in a partial delimiter"))
    out.append(Variant("", "boundary", CT, mp([part(b"a", b"1")], boundary=b"XyZ1x") + b"", "body uses a longer boundary"))
    out.append(Variant("", "boundary", CT, simple(part(b"a", b"1\n--XyZ1\r\nContent-Disposition: form-data; "
                                                  b'name="role"\r\n\r\nadmin')),
                       "LF-only delimiter inside data"))
    return out


def framing_class() -> list[Variant]:
    p = [part(b"user", b"alice"), part(b"role", b"user")]
    cases = [
        (mp(p, preamble=b"preamble\r\n"), "preamble"),
        (mp(p, preamble=b"\r\n"), "empty preamble line"),
        (mp(p, preamble=b'--XyZ1\r\nContent-Disposition: form-data; name="role"\r\n\r\nadmin\r\n'[2:]),
         "preamble holding a delimiter-less part"),
        (mp(p, epilogue=b"\r\nepilogue"), "epilogue"),
        (mp(p, epilogue=b'\r\n--XyZ1\r\nContent-Disposition: form-data; name="role"\r\n\r\nadmin\r\n--XyZ1--\r\n'),
         "a part after the close delimiter"),
        (mp(p, epilogue=b""), "no CRLF after the close delimiter"),
        (mp(p, epilogue=b"\r\n\r\n"), "two CRLF after close"),
        (mp(p, close=False), "no close delimiter"),
        (mp(p, close=False) + b"--XyZ1\r\n", "ends in an open delimiter"),
        (mp(p, eol=b"\n"), "bare LF everywhere"),
        (mp(p).replace(b"\r\n\r\nalice", b"\n\nalice"), "bare LF at one header end"),
        (mp(p).replace(b"--XyZ1\r\n", b"--XyZ1  \r\n", 1), "transport padding after a delimiter"),
        (mp(p).replace(b"--XyZ1\r\n", b"--XyZ1\t\r\n"), "tab padding after every delimiter"),
        (mp(p).replace(b"--XyZ1--", b"--XyZ1-- "), "space after close delimiter"),
        (mp(p).replace(b"--XyZ1--", b"--XyZ1-"), "single-dash close"),
        (mp(p).replace(b"\r\n--XyZ1\r\nContent-Disposition: form-data; name=\"role\"",
                       b"\r\n--XyZ1--\r\n--XyZ1\r\nContent-Disposition: form-data; name=\"role\""), "close in the middle"),
        (b"", "empty body"),
        (b"--XyZ1--\r\n", "only a close delimiter"),
        (b"--XyZ1\r\n\r\nbare\r\n--XyZ1--\r\n", "a part without headers"),
        (mp(p).replace(b"\r\n\r\nalice", b"\r\n\r\n\r\nalice"), "extra blank line before data"),
        (mp(p).replace(b'name="user"', b'name="user"\r'), "bare CR in a header line"),
        (mp(p).replace(b"alice", b"al\rice"), "bare CR in data"),
        (mp(p).replace(b"alice", b"al\x00ice"), "NUL in data"),
        (mp([part(b"a", b"1")] * 0 + p, preamble=b"--XyZ1--\r\n"), "preamble that is a close delimiter"),
        (b"--XyZ1\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--XyZ1\r\n--XyZ1--\r\n",
         "an empty part before close"),
        (mp(p).replace(b"\r\n--XyZ1\r\nContent-Disposition: form-data; name=\"role\"",
                       b"\r\n\r\n--XyZ1\r\nContent-Disposition: form-data; name=\"role\""), "CRLF CRLF before a delimiter"),
        (mp(p).replace(b"\r\n--XyZ1\r\n", b"\n--XyZ1\r\n"), "LF before an inner delimiter"),
        (b"\r\n" + mp(p), "CRLF before the first delimiter"),
        (b"  " + mp(p), "spaces before the first delimiter"),
        (mp(p).replace(b"\r\n", b"\r\n ", 1), "space-folded first line"),
    ]
    return [Variant("", "framing", CT, body, note) for body, note in cases]


def part_headers_class() -> list[Variant]:
    cd = b'Content-Disposition: form-data; name="role"'
    ct = b"Content-Type: text/plain"
    cases = [
        ([b'content-disposition: form-data; name="role"'], "lower-case header name"),
        ([b'CONTENT-DISPOSITION: FORM-DATA; NAME="role"'], "upper case everywhere"),
        ([b'Content-Disposition:form-data; name="role"'], "no space after colon"),
        ([b'Content-Disposition:   form-data;   name="role"'], "extra spaces"),
        ([b'Content-Disposition:\tform-data;\tname="role"'], "tabs"),
        ([b'Content-Disposition : form-data; name="role"'], "space before colon"),
        ([b'Content-Disposition: form-data;', b' name="role"'], "folded parameter"),
        ([b'Content-Disposition: form-data;', b'\tname="role"'], "tab-folded parameter"),
        ([cd, b'Content-Disposition: form-data; name="admin"'], "second Content-Disposition, other name"),
        ([b'Content-Disposition: form-data; name="admin"', cd], "first Content-Disposition, other name"),
        ([cd, ct, b"Content-Type: application/json"], "two Content-Types on a field"),
        ([cd, ct], "Content-Type on a field"),
        ([cd, b"Content-Type: text/plain; charset=utf-8"], "field with charset utf-8"),
        ([cd, b"Content-Type: multipart/mixed; boundary=inner"], "nested multipart type"),
        ([cd, b"Content-Length: 3"], "Content-Length part header"),
        ([cd, b"X-Extra: 1"], "unknown part header"),
        ([ct, cd], "Content-Type first"),
        ([cd, b"Content-Type:"], "empty Content-Type"),
        ([cd, b"NoColonHere"], "header line without colon"),
        ([cd, b": value"], "empty header name"),
        ([cd, b"X-\x00: 1"], "NUL in a header name"),
        ([cd + b"\x00"], "NUL after the disposition"),
        ([cd, b"X-Long: " + b"a" * 9000], "a 9 KB header"),
        ([cd, b"X-Long: " + b"a" * 20000], "a 20 KB header"),
        ([b"Content-Disposition: form-data; name=\"role\"" + b" " * 50], "trailing whitespace"),
        ([b"Content-Disposition  : form-data; name=\"role\""], "spaces before colon"),
        ([b"Content-Disposition:", b" form-data; name=\"role\""], "folded value start"),
        ([b"Content_Disposition: form-data; name=\"role\""], "underscore header name"),
        ([b"Content-Dispositions: form-data; name=\"role\""], "near-miss header name"),
        ([cd, b"content-type: TEXT/PLAIN"], "upper-case field type"),
    ]
    out = [Variant("", "part-headers", CT, simple(part(b"user", b"alice"), part(disposition=heads[0], data=b"admin",
                                                                                  extra=heads[1:]) if heads else None),
                   note) for heads, note in cases]
    files = [
        ([b'Content-Disposition: form-data; name="doc"; filename="a.txt"', b"Content-Type: TEXT/Plain"],
         "upper-case file type"),
        ([b'Content-Disposition: form-data; name="doc"; filename="a.txt"', b"Content-Type: text/plain; charset=\"utf-8\""],
         "quoted charset"),
        ([b'Content-Disposition: form-data; name="doc"; filename="a.txt"', b"Content-Type: text/plain; x=y; charset=utf-8"],
         "extra type parameter"),
        ([b'Content-Disposition: form-data; name="doc"; filename="a.txt"', b"Content-Type: text"],
         "type without subtype"),
        ([b'Content-Disposition: form-data; name="doc"; filename="a.txt"', b"Content-Type: text/plain",
          b"Content-Type: image/png"], "two file Content-Types"),
        ([b'Content-Disposition: form-data; name="doc"; filename="a.txt"'], "file without Content-Type"),
        ([b'Content-Disposition: form-data; name="doc"; filename="a.txt"', b"Content-Type: application/octet-stream"],
         "octet-stream file"),
        ([b'Content-Disposition: form-data; name="doc"; filename="a.txt"', b"Content-Type: text/plain;charset=utf-8"],
         "charset without space"),
    ]
    for heads, note in files:
        out.append(Variant("", "part-headers", CT, simple(part(b"user", b"alice"),
                                                          part(disposition=heads[0], data=b"text\n", extra=heads[1:])),
                           note))
    return out


def disposition_class() -> list[Variant]:
    cds = [
        b'form-data; name=role', b"form-data; name='role'", b'form-data; name = "role"', b'form-data;name="role"',
        b'Form-Data; name="role"', b'FORM-DATA; NAME="role"', b'form-data; Name="role"', b'attachment; name="role"',
        b'inline; name="role"', b'form-data name="role"', b'form-data; name="role" foo', b'form-data; name="role";',
        b'form-data; name="role";;', b';form-data; name="role"', b'form-data; ; name="role"',
        b'form-data; name="role"; name="admin"', b'form-data; name="admin"; name="role"', b'form-data; name="role', 
        b'form-data; name=ro"le', b'form-data; name="ro"le"', b'form-data; name=', b'form-data; name=""',
        b'form-data', b'form-data; filename="a.txt"; name="role"', b'form-data; name*=UTF-8\'\'role',
        b'form-data; name="x"; name*=UTF-8\'\'role', b'form-data; name="role"; foo="bar"', b'form-data; name="role"; foo',
        b'form-data; foo="bar; name=admin"; name="role"', b'form-data; name="role"; filename',
        b'form-data; name="role"; filename=', b'form-data; name="role"; filename*=UTF-8\'\'a.txt',
        b'form-data; name="role"; filename="a.txt"; filename*=UTF-8\'\'b.txt',
        b'form-data; name="role"; filename="a.txt"; filename*=UTF-8\'\'a.txt',
        b'form-data; name="role"; filename*=ISO-8859-1\'\'%E9.txt', b'form-data; name="role"; filename*=UTF-8\'en\'a.txt',
        b'form-data; name="role"; filename*=UTF-16\'\'a.txt', b'form-data; name="role"; filename*=UTF-8\'\'%zz.txt',
        b'form-data; name="role"; filename*="UTF-8\'\'a.txt"', b'form-data; name="role"; filename="a.txt"; filename="b.txt"',
        b'form-data; name="role"; FILENAME="a.txt"', b'form-data; name="role"; filename=a.txt',
        b'form-data; name="role"; filename=a b.txt', b'form-data; name="role"; filename="a.txt"x',
        b'form-data; name="role"; filename=""', b'form-data; name="ro\\"le"', b'form-data; name="ro\\\\le"',
        b'form-data; name="role"; name*=UTF-8\'\'admin', b'form-data; name="role"\t; filename="a.txt"',
        b'form-data; name ="role"', b'form-data; name= "role"', b'form-data;\tname="role"',
        b'form-data; name="role"; creation-date="Wed, 12 Feb 1997 16:29:51 -0500"', b'form-data; name=role; filename=a.txt',
        b'form-data; name="role"; filename="a;b.txt"', b'form-data; name="a;name=admin"',
        b'form-data; name="role"; size=5', b'form-data; name="role"; filename="a.txt"; size=99',
        b'form-data; name=\'role\'; filename=\'a.txt\'', b'form-data; name="role" ; filename="a.txt"',
    ]
    out = []
    for cd in cds:
        body = simple(part(b"user", b"alice"), part(disposition=b"Content-Disposition: " + cd, data=b"admin",
                                                    ctype=b"text/plain" if b"filename" in cd else None))
        out.append(Variant("", "disposition", CT, body, cd.decode("latin-1")))
    return out


NAMES = [
    b"a.b", b"a b", b" a", b"a ", b"a[b]", b"a[b", b"a]b", b"a[b][c]", b"a[]", b"a[ b]", b"a.b[c.d]", b"a[b.c]",
    b"a[b]c", b"a[[b]]", b"a[", b"]a", b"[a]", b"a][b", b"a[0]", b"a[-1]", b"a[b][]", b"a. b", b"a+b", b"%61",
    b"a%20b", b"a%00b", b"a%22b", b"a%5Bb%5D", b"a%2e", "é".encode(), "e\u0301".encode(), "ſ".encode(),
    "ａ".encode(), "a\u202eb".encode(), "a\u200bb".encode(), "\ufeffa".encode(), b"a\x01b", b"a\tb", b"a\x7fb",
    b"a\\b", b"a'b", b"a;b", b"a=b", b"a;name=admin", b"a,b", b"a:b", b"a/b", b"_charset_", b"__proto__",
    b"constructor", b"hasOwnProperty", b"toString", b"a" * 300, b"0", b"-", b"a\xffb", b"a\xc3", b"a\x80",
    b"a\r\nb", b"a%0d%0ab", b"a&b", b"a?b", b"a#b", b"a*b", b"$a", b"a\xe2\x80\xa8b", b"a\xc2\xa0b",
]


def names_class() -> list[Variant]:
    out = []
    for n in NAMES:
        out.append(Variant("", "names", CT, simple(part(b"user", b"alice"), part(n, b"admin")),
                           f"field name {n[:40]!r}"))
    for n in (b"a.b", b"a b", b"a[b]", b"a[]", b" a", b"%61", "é".encode(), b"a\\b", b"a;b", b"a=b"):
        out.append(Variant("", "names", CT, simple(part(b"user", b"alice"),
                                                   part(n, b"file data\n", filename=b"x.txt", ctype=b"text/plain")),
                           f"file name {n[:40]!r}"))
    # the same names urlencoded (escaped as a browser would, and raw)
    for n in (b"a.b", b"a b", b"a[b]", b"a[", b" a", b"a%2Eb"):
        esc = "".join(c if c.isalnum() else f"%{ord(c):02X}" for c in n.decode())
        out.append(Variant("", "names", URLENC, f"user=alice&{esc}=admin".encode(), f"urlencoded name {n!r}"))
    return out


FILENAMES = [
    b"C:\\fakepath\\a.php", b"a.txt\\", b"a%22.txt", b"..", b"../a.txt", b"..\\a.txt", b"a/../../b.txt",
    b"a.php.jpg", b"a.jpg.php", b"a.php%00.jpg", b"a.php\x00.jpg", b"a.PHP", b"a.pHp5", "ü.txt".encode(),
    "a\u202etxt.exe".encode(), b"a.txt ", b"a.txt.", b"CON.txt", b"a;b.txt", b"a=b.txt", b"%2e%2e%2fa.txt",
    b"a/b.txt", b"/etc/passwd", b"a.txt::$DATA", b"a\xff.txt", b"a" * 300 + b".txt", b"a.tar.gz", b"a.txt.gz",
    b".htaccess", b"a'.txt", b"a\\\"b.txt", b"a%5c.txt", b"a%2F.txt", b"a.txt%00", b" a.txt", b"a\tb.txt",
    b"a.svg", b"a.html", b"index.php", b"a.php.",
]


def filenames_class() -> list[Variant]:
    out = []
    for fn in FILENAMES:
        out.append(Variant("", "filenames", CT, simple(part(b"user", b"alice"),
                                                       part(b"doc", b"text\n", filename=fn, ctype=b"text/plain")),
                           f"filename {fn[:40]!r}"))
    out.append(Variant("", "filenames", CT, simple(part(b"doc", b"text\n", filename=b"", ctype=b"text/plain")),
                       "empty filename with data"))
    out.append(Variant("", "filenames", CT, simple(part(b"doc", b"", filename=b"",
                                                        ctype=b"application/octet-stream")),
                       "no file chosen"))
    ie6 = next(e for e in json.loads((CORPUS / "expected.json").read_text()) if e["id"].startswith("ie6"))
    out.append(Variant("", "filenames", ie6["content_type"], (CORPUS / ie6["body_file"]).read_bytes(),
                       "browser capture ie6 (full paths)"))
    return out


def charsets_class() -> list[Variant]:
    latin = "é".encode("latin-1")
    utf16 = "admin".encode("utf-16")
    cases = [
        ([part(b"role", latin, ctype=b"text/plain; charset=ISO-8859-1")], "latin-1 field with charset"),
        ([part(b"role", utf16, ctype=b"text/plain; charset=UTF-16")], "UTF-16 field with charset"),
        ([part(b"role", "é".encode(), ctype=b"text/plain; charset=ISO-8859-1")], "UTF-8 bytes declared latin-1"),
        ([part(b"_charset_", b"ISO-8859-1"), part(b"role", latin)], "_charset_ latin-1 then a latin-1 value"),
        ([part(b"_charset_", b"UTF-16"), part(b"role", utf16)], "_charset_ UTF-16"),
        ([part(b"_charset_", b"shift_jis"), part(b"role", "ロール".encode("shift_jis"))], "_charset_ shift_jis"),
        ([part(b"role", latin), part(b"_charset_", b"ISO-8859-1")], "_charset_ after the value"),
        ([part(b"role", b"\xff")], "invalid UTF-8 \\xff"),
        ([part(b"role", b"\xc3")], "truncated UTF-8"),
        ([part(b"role", b"\xc0\xaf")], "overlong UTF-8"),
        ([part(b"role", b"\xed\xa0\x80")], "UTF-8 surrogate"),
        ([part(b"role", b"\xef\xbb\xbfadmin")], "BOM in value"),
        ([part(b"role", b"adm\x00in")], "NUL in value"),
        ([part(b"role", "admin\u202e".encode())], "bidi control in value"),
        ([part(b"role", b"\xf4\x90\x80\x80")], "code point above U+10FFFF"),
        ([part(latin + b"x", b"1")], "latin-1 byte in a name"),
        ([part(b"role", latin, ctype=b"text/plain; charset=utf-8")], "latin-1 bytes declared utf-8"),
        ([part(b"doc", latin, filename=b"a.txt", ctype=b"text/plain; charset=ISO-8859-1")], "latin-1 file"),
        ([part(b"doc", b"\xff\xfe", filename=latin + b".txt", ctype=b"text/plain")], "latin-1 filename"),
        ([part(b"role", "é".encode("utf-16-le"), ctype=b"text/plain; charset=UTF-16LE")], "UTF-16LE"),
    ]
    out = [Variant("", "charsets", CT, mp([part(b"user", b"alice")] + p), note) for p, note in cases]
    out.append(Variant("", "charsets", "multipart/form-data; charset=ISO-8859-1; boundary=XyZ1",
                       simple(part(b"role", latin)), "request charset latin-1"))
    out.append(Variant("", "charsets", "multipart/form-data; boundary=XyZ1; charset=UTF-16",
                       simple(part(b"role", utf16)), "request charset UTF-16"))
    return out


def duplicates_class() -> list[Variant]:
    u, a = b"user", b"admin"
    f = lambda n, v=b"data\n", fn=b"x.txt": part(n, v, filename=fn, ctype=b"text/plain")  # noqa: E731
    cases = [
        ([part(b"role", u), part(b"role", a)], "role=user then role=admin"),
        ([part(b"role", a), part(b"role", u)], "role=admin then role=user"),
        ([part(b"role", u), part(b"role", u)], "same value twice"),
        ([f(b"doc", b"one"), f(b"doc", b"two", b"y.txt")], "a file twice"),
        ([part(b"doc", u), f(b"doc")], "field then file, same name"),
        ([f(b"doc"), part(b"doc", u)], "file then field, same name"),
        ([part(b"role", u), part(b"role[]", a)], "a then a[]"),
        ([part(b"role[]", a), part(b"role", u)], "a[] then a"),
        ([part(b"role[0]", u), part(b"role[]", a)], "a[0] then a[]"),
        ([part(b"role", u), part(b"role[x]", a)], "a then a[x]"),
        ([part(b"role[x]", a), part(b"role", u)], "a[x] then a"),
        ([part(b"a.b", u), part(b"a_b", a)], "a.b then a_b"),
        ([part(b"a_b", u), part(b"a.b", a)], "a_b then a.b"),
        ([part(b"a b", u), part(b"a_b", a)], "'a b' then a_b"),
        ([part(b"role", u), part(b"Role", a)], "role then Role"),
        ([part(b"role", u), part(b"role ", a)], "role then 'role '"),
        ([part(b"role", u), part(b" role", a)], "role then ' role'"),
        ([part(b"role", u), part(b"role%00", a)], "role then role%00"),
        ([part(b"role", u), part(b"%72ole", a)], "role then %72ole"),
        ([part(b"role", u), part("ｒole".encode(), a)], "role then fullwidth r"),
        ([part(b"colors[]", b"red"), part(b"colors[]", b"green"), part(b"colors[]", b"blue")],
         "colors[] three times (repeat 3 allowed)"),
        ([part(b"colors[]", b"red")] * 4, "colors[] four times (over repeat)"),
        ([part(b"colors[]", b"red"), part(b"colors[]", b"green"), part(b"colors", b"admin")], "colors[] then colors"),
        ([part(b"colors", b"admin"), part(b"colors[]", b"red")], "colors then colors[]"),
        ([part(b"colors[]", b"red"), part(b"colors[0]", b"admin")], "colors[] then colors[0]"),
        ([part(b"colors[0]", b"admin"), part(b"colors[]", b"red")], "colors[0] then colors[]"),
        ([part(b"colors[]", b"red"), part(b"colors[1]", b"admin"), part(b"colors[]", b"green")],
         "colors[1] between two colors[]"),
        ([f(b"attachments[]"), f(b"attachments[]", b"two", b"y.txt")], "two attachments[] files (allowed)"),
        ([f(b"attachments"), f(b"attachments", b"two", b"y.txt")], "file multiple without brackets"),
        ([f(b"attachments[]"), part(b"attachments[]", a)], "attachments[] file then field"),
        ([part(b"a[b]", u), part(b"a[b]", a)], "a[b] twice"),
        ([part(b"a[b]", u), part(b"a[ b]", a)], "a[b] then a[ b]"),
        ([part(b"a[b]", u), part(b"a[b", a)], "a[b] then a[b"),
        ([part(b"a", u), part(b"a[", a)], "a then a["),
        ([part(b"role", u), part(b"role", a), part(b"role", u)], "user, admin, user"),
        ([part(b"role", b""), part(b"role", a)], "empty then admin"),
        ([part(b"role", u), part(b"role", b"")], "user then empty"),
        ([part(b"_charset_", b"utf-8"), part(b"_charset_", b"ISO-8859-1")], "_charset_ twice"),
        ([part(b"a.b[c]", u), part(b"a_b[c]", a)], "a.b[c] then a_b[c]"),
        ([part(b"a[b.c]", u), part(b"a[b_c]", a)], "a[b.c] then a[b_c]"),
    ]
    out = [Variant("", "duplicates", CT, mp([part(b"user", b"alice")] + p), note) for p, note in cases]
    for body, note in [(b"role=user&role=admin", "urlencoded role twice"), (b"role=user&role%5B%5D=admin", "a and a[]"),
                       (b"a.b=user&a_b=admin", "a.b and a_b"), (b"colors%5B%5D=red&colors%5B%5D=green",
                                                                "colors[] twice (allowed)")]:
        out.append(Variant("", "duplicates", URLENC, body, note))
    return out


def encodings_class() -> list[Variant]:
    out = []
    for cte in (b"base64", b"quoted-printable", b"7bit", b"8bit", b"binary", b"BASE64", b"x-token"):
        data = b"YWRtaW4=" if cte.lower() == b"base64" else b"adm=69n"
        out.append(Variant("", "encodings", CT, simple(part(b"user", b"alice"), part(
            b"role", data, extra=[b"Content-Transfer-Encoding: " + cte])), f"field CTE {cte.decode()}"))
        out.append(Variant("", "encodings", CT, simple(part(b"user", b"alice"), part(
            b"doc", data, filename=b"a.txt", ctype=b"text/plain", extra=[b"Content-Transfer-Encoding: " + cte])),
            f"file CTE {cte.decode()}"))
    out.append(Variant("", "encodings", CT, simple(part(b"role", b"\x1f\x8b" + gzip.compress(b"admin")[2:],
                                                        extra=[b"Content-Encoding: gzip"])), "part Content-Encoding gzip"))
    body = base_form()
    dup = simple(part(b"role", b"user"), part(b"role", b"admin"))
    for enc, comp, note in [
        ("gzip", gzip.compress(body, mtime=0), "gzip body"),
        ("x-gzip", gzip.compress(body, mtime=0), "x-gzip body"),
        ("deflate", zlib.compress(body), "deflate body"),
        ("gzip", gzip.compress(dup, mtime=0), "gzip body with role twice"),
        ("gzip, gzip", gzip.compress(gzip.compress(body, mtime=0), mtime=0), "gzip twice"),
        ("identity", body, "identity"),
        ("GZIP", gzip.compress(body, mtime=0), "upper-case GZIP"),
        ("gzip", gzip.compress(body, mtime=0) + b"junk", "gzip with trailing junk"),
        ("br", body, "unsupported br (plain body)"),
        ("gzip", body, "declared gzip, plain body"),
    ]:
        out.append(Variant("", "encodings", CT, comp, f"Content-Encoding {note}", headers=[("Content-Encoding", enc)]))
    out.append(Variant("", "encodings", URLENC, gzip.compress(b"user=alice&role=user", mtime=0), "gzip urlencoded",
                       headers=[("Content-Encoding", "gzip")]))
    return out


def pollution_class() -> list[Variant]:
    out = []
    for body, note in [
        (b"role=user;role=admin", "; as separator"), (b"role=user%26role%3Dadmin", "escaped & and ="),
        (b"role=user&role[]=admin", "raw brackets"), (b"role=user&&role=admin", "empty pair between"),
        (b"role=user&ROLE=admin", "case variant"), (b"role=user&role.=admin", "trailing dot"),
        (b"role=user&%72ole=admin", "escaped name"), (b"role=user&role%00=admin", "NUL in name"),
        (b"role=user&role%20=admin", "trailing space in name"), (b"role=user&+role=admin", "plus before name"),
        (b"role=user\r\nrole=admin", "CRLF separated"), (b"role=user&role", "name without value"),
        (b"role=user&=admin", "value without name"), (b"role=user&role=admin=x", "= in value"),
        (b"role=user%u0026role=admin", "%u escape"), (b"role=user&amp;role=admin", "HTML entity separator"),
    ]:
        out.append(Variant("", "pollution", URLENC, body, note))
    for q in ("role=admin", "role=admin&user=mallory"):
        out.append(Variant("", "pollution", URLENC, b"user=alice&role=user", f"query {q} with urlencoded body",
                           path=f"/?{q}"))
        out.append(Variant("", "pollution", CT, simple(part(b"user", b"alice"), part(b"role", b"user")),
                           f"query {q} with multipart body", path=f"/?{q}"))
    mp_cases = [
        (simple(part(b"role", b"user"), part(disposition=b'Content-Disposition: form-data; name="role"; name="admin"',
                                              data=b"x")), "name parameter twice"),
        (simple(part(b"role", b"user\r\n--XyZ1\r\nContent-Disposition: form-data; name=\"role\"\r\n\r\nadmin")),
         "a part smuggled in a value"),
        (simple(part(b"role", b"user&role=admin")), "urlencoded pair inside a multipart value"),
        (simple(part(b"user", b"alice")) + b"&role=admin", "urlencoded tail after the close"),
    ]
    out += [Variant("", "pollution", CT, body, note) for body, note in mp_cases]
    out.append(Variant("", "pollution", URLENC, simple(part(b"role", b"admin")), "multipart body as urlencoded"))
    out.append(Variant("", "pollution", "multipart/form-data; boundary=XyZ1; boundary=role", simple(
        part(b"role", b"user")), "two boundaries"))
    return out


def urlencoded_class() -> list[Variant]:
    bodies = [
        b"a=1&b=2", b"a+b=1", b"a%20b=1", b"a.b=1", b"a[b]=1", b"a=%", b"a=%zz", b"a=%u0041", b"a=1;b=2", b"&&a=1&&",
        b"a", b"=1", b"a==1", b"a=1=2", b"%61=1", b"a=%00", b"a=%ff", b"a=%c3%a9", "a=é".encode(), b"a=\xff",
        b"a=1&A=2", b"_charset_=ISO-8859-1&a=%e9", b"a=%C3%A9", b"a=1\r\n", b" a=1", b"a\t=1", b"a=1+2", b"a=1%2B2",
        b"a=%2", b"a=%%41", b"a=%4", b"a%5B%5D=1&a%5B%5D=2", b"a=1&a%5B%5D=2", b"a%2Eb=1", b"a=\x00", b"a=1&",
        b"&", b"", b"a=" + b"x" * 70000, b"a=%E2%80%AE", b"%E2%80%AEa=1", b"a=%0D%0A", b"a%0d%0a=1",
        b"a=1&b=%", b"a[=1", b"a]=1", b"a[b]c=1", b"a%5Bb=1", b"__proto__=1", b"a=%ef%bb%bf1",
    ]
    out = [Variant("", "urlencoded", URLENC, b, f"body {b[:40]!r}") for b in bodies]
    for ctype in (URLENC + "; charset=UTF-8", URLENC + "; charset=ISO-8859-1", URLENC + "; charset=UTF-16",
                  "Application/X-WWW-Form-Urlencoded", URLENC + ";", "application/x-url-encoded"):
        out.append(Variant("", "urlencoded", ctype, b"a=%e9&b=2", f"Content-Type {ctype}"))
    return out


MUTATION_BYTES = b"\r\n\"';=\\-[] .%\x00\xff\t"


def random_class(rng: random.Random, count: int) -> list[Variant]:
    seeds = [(CT, base_form()), (CT, simple(part(b"role", b"user"), part(b"a[b]", b"1"))),
             (browser_form("chrome")[0], browser_form("chrome")[1][:2000] + b"\r\n------WebKitFormBoundary7MA4YWxkTrZu0gW--\r\n"),
             (URLENC, b"user=alice&role=user&a%5Bb%5D=1")]
    out = []
    for i in range(count):
        ctype, body = seeds[i % len(seeds)]
        data = bytearray(body)
        ops = []
        for _ in range(rng.randint(1, 3)):
            op = rng.choice(("flip", "insert", "delete", "dup", "set"))
            pos = rng.randrange(len(data)) if data else 0
            if op == "flip" and data:
                data[pos] ^= 1 << rng.randrange(8)
            elif op == "insert":
                data[pos:pos] = bytes([rng.choice(MUTATION_BYTES)])
            elif op == "delete" and data:
                del data[pos]
            elif op == "dup" and data:
                end = min(len(data), pos + rng.randint(1, 40))
                data[end:end] = data[pos:end]
            elif op == "set" and data:
                data[pos] = rng.choice(MUTATION_BYTES)
            ops.append(f"{op}@{pos}")
        out.append(Variant("", "random", ctype, bytes(data), f"seed body {i % len(seeds)}: {' '.join(ops)}"))
    return out


def variants(seed: int = 20261130, random_count: int = 120) -> list[Variant]:
    rng = random.Random(seed)
    groups = [controls(), boundary_class(), framing_class(), part_headers_class(), disposition_class(),
              names_class(), filenames_class(), charsets_class(), duplicates_class(), encodings_class(),
              pollution_class(), urlencoded_class(), random_class(rng, random_count)]
    out = []
    for group in groups:
        for i, v in enumerate(group):
            v.id = f"{v.cls}-{i:03d}"
            out.append(v)
    return out


if __name__ == "__main__":
    from collections import Counter

    vs = variants()
    print(len(vs), dict(Counter(v.cls for v in vs)))
