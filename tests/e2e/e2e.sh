#!/usr/bin/env bash
# The editor end-to-end test: builds, lints, unit-tests and packages the VS Code extension (offline after
# `npm ci`), installs the .vsix into a fresh code-server, and checks through the extension host (a probe
# extension) and headless Chromium what Newt shows for the fixtures in tests/e2e/workspace; then runs the
# same checks through headless Neovim's built-in LSP client. Prints "N passed, N failed" last.
#
# Environment:
#   NEWT_E2E_CACHE   where the tooling is installed (default ~/.cache/newt-e2e; reruns reuse it)
#   NEWT_E2E_PYTHON  the interpreter that runs `python -m lsp_server` (default: .ci-venv, .venv, python3)
#   NEWT_E2E_SCREENSHOT=1  also copy the workbench screenshot to docs/images and vscode-extension/images
#   NEWT_E2E_ONLY    "vscode" or "nvim" to run one client (the build always runs)
#   NEWT_E2E_LOCK_TIMEOUT  seconds to wait for another e2e run that uses the same cache (default 1800)
#   NEWT_E2E_SASS_CLICK=0  skip the click on a line of a SASS view (by default the e2e clicks one and checks that
#                          the source editor lands on its source line)
# Exit status: 0 all passed, 1 a check failed, 77 the tooling could not be installed (the reason is printed).
# One run at a time per cache folder (an exclusive flock on $C/.lock). The extension is built in a copy under
# $C (its own node_modules, dist/, out/, the .vsix): the checkout's vscode-extension/ is only read, so a
# .vsix or dist/ you built there stays as it is.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
C=${NEWT_E2E_CACHE:-$HOME/.cache/newt-e2e}
export NEWT_E2E_CACHE=$C
T0=$(date +%s)
say() { echo "[e2e $(( $(date +%s) - T0 ))s] $*"; }
results=()   # "name:0|1"
record() { results+=("$1:$2"); say "$([ "$2" = 0 ] && echo PASS || echo FAIL) $1"; }

# -- 0. one run at a time per cache folder ---------------------------------------------------------
mkdir -p "$C" || { echo "SKIP: the e2e cache folder $C cannot be made" >&2; exit 77; }
if command -v flock >/dev/null; then
  exec 9>"$C/.lock"
  if ! flock -n 9; then
    say "waiting for another e2e run that uses $C (up to ${NEWT_E2E_LOCK_TIMEOUT:-1800}s)"
    if ! flock -w "${NEWT_E2E_LOCK_TIMEOUT:-1800}" 9; then
      echo "SKIP: another e2e run held $C/.lock for ${NEWT_E2E_LOCK_TIMEOUT:-1800}s (set NEWT_E2E_CACHE to use another folder)" >&2
      exit 77
    fi
  fi
  export NEWT_E2E_LOCKED=1
fi

# -- 1. tooling ----------------------------------------------------------------------------------
SETUP_LOG=$(mktemp)
if ! bash "$HERE/setup.sh" >"$SETUP_LOG" 2>&1; then
  tail -40 "$SETUP_LOG" >&2
  # setup.sh's last "CAUSE:" line names the step and the error it printed (not a warning that came last)
  why=$(grep '^CAUSE: ' "$SETUP_LOG" | tail -1 | sed 's/^CAUSE: //')
  [ -n "$why" ] || why=$(grep -vE '^\[e2e setup|^\s*$|WARNING' "$SETUP_LOG" | tail -1)
  rm -f "$SETUP_LOG"
  echo "SKIP: the editor e2e tooling could not be installed into $C: $why" >&2
  exit 77
fi
rm -f "$SETUP_LOG"
NODE_DIR=$(readlink -f "$C/node")
export PATH="$NODE_DIR/bin:$PATH" npm_config_nodedir="$NODE_DIR" npm_config_cache="$C/npm-cache" \
       npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
CS="$C/code-server/node_modules/code-server"
NVIM="$C/venv/bin/nvim"
say "node $(node --version), code-server $(node -p "require('$CS/package.json').version"), $("$NVIM" --version | head -1)"

# -- the interpreter for the language server -----------------------------------------------------------
PY=${NEWT_E2E_PYTHON:-}
if [ -z "$PY" ]; then
  for cand in "$REPO/.ci-venv/bin/python" "$REPO/.venv/bin/python" "$(command -v python3)"; do
    [ -x "$cand" ] && { PY=$cand; break; }
  done
fi
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
if ! "$PY" -c 'import lsp_server, newt' 2>"$C/pycheck.log"; then
  cat "$C/pycheck.log" >&2
  echo "FAIL: $PY cannot import lsp_server (the language server); set NEWT_E2E_PYTHON" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
say "language server interpreter: $PY"

