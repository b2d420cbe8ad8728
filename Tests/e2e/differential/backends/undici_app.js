// Differential backend: undici's body mixin `Request.formData()` (node 20's global Request), fed the
// incoming body. `form` is `formData.get(name)`. Usage: node undici_app.js PORT; appends the X-Request-Id
// of each parsed body to $UPSTREAM_LOG.
"use strict";
const http = require("http");
const crypto = require("crypto");
const fs = require("fs");

function digest(buf) {
  return { size: buf.length, sha256: crypto.createHash("sha256").update(buf).digest("hex") };
}

function reply(res, status, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

async function view(value) {
  if (typeof value === "string") return { d: digest(Buffer.from(value, "utf8")), file: null };
  return { d: digest(Buffer.from(await value.arrayBuffer())), file: value };
}

async function handle(req, res) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const headers = {};
  if (req.headers["content-type"] !== undefined) headers["content-type"] = req.headers["content-type"];
  const request = new Request("http://127.0.0.1/", { method: "POST", headers, body: Buffer.concat(chunks),
                                                      duplex: "half" });
  let fd;
  try {
    fd = await request.formData();
  } catch (e) {
    reply(res, 400, { error: String(e.message || e) });
    return;
  }
  // a prototype-less object, so that `__proto__` is reported as formData.get() returns it
  const parts = [], form = Object.create(null);
  for (const [name, value] of fd.entries()) {
    const { d, file } = await view(value);
    parts.push(file ? { name, filename: file.name, content_type: file.type, ...d, kind: "file" }
                    : { name, filename: null, content_type: null, ...d, kind: "field" });
  }
  for (const name of new Set(fd.keys())) {
    const { d, file } = await view(fd.get(name));
    form[name] = file ? { ...d, filename: file.name } : d;
  }
  if (process.env.UPSTREAM_LOG) fs.appendFileSync(process.env.UPSTREAM_LOG, `${req.headers["x-request-id"]}\n`);
  reply(res, 200, { parts, form, order: "body" });
}

http.createServer((req, res) => {
  if (req.method !== "POST") { res.end("ok"); return; }
  handle(req, res).catch((e) => reply(res, 500, { error: String(e.stack || e) }));
}).listen(Number(process.argv[2]), "127.0.0.1");
