// Path-routing backend: node's http module, routing on the path as a plain node server reads it.
// Usage: node node_router.js PORT MODE. MODE "url": `new URL(req.url, base).pathname` (the WHATWG URL parser:
// `\` is `/`, `//host/x` names a host, dot segments and `%2e` resolved); MODE "raw": `req.url` up to `?`, as
// routers that match the raw target read it. `/api` and below is the "api" handler, every other path "other".
'use strict';
const http = require('http');
const [port, mode] = [Number(process.argv[2]), process.argv[3]];
http.createServer((req, res) => {
  let path;
  try {
    path = mode === 'url' ? new URL(req.url, 'http://localhost').pathname : req.url.split('?')[0];
  } catch (e) {
    res.writeHead(400, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ handler: 'error', path: null }));
    return;
  }
  const handler = path === '/api' || path.startsWith('/api/') ? 'api' : 'other';
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ handler, path }));
  });
}).listen(port, '127.0.0.1');
