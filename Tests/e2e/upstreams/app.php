<?php
// php -S 127.0.0.1:PORT app.php (kinds `php` and `php-content-length`): echoes PHP's own parse ($_POST, $_FILES) as JSON and appends the
// same JSON line to $UPSTREAM_LOG once the request was handled.
$files = new stdClass();
foreach ($_FILES as $name => $f) {
    $entry = ["filename" => $f["name"]];
    if ($f["error"] !== UPLOAD_ERR_OK) {
        $entry["error"] = $f["error"];
    } else {
        $entry["size"] = filesize($f["tmp_name"]);
        $entry["sha256"] = hash_file("sha256", $f["tmp_name"]);
    }
    $files->$name = [$entry];
}
$fields = new stdClass();
foreach ($_POST as $name => $value) {
    $fields->$name = [$value];
}
$record = [
    "app" => getenv("UPSTREAM_NAME") ?: "php",
    "method" => $_SERVER["REQUEST_METHOD"],
    "path" => parse_url($_SERVER["REQUEST_URI"], PHP_URL_PATH),
    "request_id" => $_SERVER["HTTP_X_REQUEST_ID"] ?? null,
    "content_type" => $_SERVER["CONTENT_TYPE"] ?? null,
    "content_length" => $_SERVER["CONTENT_LENGTH"] ?? null,
    "transfer_encoding" => $_SERVER["HTTP_TRANSFER_ENCODING"] ?? null,
    "fields" => $fields,
    "files" => $files,
];
$line = json_encode($record, JSON_UNESCAPED_SLASHES);
$log = getenv("UPSTREAM_LOG");
if ($log) {
    file_put_contents($log, $line . "\n", FILE_APPEND | LOCK_EX);
}
header("Content-Type: application/json");
// php -S sends close-delimited responses; PHP frameworks often set Content-Length themselves,
// which gives a length-delimited response that still says `Connection: close`.
if (getenv("PHP_SEND_CONTENT_LENGTH")) {
    header("Content-Length: " . strlen($line));
}
echo $line;
