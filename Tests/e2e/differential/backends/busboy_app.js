// Differential backend: busboy (Debian's node-busboy, required from /usr/share/nodejs) under node's http
// module, with busboy's default options, as typical application code uses it. `form` is what such code
// builds: `form[name] = value` in the 'field' and 'file' handlers, so the last assignment wins.
// Usage: node busboy_app.js PORT; appends the X-Request-Id of each parsed body to $UPSTREAM_LOG.
"use strict";
const http = require("http");
const crypto = require("crypto");
const fs = require("fs");
const busboy = require("/usr/share/nodejs/busboy");

function digest(buf) {
  return { size: buf.length, sha256: crypto.createHash("sha256").update(buf).digest("hex") };
}

function logRequest(id) {
  if (process.env.UPSTREAM_LOG) fs.appendFileSync(process.env.UPSTREAM_LOG, `${id}\n`);
}

function reply(res, status, obj) {
  if (res.headersSent) return;  // busboy may report an error and then close
  const body = JSON.stringify(obj);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

http.createServer((req, res) => {
  if (req.method !== "POST") { res.end("ok"); return; }
  let bb;
  try {
    // busboy decodes names and filenames as Latin-1 unless told otherwise; an application that wants the
    // browser's filename sets defParamCharset (docs/differential.md, "busboy").
    bb = busboy({ headers: req.headers, defParamCharset: "utf8" });
  } catch (e) {
    req.resume();
    reply(res, 400, { error: String(e.message || e) });
    return;
  }
  const parts = [], form = {}, pending = [];
  bb.on("field", (name, val, info) => {
    const d = digest(Buffer.from(val, "utf8"));
    parts.push({ name, filename: null, content_type: null, ...d, kind: "field" });
    form[name] = d;
  });
  bb.on("file", (name, stream, info) => {
    const chunks = [];
    pending.push(new Promise((resolve) => {
      stream.on("data", (c) => chunks.push(c));
      stream.on("end", () => {
        const d = digest(Buffer.concat(chunks));
        parts.push({ name, filename: info.filename, content_type: info.mimeType, ...d, kind: "file" });
        form[name] = { ...d, filename: info.filename };
        resolve();
      });
    }));
  });
  bb.on("error", (e) => { reply(res, 400, { error: String(e.message || e) }); req.unpipe(bb); req.resume(); });
  bb.on("close", () => {
    Promise.all(pending).then(() => {
      if (res.headersSent) return;
      logRequest(req.headers["x-request-id"]);
      reply(res, 200, { parts, form, order: "body" });
    });
  });
  req.pipe(bb);
}).listen(Number(process.argv[2]), "127.0.0.1");
