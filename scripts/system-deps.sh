#!/usr/bin/env bash
# Installs the Debian packages that the tests need (PostgreSQL, Redis, nginx,
# Chromium, openssl), once. Servers are started by the tests themselves, on 127.0.0.1.
set -euo pipefail
needed=()
command -v chromium >/dev/null 2>&1 || needed+=(chromium)
command -v redis-server >/dev/null 2>&1 || needed+=(redis-server)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || needed+=(nginx)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || needed+=(postgresql)
command -v openssl >/dev/null 2>&1 || needed+=(openssl)  # a throwaway certificate for deploy/nginx/bot.conf
if [ ${#needed[@]} -eq 0 ]; then
  exit 0
fi
echo "installing Debian packages: ${needed[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${needed[@]}" >/dev/null