# -- 2. the extension: npm ci, lint, unit tests, build, package ----------------------------------------
EXT="$REPO/vscode-extension"
BUILD="$C/extension-build"   # a copy of vscode-extension/ (sources only), with node_modules kept between runs
mkdir -p "$C/runs"
VSIX_DIR=$(mktemp -d "$C/runs/v.XXXXXX")
VSIX="$VSIX_DIR/newt.vsix"
build() {
  mkdir -p "$BUILD" || return 1
  find "$BUILD" -mindepth 1 -maxdepth 1 ! -name node_modules ! -name .lock-hash -exec rm -rf {} + || return 1
  tar -C "$EXT" --exclude=./node_modules --exclude=./dist --exclude=./out --exclude='*.vsix' -cf - . \
    | tar -C "$BUILD" -xf - || return 1
  cd "$BUILD" || return 1
  local lock_hash; lock_hash=$(sha256sum package-lock.json | cut -c1-16)
  if [ ! -d node_modules ] || [ "$(cat .lock-hash 2>/dev/null)" != "$lock_hash" ]; then
    npm ci --no-audit --no-fund --loglevel=error >"$C/npm-ci.log" 2>&1 || { cat "$C/npm-ci.log"; return 1; }
    echo "$lock_hash" > .lock-hash
  fi
  npm run -s lint || return 1
  local rc=0
  npm test >"$C/npm-test.log" 2>&1 || rc=$?
  grep -E '^(ℹ (tests|pass|fail)|✖)' "$C/npm-test.log" | sed 's/^/    /'
  [ "$rc" = 0 ] || { cat "$C/npm-test.log"; return 1; }
  # the documented command, offline: it runs vscode:prepublish (the production bundle) first
  npx --no-install vsce package --no-dependencies --no-rewrite-relative-links --allow-missing-repository -o "$VSIX" 2>&1 | tail -3
  [ -f "$VSIX" ]
}
( build ); record "extension: npm ci, lint, unit tests, package (in $BUILD)" $?
if [ ! -f "$VSIX" ]; then
  echo "0 passed, 1 failed"; exit 1
fi
python3 -c 'import sys, zipfile; [print("    " + n) for n in zipfile.ZipFile(sys.argv[1]).namelist()]' "$VSIX"

# keep the last few run folders for debugging, drop older ones
ls -1dt "$C"/runs/[rnv].* 2>/dev/null | tail -n +12 | xargs -r rm -rf

