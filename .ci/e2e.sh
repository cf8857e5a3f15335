#!/usr/bin/env bash
# Editor end-to-end tests (VS Code extension build + code-server + Neovim). See tests/e2e/e2e.sh.
# Installs its tooling under ${NEWT_E2E_CACHE:-~/.cache/newt-e2e} (minutes the first time, seconds after).
# Exit status 77: the tooling could not be installed on this machine (the reason is printed).
exec bash "$(cd "$(dirname "$0")/.." && pwd)/tests/e2e/e2e.sh" "$@"
