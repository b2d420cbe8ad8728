<?php
// Path-routing backend: a hand-written front controller under `php -S`, as many PHP apps route:
// rawurldecode(parse_url(REQUEST_URI, PHP_URL_PATH)). parse_url reads `//host/x` as a host and the path `/x`.
// `/api` and below is the "api" handler, every other path "other".
$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
$path = $path === null || $path === false ? '/' : rawurldecode($path);
$handler = ($path === '/api' || strncmp($path, '/api/', 5) === 0) ? 'api' : 'other';
header('Content-Type: application/json');
echo json_encode(['handler' => $handler, 'path' => $path], JSON_INVALID_UTF8_SUBSTITUTE);
