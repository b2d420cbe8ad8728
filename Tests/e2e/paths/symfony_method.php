<?php
// Method-reading backend: Symfony HttpFoundation's Request under `php -S`, as Symfony and Laravel apps read the
// method. getMethod() takes X-HTTP-Method-Override on a POST; with enableHttpMethodParameterOverride() (Laravel
// turns it on) also `_method` from the body or the query. Answers {"method": ..., "real": REQUEST_METHOD}.
require_once '/usr/share/php/Symfony/Component/HttpFoundation/autoload.php';

use Symfony\Component\HttpFoundation\Request;

Request::enableHttpMethodParameterOverride();
$request = Request::createFromGlobals();
$answer = json_encode(['method' => $request->getMethod(), 'real' => $_SERVER['REQUEST_METHOD'],
                      'original_url' => $_SERVER['HTTP_X_ORIGINAL_URL'] ?? null,
                      'rewrite_url' => $_SERVER['HTTP_X_REWRITE_URL'] ?? null,
                      'request_id' => $_SERVER['HTTP_X_REQUEST_ID'] ?? null,
                      // The names of the fields it got that hold a `_`, as sent.
                      'underscored' => array_values(array_filter(array_keys(getallheaders()),
                                                                 fn($name) => strpos($name, '_') !== false))]);
// Every request the app handled, one JSON line each (UPSTREAM_LOG), so a test can tell it never saw one.
$log = getenv('UPSTREAM_LOG');
if ($log) {
    file_put_contents($log, $answer . "\n", FILE_APPEND | LOCK_EX);
}
header('Content-Type: application/json');
echo $answer;
