<?php
// Differential backend: PHP's own parse ($_POST, $_FILES) under `php -S 127.0.0.1:PORT app.php`.
// PHP nests bracketed names (`a[b]`, `a[]`) and rewrites `.` and space (and `[` when unbalanced) in the
// top-level name to `_`. Both arrays are flattened back into bracket paths (`a[b]`, `a[0]`) so they can be
// compared with the other frameworks: $_POST["a"]["b"] is reported as `a[b]`, the second `a[]` as `a[1]`.
// PHP keeps no order between $_POST and $_FILES: parts are fields first, then files. `form` is the same
// flattened view ($_POST[name] / $_FILES[name]: one value per path). Appends the X-Request-Id to
// $UPSTREAM_LOG once the body was parsed.
function digest($data) { return ["size" => strlen($data), "sha256" => hash("sha256", $data)]; }

function flat_post($prefix, $value, &$out) {
    if (is_array($value)) {
        foreach ($value as $k => $v) { flat_post($prefix . "[" . $k . "]", $v, $out); }
    } else {
        $out[] = [$prefix, $value];
    }
}

// $_FILES["a"]["name"]["b"] ...: walk the "name" tree, reading the other keys at the same path.
function flat_files($prefix, $f, $path, &$out) {
    $name = $f["name"];
    foreach ($path as $p) { $name = $name[$p]; }
    if (is_array($name)) {
        foreach ($name as $k => $_) { flat_files($prefix . "[" . $k . "]", $f, array_merge($path, [$k]), $out); }
        return;
    }
    $get = function ($key) use ($f, $path) { $v = $f[$key]; foreach ($path as $p) { $v = $v[$p]; } return $v; };
    $entry = ["name" => $prefix, "filename" => $name, "content_type" => $get("type")];
    $error = $get("error");
    $data = ($error === UPLOAD_ERR_OK) ? file_get_contents($get("tmp_name")) : "";
    $entry = array_merge($entry, digest($data), ["kind" => "file"]);
    if ($error !== UPLOAD_ERR_OK) { $entry["error"] = $error; }
    $out[] = $entry;
}

if ($_SERVER["REQUEST_METHOD"] !== "POST") { echo "ok"; return; }
$fields = [];
foreach ($_POST as $k => $v) { flat_post((string)$k, $v, $fields); }
$files = [];
foreach ($_FILES as $k => $f) { flat_files((string)$k, $f, [], $files); }
$parts = [];
$form = [];
foreach ($fields as [$name, $value]) {
    $parts[] = array_merge(["name" => $name, "filename" => null, "content_type" => null], digest($value),
                           ["kind" => "field"]);
    $form[$name] = digest($value);
}
foreach ($files as $entry) {
    $parts[] = $entry;
    $name = $entry["name"];
    if (!array_key_exists($name, $form)) {
        $form[$name] = ["size" => $entry["size"], "sha256" => $entry["sha256"], "filename" => $entry["filename"]];
    }
}
$log = getenv("UPSTREAM_LOG");
if ($log) { file_put_contents($log, ($_SERVER["HTTP_X_REQUEST_ID"] ?? "") . "\n", FILE_APPEND | LOCK_EX); }
header("Content-Type: application/json");
$flags = JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE;
// JSON_FORCE_OBJECT keeps `form` an object when its keys look like list indexes ("0", "1").
echo '{"parts":' . json_encode($parts, $flags) . ',"form":' . json_encode($form, $flags | JSON_FORCE_OBJECT)
    . ',"order":"fields-then-files"}';