# -- 3. VS Code (code-server) -----------------------------------------------------------------------
vscode_session() {  # $1 = trusted | restricted
  local mode=$1 port=$(( 20000 + RANDOM % 20000 ))
  local RUN; RUN=$(mktemp -d "$C/runs/r.XXXXXX")   # short: unix socket paths must stay < 108 bytes
  mkdir -p "$RUN/ud/User" "$RUN/ext" "$RUN/home" "$RUN/tmp"
  cp -r "$HERE/workspace" "$RUN/ws"
  # Triton-syntax and Helion fixtures shared with tests/lsp (their messages must say tl. / hl.)
  cp "$HERE"/../lsp/fixtures/{triton_add,triton_errors,helion_kernels,perf_matmul}.py "$RUN/ws/kernels/"
  cp -r "$REPO/examples" "$RUN/ws/examples"   # Compile on every kernel of the project's examples
  local trust_flag=(--disable-workspace-trust)
  local trust_settings='"security.workspace.trust.enabled": false,'
  if [ "$mode" = restricted ]; then
    trust_flag=()
    trust_settings='"security.workspace.trust.enabled": true, "security.workspace.trust.startupPrompt": "never", "security.workspace.trust.banner": "never",'
  fi
  cat > "$RUN/ud/User/settings.json" <<JSON
{ "workbench.startupEditor": "none", "chat.disableAIFeatures": true, "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false, "update.mode": "none", "telemetry.telemetryLevel": "off",
  "workbench.enableExperiments": false, "workbench.tips.enabled": false, "extensions.ignoreRecommendations": true,
  "window.commandCenter": false, "editor.hover.delay": 100, "editor.hover.sticky": true,
  "workbench.secondarySideBar.defaultVisibility": "hidden", "workbench.colorTheme": "Default Dark Modern",
  $trust_settings
  "newt.interpreter": "$PY" }
JSON
  (
    # every tool's scratch stays in $RUN (code-server, Chromium and the extension host write to HOME/TMPDIR)
    export HOME="$RUN/home" XDG_CONFIG_HOME="$RUN/home/.config" XDG_DATA_HOME="$RUN/home/.local/share" \
           XDG_STATE_HOME="$RUN/home/.local/state" XDG_CACHE_HOME="$RUN/home/.cache" TMPDIR="$RUN/tmp" \
           NEWT_CACHE_DIR="$RUN/newt-cache"
    # the probe first (a folder), then the .vsix through code-server's own installer
    cp -r "$HERE/probe" "$RUN/ext/newt-e2e.probe-0.0.1"
    node "$CS/out/node/entry.js" --user-data-dir "$RUN/ud" --extensions-dir "$RUN/ext" \
      --install-extension "$VSIX" >"$RUN/install.log" 2>&1 || { cat "$RUN/install.log"; exit 1; }
    # an interpreter that cannot import the server (isolated mode ignores PYTHONPATH)
    mkdir -p "$RUN/badpy" && printf '#!/bin/sh\nexec %s -I "$@"\n' "$C/venv/bin/python" > "$RUN/badpy/python" && chmod +x "$RUN/badpy/python"
    export NEWT_E2E_OUT="$RUN/report.json" NEWT_E2E_EXPECT="$HERE/expected.json" NEWT_E2E_MODE="$mode" \
           NEWT_E2E_BAD_PYTHON="$RUN/badpy/python"
    setsid node "$CS/out/node/entry.js" --auth none --bind-addr "127.0.0.1:$port" --disable-telemetry \
      --disable-update-check "${trust_flag[@]}" --user-data-dir "$RUN/ud" --extensions-dir "$RUN/ext" \
      "$RUN/ws" >"$RUN/code-server.log" 2>&1 &
    CS_PID=$!
    stop_cs() {
      kill -TERM -- "-$CS_PID" 2>/dev/null || true
      for _ in $(seq 20); do kill -0 -- "-$CS_PID" 2>/dev/null || return 0; sleep 0.5; done
      kill -KILL -- "-$CS_PID" 2>/dev/null || true
    }
    trap stop_cs EXIT
    for _ in $(seq 120); do curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.5; done
    local shot=()
    [ "$mode" = trusted ] && shot=("$RUN/workbench.png")
    NODE_PATH="$C/playwright/node_modules" node "$HERE/drive.js" "http://127.0.0.1:$port/?folder=$RUN/ws" \
      "$RUN/report.json" "$RUN/ui.json" "${shot[@]}"
    rc=$?
    stop_cs; trap - EXIT
    python3 "$HERE/summarize.py" vscode-$mode "$RUN/report.json" "$RUN/ui.json" || rc=1
    if [ "$rc" != 0 ]; then
      echo "--- code-server log: $RUN/code-server.log"; tail -20 "$RUN/code-server.log"
      find "$RUN/ud/logs" -name 'Newt.log' -exec sh -c 'echo "--- $1"; tail -60 "$1"' _ {} \;
      find "$RUN/ud/logs" -name 'exthost.log' -exec sh -c 'echo "--- $1"; grep -iE "error|newt" "$1" | tail -30' _ {} \;
    fi
    if [ "$mode" = trusted ] && [ -f "$RUN/workbench.png" ]; then
      echo "screenshot: $RUN/workbench.png"
      if [ "${NEWT_E2E_SCREENSHOT:-0}" = 1 ] && [ "$rc" = 0 ]; then
        mkdir -p "$REPO/docs/images"
        cp "$RUN/workbench.png" "$REPO/docs/images/vscode-diagnostic-hover.png"
        cp "$RUN/workbench.png" "$EXT/images/workbench.png"
        cp "$RUN/workbench-sass.png" "$REPO/docs/images/vscode-compile-sass.png"
        cp "$RUN/workbench-sass.png" "$EXT/images/compile-sass.png"
        echo "copied to docs/images/vscode-{diagnostic-hover,compile-sass}.png and vscode-extension/images/{workbench,compile-sass}.png"
      fi
    fi
    exit "$rc"
  )
}

if [ "${NEWT_E2E_ONLY:-}" != nvim ]; then
  vscode_session trusted; record "VS Code (code-server): trusted workspace" $?
  vscode_session restricted; record "VS Code (code-server): Restricted Mode" $?
fi

# -- 4. Neovim --------------------------------------------------------------------------------------
if [ "${NEWT_E2E_ONLY:-}" != vscode ]; then
  RUN=$(mktemp -d "$C/runs/n.XXXXXX")
  mkdir -p "$RUN/home" "$RUN/tmp"
  cp -r "$HERE/workspace" "$RUN/ws"
  cp "$HERE"/../lsp/fixtures/{triton_add,triton_errors,helion_kernels,perf_matmul}.py "$RUN/ws/kernels/"
  (
    export HOME="$RUN/home" XDG_CONFIG_HOME="$RUN/home/.config" XDG_DATA_HOME="$RUN/home/.local/share" \
           XDG_STATE_HOME="$RUN/home/.local/state" XDG_CACHE_HOME="$RUN/home/.cache" TMPDIR="$RUN/tmp" \
           NEWT_CACHE_DIR="$RUN/newt-cache" NEWT_E2E_WS="$RUN/ws" NEWT_E2E_PYTHON="$PY" NEWT_E2E_REPO="$REPO" \
           NEWT_E2E_EXPECT="$HERE/expected.json" NEWT_E2E_OUT="$RUN/report.json"
    timeout 600 "$NVIM" --headless --clean -l "$HERE/nvim_e2e.lua" >"$RUN/nvim.log" 2>&1
    rc=$?
    python3 "$HERE/summarize.py" neovim "$RUN/report.json" || rc=1
    [ "$rc" != 0 ] && { echo "--- $RUN/nvim.log"; tail -40 "$RUN/nvim.log"; }
    exit "$rc"
  ); record "Neovim: built-in LSP client" $?
fi

passed=0; failed=0
for r in "${results[@]}"; do
  if [ "${r##*:}" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
say "done"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
