// node's built-in http module (a keep-alive server; keepAliveTimeout 5 s by default) with a
// minimal multipart/form-data parser written here (no npm packages are available): it splits the
// buffered body on the boundary and reads each part's Content-Disposition. Good enough for the
// well-formed bodies the tests send; not a general parser. urlencoded bodies use URLSearchParams.
// Usage: node node_app.js PORT  (prints "READY PORT"); appends one JSON line per finished request
// to $UPSTREAM_LOG.
"use strict";
const http = require("http");
const crypto = require("crypto");
const fs = require("fs");

function boundaryOf(ctype) {
  const m = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(ctype || "");
  return m ? (m[1] || m[2]) : null;
}

function parseMultipart(body, boundary) {
  const fields = {}, files = {};
  const delim = Buffer.from("--" + boundary);
  let pos = body.indexOf(delim);
  if (pos < 0) return { fields, files, ok: false };
  for (;;) {
    pos += delim.length;
    if (body.slice(pos, pos + 2).toString() === "--") return { fields, files, ok: true };
    pos += 2; // CRLF after the delimiter
    const headEnd = body.indexOf("\r\n\r\n", pos);
    if (headEnd < 0) return { fields, files, ok: false };
    const head = body.slice(pos, headEnd).toString("utf8");
    const next = body.indexOf(Buffer.from("\r\n--" + boundary), headEnd + 4);
    if (next < 0) return { fields, files, ok: false };
    const data = body.slice(headEnd + 4, next);
    const name = (/name="([^"]*)"/.exec(head) || [])[1];
    const filename = (/filename="([^"]*)"/.exec(head) || [])[1];
    if (filename !== undefined) {
      (files[name] = files[name] || []).push({
        filename, size: data.length, sha256: crypto.createHash("sha256").update(data).digest("hex"),
      });
    } else {
      (fields[name] = fields[name] || []).push(data.toString("utf8"));
    }
    pos = next + 2;
  }
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    const ctype = req.headers["content-type"] || "";
    let fields = {}, files = {}, ok = true;
    if (ctype.startsWith("multipart/form-data")) {
      ({ fields, files, ok } = parseMultipart(body, boundaryOf(ctype)));
    } else if (ctype.startsWith("application/x-www-form-urlencoded")) {
      for (const [k, v] of new URLSearchParams(body.toString("utf8"))) (fields[k] = fields[k] || []).push(v);
    }
    const record = {
      app: process.env.UPSTREAM_NAME || "node", method: req.method, path: req.url.split("?")[0],
      request_id: req.headers["x-request-id"] || null, content_type: ctype || null,
      content_length: req.headers["content-length"] || null,
      transfer_encoding: req.headers["transfer-encoding"] || null,
      body_size: body.length, body_sha256: crypto.createHash("sha256").update(body).digest("hex"),
      multipart_ok: ok, fields, files,
    };
    const line = JSON.stringify(record);
    if (process.env.UPSTREAM_LOG) fs.appendFileSync(process.env.UPSTREAM_LOG, line + "\n");
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(line);
  });
});
server.listen(Number(process.argv[2]), "127.0.0.1", () => {
  process.stdout.write("READY " + server.address().port + "\n");
});
