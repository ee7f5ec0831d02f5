#!/usr/bin/env bash
# Installs the real clients the end-to-end tests run (npm run e2e) into .clients/, one folder a version,
# never as dependencies of the project. A client already there is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

install() { # name package version
  local dir=".clients/$1-$3"
  if [ -f "$dir/.installed" ]; then return; fi
  mkdir -p "$dir"
  echo "installing $2@$3 into $dir"
  if npm install --prefix "$dir" --no-save --no-audit --no-fund --no-package-lock --loglevel=error "$2@$3" >"$dir/install.log" 2>&1; then
    touch "$dir/.installed"
  else
    echo "could not install $2@$3 (see $dir/install.log); its tests will be skipped"
  fi
}

install claude-code @anthropic-ai/claude-code "$(sed -n "s/^export const CLAUDE_CODE_VERSION = '\(.*\)'$/\1/p" test/e2e/claude-code.test.ts)"
install codex @openai/codex "$(sed -n "s/^export const CODEX_VERSION = '\(.*\)'$/\1/p" test/e2e/codex.test.ts)"
install opencode opencode-ai "$(sed -n "s/^export const OPENCODE_VERSION = '\(.*\)'$/\1/p" test/e2e/opencode.test.ts)"
install gemini-cli @google/gemini-cli "$(sed -n "s/^export const GEMINI_CLI_VERSION = '\(.*\)'$/\1/p" test/e2e/gemini-cli.test.ts)"
