#!/usr/bin/env node
// The codex-mcp-bridge launcher: runs the server's binary from the platform package npm
// installed beside this one (an optional dependency), with this process's arguments, standard
// streams, environment and exit status. It downloads nothing: a platform without a package is
// named, with what to do instead.
"use strict";

const { spawn } = require("node:child_process");
const { existsSync } = require("node:fs");
const { constants } = require("node:os");
const path = require("node:path");

// `${process.platform}-${process.arch}` -> the package holding that platform's binary
const PLATFORM_PACKAGES = { "linux-x64": "codex-mcp-bridge-linux-x64" };
const FROM_SOURCE = "build it from source: cargo install --locked codex-mcp-bridge";

function fail(message) {
  process.stderr.write(`codex-mcp-bridge: ${message}\n`);
  process.exit(1);
}

function isMusl() {
  if (process.platform !== "linux") return false;
  const header = process.report?.getReport?.().header;
  return header !== undefined && !header.glibcVersionRuntime;
}

function binaryPath() {
  const platform = `${process.platform}-${process.arch}`;
  const pkg = PLATFORM_PACKAGES[platform];
  const packaged = Object.keys(PLATFORM_PACKAGES).join(", ");
  if (pkg === undefined) {
    fail(`no package of the server for ${platform} (packaged: ${packaged}); ${FROM_SOURCE}`);
  }
  if (isMusl()) {
    fail(`no package of the server for ${platform} with musl libc (packaged: ${packaged}, glibc); ${FROM_SOURCE}`);
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    fail(
      `the package ${pkg}, which holds the server for ${platform}, is not installed ` +
        `(npm leaves optional dependencies out with --omit=optional or --no-optional); ` +
        `reinstall codex-mcp-bridge with optional dependencies, or ${FROM_SOURCE}`,
    );
  }
  const bin = path.join(dir, "bin", "codex-mcp-bridge");
  if (!existsSync(bin)) fail(`${pkg} has no bin/codex-mcp-bridge (${bin}): reinstall codex-mcp-bridge`);
  const needs = require(`${pkg}/package.json`).codexMcpBridge?.glibc;
  const has = process.report?.getReport?.().header.glibcVersionRuntime;
  if (needs && has && olderThan(has, needs)) {
    fail(`the server for ${platform} needs glibc ${needs} or later, and this system has ${has}; ${FROM_SOURCE}`);
  }
  return bin;
}

// whether dotted version `a` is older than `b`
function olderThan(a, b) {
  const [x, y] = [a, b].map((v) => v.split(".").map(Number));
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) < (y[i] ?? 0);
  }
  return false;
}

const bin = binaryPath();
const args = process.argv.slice(2);

// Where Node can replace itself (22.15 and later), the binary takes this very process: its pid,
// its stdio, its signals and its exit status are the host's directly.
if (typeof process.execve === "function") {
  // Node ignores SIGXFSZ, and an ignored signal stays ignored across execve: a handler resets it
  process.on("SIGXFSZ", () => {});
  process.execve(bin, [bin, ...args], process.env);
}

// Otherwise a child on the same stdio; the signals a host sends are passed on, and the child's
// end is this process's: its exit code, or death by the same signal.
// The handlers come first: a signal between the spawn and them would end this process and leave
// the server running without it.
let child;
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"]) {
  process.on(signal, () => {
    try {
      child?.kill(signal);
    } catch {
      // the child is gone already: its exit is on its way
    }
  });
}
child = spawn(bin, args, { stdio: "inherit" });
child.on("error", (e) => fail(`could not start ${bin}: ${e.message}`));
child.on("exit", (code, signal) => {
  if (signal === null) process.exit(code ?? 1);
  process.removeAllListeners(signal);
  process.exitCode = 128 + (constants.signals[signal] ?? 0);
  process.kill(process.pid, signal);
});
