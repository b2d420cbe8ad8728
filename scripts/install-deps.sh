#!/usr/bin/env bash
# Installs what the build and the tests need: Debian packages when missing,
# and a Python venv at .venv with the PyPI packages the tests use.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
# php-cli: `php -S` is one of the real upstreams (Tests/e2e/upstreams/); chromium and chromium-driver drive
# Tests/e2e/test_browser.py; systemd (systemd-analyze) and logrotate check docker/formwall.service and
# docker/logrotate in Tests/e2e/test_packaging.py; clamav-daemon is the real clamd of Tests/e2e/test_antivirus.py
# (started there with a signature database of its own: no download). golang-go, nodejs and node-busboy are
# backends of Tests/e2e/test_differential_frameworks.py (Go's net/http, busboy, undici's Request.formData()).
# php-symfony-http-foundation is Symfony's Request, which reads the method as Symfony and Laravel apps do
# (Tests/e2e/test_method_override.py).
for pkg in libssl-dev zlib1g-dev pkg-config curl nginx-light wrk python3-venv php-cli chromium chromium-driver \
    systemd logrotate clamav-daemon golang-go nodejs node-busboy php-symfony-http-foundation; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -r Tests/requirements.txt
